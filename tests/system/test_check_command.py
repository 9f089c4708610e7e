"""``hostcall check`` and ``hostcall serve`` on agent files, run as a user types them: one
clear line per mistake, and exit status 1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from hostcall.settings import DEMO_AGENTS, ROOT
from tests.support.harness import planner_definition, write_agent
from tests.unit.test_agent_files import DEMO_TOOLS, MISTAKES, agents_folder, bad_definition
from tests.unit.test_origins import NONSENSE


def check_cli(
    directory: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hostcall", "check", "--agents", str(directory)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **(env or {})},
    )


def test_check_refuses_a_model_key_read_from_the_servers_secrets_even_when_set(
    tmp_path: Path,
) -> None:
    agents_folder(tmp_path)
    agent = planner_definition()
    agent["model"] = {"kind": "openai", "base_url": "http://127.0.0.1:8002/v1", "model": "m",
                      "api_key_env": "HOSTCALL_SECRET_KEYS"}  # fmt: skip
    write_agent(tmp_path, agent)
    done = check_cli(tmp_path, {"HOSTCALL_SECRET_KEYS": "the-signing-keys"})
    assert done.returncode == 1, done
    assert done.stderr == (
        "planner.json: model: 'api_key_env': environment variable 'HOSTCALL_SECRET_KEYS' is "
        "one of the server's own settings (HOSTCALL_*), never given to an agent\n"
    )
    assert "the-signing-keys" not in done.stdout + done.stderr


def test_check_prints_one_line_per_bad_file_and_exits_1(tmp_path: Path) -> None:
    agents_folder(tmp_path)
    for mistake in MISTAKES:
        write_agent(tmp_path, bad_definition(mistake), name=f"{mistake.id}.json")
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    done = check_cli(tmp_path)
    assert done.returncode == 1, done
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == len(MISTAKES) + 1, done.stderr
    for mistake in MISTAKES:
        [line] = [line for line in lines if line.startswith(f"{mistake.id}.json: ")]
        for words in mistake.says:
            assert words in line, (words, line)
    assert any(line.startswith("broken.json: not valid JSON") for line in lines)


def test_check_accepts_the_demo_agents() -> None:
    done = check_cli(DEMO_AGENTS)
    assert done.returncode == 0, done.stderr
    tools = f"{len(DEMO_TOOLS)} tools: {', '.join(DEMO_TOOLS)}"
    assert done.stdout == f"ok: planner ({tools})\n"


def test_serve_with_bad_agents_exits_1_and_prints_the_problems(tmp_path: Path) -> None:
    agents = agents_folder(tmp_path / "agents")
    write_agent(agents, bad_definition(MISTAKES[0]), name="agent.json")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # run(timeout=...) kills the server if it starts anyway, so nothing is left running.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hostcall",
            "serve",
            "--agents",
            str(agents),
            "--db",
            str(tmp_path / "hostcall.db"),
            "--port",
            str(port),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1, done
    lines = done.stderr.splitlines()
    assert lines[0] == f"hostcall: the agent files in {agents} have problems:"
    assert lines[1].startswith("  - agent.json: tool '1archive': 'name'")
    assert len(lines) == 2, done.stderr


def test_check_reports_every_nonsense_origin_of_an_agent(tmp_path: Path) -> None:
    data = planner_definition()
    data["allowed_origins"] = list(NONSENSE)
    write_agent(agents_folder(tmp_path), data, name="agent.json")
    done = check_cli(tmp_path)
    assert done.returncode == 1 and "wildcards are not supported" in done.stderr


def test_check_refuses_a_pattern_re2_cannot_take_naming_file_rule_and_field(
    tmp_path: Path,
) -> None:
    agents_folder(tmp_path)
    agent = planner_definition()
    agent["model"]["rules"][0]["match"] = r"(?i)(\w+) \1"
    agent["tools"][0]["input_schema"]["properties"]["boardId"]["pattern"] = "^(?=b)"
    write_agent(tmp_path, agent, name="planner.json")
    done = check_cli(tmp_path)
    assert done.returncode == 1, done
    assert done.stdout == ""
    tool = agent["tools"][0]["name"]
    assert done.stderr.splitlines() == [
        f"planner.json: tool {tool!r}: 'input_schema' has a pattern at /properties/boardId "
        "that is not a valid regular expression in RE2's syntax (linear time; docs/agents.md): "
        "invalid perl operator: (?=; lookahead (?=...) is not supported",
        "planner.json: model: rule #1: 'match' is not a valid regular expression in RE2's "
        "syntax (linear time; docs/agents.md): invalid escape sequence: \\1; backreferences "
        "(\\1, (?P=name)) are not supported",
    ]


def test_check_names_an_identity_block_s_mistakes_and_never_prints_its_secret(
    tmp_path: Path,
) -> None:
    agents_folder(tmp_path)
    agent = planner_definition()
    agent["identity"] = {"issuer": "https://shop.example", "audience": "hostcall",
                         "secret_env": "HOSTCALL_SECRET_KEYS", "algorithms": ["none"]}  # fmt: skip
    write_agent(tmp_path, agent)
    done = check_cli(tmp_path, {"HOSTCALL_SECRET_KEYS": "the-signing-keys"})
    assert done.returncode == 1, done
    assert "planner.json: identity: 'secret_env': environment variable" in done.stderr
    assert "planner.json: identity: 'algorithms': 'none' cannot be used with a secret" in (
        done.stderr
    )
    assert "the-signing-keys" not in done.stdout + done.stderr


IDENTITY_SECRET = "the-shop-identity-secret-0123456789abcdef"


def identified_site(directory: Path, allowed_env: object) -> dict[str, str]:
    """A platform file listing an identity secret and a model key, an agent verifying its
    visitors with the secret, and the environment that sets both."""
    agents_folder(directory)
    write_agent(directory, {
        "environments": {"demo": {"allowed_hosts": ["127.0.0.1:8002", "api.openai.com:443"]}},
        "allowed_env": allowed_env,
    }, name="_platform.json")  # fmt: skip
    write_agent(directory, {"id": "shop", "environment": "demo", "identity": {
        "issuer": "https://shop.example", "audience": "hostcall",
        "secret_env": "SHOP_IDENTITY_SECRET"}})  # fmt: skip
    return {"SHOP_IDENTITY_SECRET": IDENTITY_SECRET, "OPENAI_API_KEY": "sk-model-key"}


def test_check_refuses_the_identity_secret_as_a_model_key_on_a_readable_host(
    tmp_path: Path,
) -> None:
    env = identified_site(tmp_path, {
        "SHOP_IDENTITY_SECRET": {"for": "identity"},
        "OPENAI_API_KEY": {"for": "model", "hosts": ["api.openai.com:443"]},
    })  # fmt: skip
    agent = planner_definition()
    agent["model"] = {"kind": "openai", "base_url": "http://127.0.0.1:8002/v1", "model": "m",
                      "api_key_env": "SHOP_IDENTITY_SECRET"}  # fmt: skip
    write_agent(tmp_path, agent)
    done = check_cli(tmp_path, env)
    assert done.returncode == 1, done
    assert done.stderr == (
        "planner.json: model: 'api_key_env': environment variable 'SHOP_IDENTITY_SECRET' is "
        "bound to 'identity' (it verifies visitors' tokens and is sent nowhere) in "
        "'allowed_env' of _platform.json: it may not be used as the key of a model on "
        "127.0.0.1:8002\n"
    )
    assert IDENTITY_SECRET not in done.stdout + done.stderr
    # The model's own key, on its own host, is accepted.
    agent["model"] |= {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}
    write_agent(tmp_path, agent)
    done = check_cli(tmp_path, env)
    assert done.returncode == 0, done.stderr


def test_check_refuses_a_listed_secret_given_a_second_purpose(tmp_path: Path) -> None:
    env = identified_site(tmp_path, ["SHOP_IDENTITY_SECRET"])
    agent = planner_definition()
    agent["model"] = {"kind": "openai", "base_url": "http://127.0.0.1:8002/v1", "model": "m",
                      "api_key_env": "SHOP_IDENTITY_SECRET"}  # fmt: skip
    write_agent(tmp_path, agent)
    done = check_cli(tmp_path, env)
    assert done.returncode == 1, done
    [line] = done.stderr.splitlines()
    assert line.startswith(
        "planner.json: model: 'api_key_env': environment variable 'SHOP_IDENTITY_SECRET' is "
        "listed in 'allowed_env' of _platform.json without a purpose and is already an "
        "identity block's secret (shop.json: identity: 'secret_env')"
    )
    assert '{"SHOP_IDENTITY_SECRET": {"for": "identity"}}' in line
    assert IDENTITY_SECRET not in done.stdout + done.stderr
