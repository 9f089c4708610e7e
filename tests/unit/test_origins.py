"""hostcall/origins.py and ``allowed_origins``: nonsense refused with a reason, the rest
normalised to what a browser sends."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostcall.agents import load_agents
from hostcall.cli import main
from hostcall.origins import BadOrigin, normalize_origin
from tests.support.harness import planner_definition, write_agent
from tests.unit.test_agent_files import agents_folder, problems_of

NONSENSE = {
    "http://localhost:*": "wildcards",
    "https://*.example.com": "wildcards",
    "http://*": "wildcards",
    "https://example.com;script-src *": "spaces",
    "https://example.com;script-src": "no path, query, fragment, user or parameters",
    "http://example.com:99999": "1 to 65535",
    "http://example.com:0": "1 to 65535",
    "http://example.com:": "port is empty",
    "https://example.com/": "no path",
    "https://user@example.com": "user",
    "ftp://example.com": "http:// or https://",
    "example.com": "http:// or https://",
    "https://exa_mple.com": "not a valid domain name",
    "https://[::1": "IPv6",
    "": "http:// or https://",
}
NORMALISED = {
    "https://EXAMPLE.com": "https://example.com",
    "HTTPS://Example.COM:8443": "https://example.com:8443",
    "https://example.com:443": "https://example.com",
    "http://example.com:80": "http://example.com",
    "https://bücher.example": "https://xn--bcher-kva.example",
    "https://BÜCHER.example:8443": "https://xn--bcher-kva.example:8443",
    "http://127.0.0.1:8300": "http://127.0.0.1:8300",
    "http://[::1]:8000": "http://[::1]:8000",
    "http://localhost:8001": "http://localhost:8001",
}


@pytest.mark.parametrize(("origin", "reason"), NONSENSE.items())
def test_nonsense_origin_is_refused_with_its_reason(origin: str, reason: str) -> None:
    with pytest.raises(BadOrigin) as caught:
        normalize_origin(origin)
    assert reason in caught.value.reason, caught.value.reason
    assert repr(origin) in str(caught.value)


@pytest.mark.parametrize(("origin", "expected"), NORMALISED.items())
def test_origin_is_normalised_as_a_browser_sends_it(origin: str, expected: str) -> None:
    assert normalize_origin(origin) == expected


def test_loading_reports_every_nonsense_origin_of_an_agent(tmp_path: Path) -> None:
    data = planner_definition()
    data["allowed_origins"] = list(NONSENSE)
    write_agent(agents_folder(tmp_path), data, name="agent.json")
    problems = problems_of(tmp_path)
    assert len(problems) == len(NONSENSE), problems
    for origin, reason in NONSENSE.items():
        assert any(repr(origin) in p and reason in p for p in problems), (origin, problems)


def test_an_agent_keeps_its_origins_normalised(tmp_path: Path) -> None:
    data = planner_definition()
    data["allowed_origins"] = list(NORMALISED)
    write_agent(agents_folder(tmp_path), data, name="agent.json")
    agent = load_agents(tmp_path, {})["planner"]
    assert agent.allowed_origins == tuple(dict.fromkeys(NORMALISED.values()))


def test_allow_origin_flag_refuses_nonsense(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--allow-origin", "https://*.example.com"]) == 2
    assert "wildcards are not supported" in capsys.readouterr().err
