"""Each secret of ``allowed_env`` bound to its purpose and destination: the identity secret is
never a model key, a connection's key goes to its hosts only, a model key to its model's host
only. Refused at load with the file, field and variable named, and nothing sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hostcall.agents import load_agents
from hostcall.errors import AgentConfigError
from hostcall.settings import DEMO_AGENTS
from tests.support.harness import Harness, write_agent
from tests.support.provider import DONE, FakeProvider, Reply, call_part, chunk, text
from tests.unit.test_openai_compat import start_or_refusal

IDENTITY_SECRET = "the-shop-identity-secret-0123456789abcdef"
MODEL_KEY = "sk-the-model-key"
HOLIDAYS_KEY = "holidays-key-123"
ENV = {"SHOP_IDENTITY_SECRET": IDENTITY_SECRET, "OPENAI_API_KEY": MODEL_KEY,
       "HOLIDAYS_KEY": HOLIDAYS_KEY}  # fmt: skip
IDENTITY = {"issuer": "https://shop.example", "audience": "hostcall",
            "secret_env": "SHOP_IDENTITY_SECRET"}  # fmt: skip
OPENAI = "api.openai.com:443"
HOLIDAYS = {"hosts": ["127.0.0.1:8002"], "headers": {"X-Api-Key": {"env": "HOLIDAYS_KEY"}}}
BOUND = {
    "OPENAI_API_KEY": {"for": "model", "hosts": [OPENAI]},
    "SHOP_IDENTITY_SECRET": {"for": "identity"},
    "HOLIDAYS_KEY": {"for": "connection", "connection": "holidays"},
}


def target(provider: FakeProvider) -> str:
    return f"127.0.0.1:{provider.port}"


def platform_file(agents: Path, provider: FakeProvider, allowed_env: Any) -> None:
    """The environment allows the provider's host: a host the agent file's author can read."""
    connections = {"holidays": HOLIDAYS} if "HOLIDAYS_KEY" in allowed_env else {}
    write_agent(agents, {
        "environments": {"default": {"allowed_hosts": [target(provider), OPENAI]}},
        "allowed_env": allowed_env,
        "connections": connections,
    }, name="_platform.json")  # fmt: skip


def talker(agents: Path, provider: FakeProvider, key_env: str) -> None:
    write_agent(agents, {"id": "talker", "model": {"kind": "openai", "model": "m",
                "base_url": provider.base_url, "api_key_env": key_env}})  # fmt: skip


def shop(agents: Path) -> None:
    """An agent whose visitors are identified with the shared HS256 secret."""
    write_agent(agents, {"id": "shop", "identity": IDENTITY})


def problems_of(agents: Path, environ: dict[str, str] = ENV) -> list[str]:
    try:
        load_agents(agents, environ)
    except AgentConfigError as exc:
        return exc.problems
    return []


@pytest.fixture
def agents(tmp_path: Path, provider: FakeProvider) -> Path:
    provider.replies.append(Reply([text("ok"), DONE]))
    return tmp_path / "agents"


def test_the_identity_secret_bound_to_identity_is_never_a_model_key(
    tmp_path: Path, agents: Path, provider: FakeProvider
) -> None:
    platform_file(agents, provider, BOUND)
    shop(agents)
    talker(agents, provider, "SHOP_IDENTITY_SECRET")
    assert start_or_refusal(tmp_path, agents, ENV) == [
        "talker.json: model: 'api_key_env': environment variable 'SHOP_IDENTITY_SECRET' is "
        "bound to 'identity' (it verifies visitors' tokens and is sent nowhere) in "
        "'allowed_env' of _platform.json: it may not be used as the key of a model on "
        f"{target(provider)}"
    ]
    assert provider.received == []


def test_a_listed_identity_secret_is_not_also_a_model_key(
    tmp_path: Path, agents: Path, provider: FakeProvider
) -> None:
    """The list form, as deployed before bindings: the identity block's use comes first,
    whichever file sorts first, and the model's is refused with the binding to write."""
    platform_file(agents, provider, ["OPENAI_API_KEY", "SHOP_IDENTITY_SECRET"])
    shop(agents)
    write_agent(agents, {**json.loads((agents / "shop.json").read_text()), "id": "zshop"})
    talker(agents, provider, "SHOP_IDENTITY_SECRET")
    assert start_or_refusal(tmp_path, agents, ENV) == [
        "talker.json: model: 'api_key_env': environment variable 'SHOP_IDENTITY_SECRET' is "
        "listed in 'allowed_env' of _platform.json without a purpose and is already an "
        "identity block's secret (shop.json: identity: 'secret_env'): a variable serves one "
        f"purpose, so it may not also be used as the key of a model on {target(provider)}; "
        "bind each secret to its use, e.g. 'allowed_env': "
        '{"SHOP_IDENTITY_SECRET": {"for": "identity"}}, and give this one a variable of its own'
    ]
    assert provider.received == []


@pytest.mark.parametrize("form", ["bound", "listed"])
def test_a_connections_key_is_never_a_model_key(
    tmp_path: Path, agents: Path, provider: FakeProvider, form: str
) -> None:
    platform_file(agents, provider, BOUND if form == "bound" else ["HOLIDAYS_KEY"])
    talker(agents, provider, "HOLIDAYS_KEY")
    [problem] = start_or_refusal(tmp_path, agents, ENV)
    assert problem.startswith(
        "talker.json: model: 'api_key_env': environment variable 'HOLIDAYS_KEY' is "
    )
    assert "connection 'holidays'" in problem
    assert problem.endswith(f"the key of a model on {target(provider)}") == (form == "bound")
    assert provider.received == []


def test_a_model_key_is_sent_to_no_host_but_its_own(
    tmp_path: Path, agents: Path, provider: FakeProvider
) -> None:
    platform_file(agents, provider, BOUND)
    talker(agents, provider, "OPENAI_API_KEY")
    assert start_or_refusal(tmp_path, agents, ENV) == [
        "talker.json: model: 'api_key_env': environment variable 'OPENAI_API_KEY' is bound to "
        f"'model' on {OPENAI} in 'allowed_env' of _platform.json: it may not be used as the "
        f"key of a model on {target(provider)}"
    ]
    assert provider.received == []


def test_a_listed_model_key_serves_one_host(
    tmp_path: Path, agents: Path, provider: FakeProvider
) -> None:
    platform_file(agents, provider, ["OPENAI_API_KEY"])
    write_agent(agents, {"id": "assistant", "model": {
        "kind": "openai", "model": "m", "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY"}})  # fmt: skip
    talker(agents, provider, "OPENAI_API_KEY")
    [problem] = start_or_refusal(tmp_path, agents, ENV)
    assert problem.startswith(
        "talker.json: model: 'api_key_env': environment variable 'OPENAI_API_KEY' is listed "
        f"in 'allowed_env' of _platform.json without a purpose and is already the key of a "
        f"model on {OPENAI} (assistant.json: model: 'api_key_env')"
    )
    assert f'{{"OPENAI_API_KEY": {{"for": "model", "hosts": ["{OPENAI}"]}}}}' in problem
    assert provider.received == []


@pytest.mark.parametrize("allowed_env", [BOUND, ["OPENAI_API_KEY", "SHOP_IDENTITY_SECRET",
                                                 "HOLIDAYS_KEY"]])  # fmt: skip
def test_each_secret_used_for_its_own_purpose_loads_and_is_sent_where_bound(
    tmp_path: Path, agents: Path, provider: FakeProvider, allowed_env: Any
) -> None:
    bound = json.loads(json.dumps(allowed_env))
    if isinstance(bound, dict):
        bound["OPENAI_API_KEY"]["hosts"].append(target(provider))
    platform_file(agents, provider, bound)
    shop(agents)
    talker(agents, provider, "OPENAI_API_KEY")
    assert start_or_refusal(tmp_path, agents, ENV) == []
    assert [r.headers["authorization"] for r in provider.received] == [f"Bearer {MODEL_KEY}"]


def test_the_demo_agents_and_their_platform_file_still_load() -> None:
    assert list(load_agents(DEMO_AGENTS, {})) == ["planner"]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (
            {
                "mcp_servers": {
                    "crm": {
                        "url": "http://127.0.0.1:9/mcp",
                        "headers": {"Authorization": {"env": "HOLIDAYS_KEY"}},
                    }
                }
            },
            "_platform.json: mcp server 'crm': header 'Authorization': environment variable "
            "'HOLIDAYS_KEY' is listed in 'allowed_env' of _platform.json without a purpose and "
            "is already a header of connection 'holidays'",
        ),
        (
            {
                "connections": {
                    "holidays": HOLIDAYS,
                    "other": {
                        "hosts": ["127.0.0.1:9"],
                        "headers": {"Authorization": {"env": "HOLIDAYS_KEY"}},
                    },
                }
            },
            "_platform.json: connection 'other': header 'Authorization': environment variable "
            "'HOLIDAYS_KEY' is listed in 'allowed_env' of _platform.json without a purpose",
        ),
    ],
)
def test_a_connections_key_goes_to_no_other_host(
    tmp_path: Path, extra: dict[str, Any], says: str
) -> None:
    write_agent(tmp_path, {"allowed_env": ["HOLIDAYS_KEY"], "connections": {"holidays": HOLIDAYS},
                           **extra}, name="_platform.json")  # fmt: skip
    write_agent(tmp_path, {"id": "plain"})
    [problem] = problems_of(tmp_path)
    assert problem.startswith(says), problem
    assert HOLIDAYS_KEY not in problem


def test_a_key_bound_to_one_connection_is_refused_to_another(tmp_path: Path) -> None:
    other = {"hosts": ["127.0.0.1:9"], "headers": {"Authorization": {"env": "HOLIDAYS_KEY"}}}
    write_agent(tmp_path, {"allowed_env": BOUND, "connections": {
        "holidays": HOLIDAYS, "other": other}}, name="_platform.json")  # fmt: skip
    write_agent(tmp_path, {"id": "plain"})
    assert problems_of(tmp_path) == [
        "_platform.json: connection 'other': header 'Authorization': environment variable "
        "'HOLIDAYS_KEY' is bound to connection 'holidays' in 'allowed_env' of _platform.json: "
        "it may not be used as a header of connection 'other'"
    ]


@pytest.mark.parametrize(
    ("binding", "refused"),
    [
        ({"for": "mcp_server", "server": "crm"}, None),
        ({"for": "mcp_server", "server": "files"}, "bound to MCP server 'files'"),
        ({"for": "model", "hosts": [OPENAI]}, f"bound to 'model' on {OPENAI}"),
        ({"for": "identity"}, "bound to 'identity'"),
    ],
)
def test_an_mcp_servers_secret_goes_to_that_server_only(
    tmp_path: Path, binding: dict[str, Any], refused: str | None
) -> None:
    crm = {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": {"env": "CRM_TOKEN"}}}
    files = {"url": "http://127.0.0.1:10/mcp", "headers": {}}
    write_agent(tmp_path, {"allowed_env": {"CRM_TOKEN": binding},
                           "mcp_servers": {"crm": crm, "files": files}},
                name="_platform.json")  # fmt: skip
    write_agent(tmp_path, {"id": "plain"})
    problems = problems_of(tmp_path, {**ENV, "CRM_TOKEN": "Bearer crm-token"})
    if refused is None:
        assert problems == []
    else:
        [problem] = problems
        assert problem.startswith(
            "_platform.json: mcp server 'crm': header 'Authorization': environment variable "
            f"'CRM_TOKEN' is {refused}"
        )
        assert problem.endswith("it may not be used as a secret of MCP server 'crm'")


@pytest.mark.parametrize(
    ("allowed_env", "says"),
    [
        ({"K": {"for": "anything"}}, "allowed_env: 'K': 'for' must be one of model, identity"),
        ({"K": {"for": "model"}}, "allowed_env: 'K': a 'model' binding has exactly the keys"),
        ({"K": {"for": "model", "hosts": []}}, "'hosts' must list the 'host:port'"),
        ({"K": {"for": "model", "hosts": ["*:443"]}}, "hosts: '*:443'"),
        ({"K": {"for": "connection", "connection": ""}}, "'connection' must name the connection"),
        ({"HOSTCALL_SECRET_KEYS": {"for": "identity"}}, "'HOSTCALL_SECRET_KEYS' is one of the"),
        ("K", "'allowed_env' must list environment variable names or bind each to its use"),
    ],
)  # fmt: skip
def test_a_bad_binding_stops_loading(tmp_path: Path, allowed_env: Any, says: str) -> None:
    write_agent(tmp_path, {"allowed_env": allowed_env}, name="_platform.json")
    write_agent(tmp_path, {"id": "plain"})
    [problem] = problems_of(tmp_path)
    assert problem.startswith("_platform.json: ") and says in problem, problem


def test_a_run_in_flight_sends_nothing_once_its_key_is_bound_elsewhere(
    tmp_path: Path, provider: FakeProvider
) -> None:
    """The platform is live: the operator binds the model's key to another host while a run
    waits on a call; the run's next step is refused before any connection."""
    agents = tmp_path / "agents"
    tool = {"name": "ask_page", "description": "Asks the page.", "effect": "read",
            "input_schema": {"type": "object", "properties": {}},
            "output_schema": {"type": "object", "properties": {}}}  # fmt: skip
    write_agent(agents, {"id": "talker", "tools": [tool], "model": {
        "kind": "openai", "model": "m", "base_url": provider.base_url,
        "api_key_env": "OPENAI_API_KEY"}})  # fmt: skip
    platform_file(agents, provider, ["OPENAI_API_KEY"])
    provider.replies.append(Reply([call_part(0, call_id="c1", name="ask_page", arguments="{}"),
                                   chunk({}, "tool_calls"), DONE]))  # fmt: skip
    h = Harness(tmp_path, agents, environ=ENV)
    try:
        conv = h.conversation("talker")
        h.say(conv, "hello")
        call = h.open_call(conv)
        assert len(provider.received) == 1
        write_agent(agents, {"id": "talker", "tools": [tool]})  # now scripted
        platform_file(agents, provider, {"OPENAI_API_KEY": {"for": "model", "hosts": [OPENAI]}})
        h.runtime.reload_agents()
        assert h.answer(call, {}).status_code == 200
        snap = h.settle(conv)
        assert snap["run"]["status"] == "failed"
        assert snap["run"]["error"]["code"] == "model_unreachable"
        assert len(provider.received) == 1  # the step after the answer sent nothing
    finally:
        h.stop()
