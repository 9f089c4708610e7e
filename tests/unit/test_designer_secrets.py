"""The designer cannot send a secret somewhere its ``allowed_env`` entry does not say: the
identity secret as a model key on a host the designer can read is refused at save, with the
file, field and variable named, and nothing changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import Harness, planner_definition, write_agent
from tests.unit.console_client import ConsoleClient, fast_passwords

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)

SECRET = "the-shop-identity-secret-0123456789abcdef"
DEMO_HOST = "127.0.0.1:8002"  # the demo environment's holiday service: one a designer can read
IDENTITY = {"issuer": "https://shop.example", "audience": "hostcall",
            "secret_env": "SHOP_IDENTITY_SECRET"}  # fmt: skip
SHOP_MODEL = {"kind": "openai", "model": "m", "base_url": f"http://{DEMO_HOST}/v1",
              "api_key_env": "OPENAI_API_KEY"}  # fmt: skip


@pytest.fixture
def designer(harness: Harness) -> ConsoleClient:
    return ConsoleClient(harness.app, harness.runtime, "dana", "designer")


def operator_setup(harness: Harness, allowed_env: Any) -> None:
    """The operator's platform file and an identified agent, as on a live site."""
    platform = json.loads((harness.agents_dir / "_platform.json").read_text())
    write_agent(harness.agents_dir, {**platform, "allowed_env": allowed_env},
                name="_platform.json")  # fmt: skip
    write_agent(harness.agents_dir, {"id": "shop", "environment": "demo", "identity": IDENTITY,
                                     "model": SHOP_MODEL})  # fmt: skip
    harness.settings.environ.update({"SHOP_IDENTITY_SECRET": SECRET, "OPENAI_API_KEY": "sk-1"})
    harness.runtime.reload_agents()
    assert set(harness.runtime.agents) == {"planner", "shop"}


def files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*.json")}


def with_model_key(variable: str) -> dict[str, Any]:
    agent = planner_definition()
    agent["model"] = {**SHOP_MODEL, "api_key_env": variable}
    return agent


def refused(harness: Harness, designer: ConsoleClient, agent: dict[str, Any]) -> list[str]:
    """The save's problem lines, after checking that it changed nothing."""
    before = files(harness.agents_dir)
    live = designer.post("/console/api/agents/planner/check", {"agent": agent}).json()
    r = designer.post("/console/api/agents/planner", {"agent": agent})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "agent_invalid"
    assert error["details"]["problems"] == live["problems"]
    assert files(harness.agents_dir) == before
    assert harness.runtime.agents["planner"].model["kind"] == "scripted"
    assert harness.call(harness.runtime.store.list_agent_versions, "planner") == []
    problems: list[str] = live["problems"]
    assert SECRET not in json.dumps(problems)
    return problems


def test_the_identity_secret_bound_to_identity_is_refused_as_a_model_key_at_save(
    harness: Harness, designer: ConsoleClient
) -> None:
    operator_setup(harness, {"SHOP_IDENTITY_SECRET": {"for": "identity"},
                             "OPENAI_API_KEY": {"for": "model", "hosts": [DEMO_HOST]}})  # fmt: skip
    assert refused(harness, designer, with_model_key("SHOP_IDENTITY_SECRET")) == [
        "planner.json: model: 'api_key_env': environment variable 'SHOP_IDENTITY_SECRET' is "
        "bound to 'identity' (it verifies visitors' tokens and is sent nowhere) in "
        "'allowed_env' of _platform.json: it may not be used as the key of a model on "
        f"{DEMO_HOST}"
    ]


def test_a_listed_identity_secret_is_refused_as_a_model_key_at_save(
    harness: Harness, designer: ConsoleClient
) -> None:
    operator_setup(harness, ["OPENAI_API_KEY", "SHOP_IDENTITY_SECRET"])
    problems = refused(harness, designer, with_model_key("SHOP_IDENTITY_SECRET"))
    assert problems[0] == (
        "planner.json: model: 'api_key_env': environment variable 'SHOP_IDENTITY_SECRET' is "
        "listed in 'allowed_env' of _platform.json without a purpose, and no agent file uses "
        f"it as the key of a model on {DEMO_HOST}: the console does not choose where a secret "
        "goes; the operator binds it in _platform.json, e.g. 'allowed_env': "
        f'{{"SHOP_IDENTITY_SECRET": {{"for": "model", "hosts": ["{DEMO_HOST}"]}}}}'
    )
    already = "is already an identity block's secret (shop.json: identity: 'secret_env')"
    assert already in problems[1]


def test_disabling_the_identified_agent_first_does_not_free_its_secret(
    harness: Harness, designer: ConsoleClient
) -> None:
    """The designer may disable (or edit) the files that use a listed secret: the save
    still may not give it a use none of them has."""
    operator_setup(harness, ["OPENAI_API_KEY", "SHOP_IDENTITY_SECRET"])
    assert designer.form("/console/agents/shop/disable", {}).status_code == 303
    assert "shop" not in harness.runtime.agents
    [problem] = refused(harness, designer, with_model_key("SHOP_IDENTITY_SECRET"))
    assert "'SHOP_IDENTITY_SECRET' is listed in 'allowed_env' of _platform.json without a " in (
        problem
    )


def test_a_model_key_is_refused_on_another_allowed_host_at_save(
    harness: Harness, designer: ConsoleClient
) -> None:
    operator_setup(harness, {"SHOP_IDENTITY_SECRET": {"for": "identity"},
                             "OPENAI_API_KEY": {"for": "model", "hosts": [DEMO_HOST]}})  # fmt: skip
    agent = with_model_key("OPENAI_API_KEY")
    agent["model"]["base_url"] = "http://localhost:8002/v1"  # also in the demo's allowed_hosts
    assert refused(harness, designer, agent) == [
        "planner.json: model: 'api_key_env': environment variable 'OPENAI_API_KEY' is bound to "
        f"'model' on {DEMO_HOST} in 'allowed_env' of _platform.json: it may not be used as "
        "the key of a model on localhost:8002"
    ]


@pytest.mark.parametrize(
    "allowed_env",
    [
        ["OPENAI_API_KEY", "SHOP_IDENTITY_SECRET"],
        {"SHOP_IDENTITY_SECRET": {"for": "identity"},
         "OPENAI_API_KEY": {"for": "model", "hosts": [DEMO_HOST]}},
    ],
)  # fmt: skip
def test_a_model_key_used_as_bound_or_as_already_used_is_saved(
    harness: Harness, designer: ConsoleClient, allowed_env: Any
) -> None:
    operator_setup(harness, allowed_env)
    r = designer.post("/console/api/agents/planner", {"agent": with_model_key("OPENAI_API_KEY")})
    assert r.status_code == 200, r.text
    assert harness.runtime.agents["planner"].model["api_key_env"] == "OPENAI_API_KEY"
