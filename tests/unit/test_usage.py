"""Real token usage end to end: a provider's count (or the estimate, where it gives none)
recorded per step, priced by the agent file, counted by the limits, shown in the console."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from hostcall.errors import AgentConfigError
from tests.support.databases import store_url
from tests.support.harness import Harness, allow_hosts, write_agent
from tests.support.provider import DONE, FakeProvider, Reply, chunk, sse, text
from tests.unit.console_client import ConsoleClient

PRICES = {"gpt-4o-mini": {"input": 0.15, "output": 0.60}}


def usage(prompt: int, completion: int) -> bytes:
    return sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}})  # fmt: skip


def reply(words: str, prompt: int, completion: int) -> Reply:
    return Reply([text(words), chunk({}, "stop"), usage(prompt, completion), DONE])


def talker(
    tmp_path: Path, provider: FakeProvider, database_url: str | None = None, **extra: Any
) -> Harness:
    agents = tmp_path / "agents"
    write_agent(agents, {
        "id": "talker", "name": "Talker", "allowed_origins": ["http://testserver"],
        "model": {"kind": "openai", "base_url": provider.base_url, "model": "gpt-4o-mini"},
        "tools": [], **extra,
    })  # fmt: skip
    allow_hosts(agents, provider.base_url)
    return Harness(tmp_path, agents, database_url=database_url)


def cells(html: str, row_attr: str) -> dict[str, str]:
    """The data cells of the first table row with ``row_attr``, by their data-part."""
    row = re.search(rf"<tr[^>]*{re.escape(row_attr)}[^>]*>(.*?)</tr>", html, re.S)
    assert row, f"no row {row_attr} in the page"
    found = re.findall(r'<td data-part="([a-z-]+)">(.*?)</td>', row.group(1), re.S)
    return {part: re.sub(r"<[^>]+>", "", value).strip() for part, value in found}


def test_the_providers_count_is_recorded_priced_and_shown_per_conversation_agent_and_day(
    tmp_path: Path, provider: FakeProvider
) -> None:
    provider.replies += [reply("Hello!", 1200, 300), reply("Again.", 2000, 100)]
    h = talker(tmp_path, provider, prices=PRICES)
    try:
        conv = h.conversation("talker")
        h.say(conv, "hi")
        h.finish(conv)
        h.say(conv, "and again")
        h.finish(conv)
        total = h.call(h.runtime.store.usage_of_conversation, conv.id)
        assert total is not None
        assert (total.input_tokens, total.output_tokens, total.steps, total.estimated) == (
            3200,
            400,
            2,
            0,
        )
        assert total.cost == pytest.approx((3200 * 0.15 + 400 * 0.60) / 1e6)

        ops = ConsoleClient(h.app, h.runtime, "olga", "operator")
        page = ops.http.get("/console/usage")
        assert page.status_code == 200, page.text
        expected = {"steps": "2", "input-tokens": "3200", "output-tokens": "400",
                    "cost": "0.000720", "estimated": "0"}  # fmt: skip
        assert cells(page.text, 'data-agent="talker"') == expected
        assert cells(page.text, "data-day=") == expected
        assert cells(page.text, f'data-conversation="{conv.id}"') == expected
        detail = ops.http.get(f"/console/conversations/{conv.id}")
        assert "3600 tokens (3200 in, 400 out); model steps: 2; cost: 0.000720." in detail.text
        assert 'data-part="usage-estimated"' not in detail.text
        french = ops.http.get("/console/usage?lang=fr")
        assert "Conversations les plus coûteuses" in french.text
    finally:
        h.stop()


def test_a_step_without_a_count_is_estimated_and_says_so(
    tmp_path: Path, provider: FakeProvider
) -> None:
    provider.replies.append(Reply([text("A reply of some forty characters, more."),
                                   chunk({}, "stop"), DONE]))  # fmt: skip
    h = talker(tmp_path, provider)  # no prices either
    try:
        conv = h.conversation("talker")
        h.say(conv, "hello there")
        h.finish(conv)
        total = h.call(h.runtime.store.usage_of_conversation, conv.id)
        assert total is not None
        assert (total.steps, total.estimated, total.cost) == (1, 1, None)
        assert total.output_tokens == 10  # 40 characters at 4 a token
        assert total.input_tokens == 3  # "hello there"
        ops = ConsoleClient(h.app, h.runtime, "olga", "operator")
        row = cells(ops.http.get("/console/usage").text, 'data-agent="talker"')
        assert (row["cost"], row["estimated"]) == ("no price", "1")
        detail = ops.http.get(f"/console/conversations/{conv.id}").text
        assert "Steps estimated because the provider gave no count: 1." in detail
    finally:
        h.stop()


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_a_step_the_model_cut_off_is_estimated_and_one_it_refused_costs_nothing(
    tmp_path: Path, provider: FakeProvider, store: str
) -> None:
    """A provider bills a reply it began and broke off; it does not bill a 429 or a 500."""
    busy = Reply([b'{"error": "busy"}'], status=429, media_type="application/json")
    provider.replies.append(busy)
    provider.replies.append(Reply([text("Here is the plan for the whole of yo")]))  # no [DONE]
    prices = {"gpt-4o-mini": {"input": 1.0, "output": 2.0}}
    with store_url(store) as url:
        h = talker(tmp_path, provider, url, prices=prices)
        try:
            conv = h.conversation("talker")
            h.say(conv, "plan my week")
            assert h.finish(conv)["run"]["error"]["code"] == "model_http_error"
            assert h.call(h.runtime.store.usage_of_conversation, conv.id) is None
            h.say(conv, "plan my week")
            snap = h.finish(conv)
            assert snap["run"]["status"] == "failed"
            total = h.call(h.runtime.store.usage_of_conversation, conv.id)
            assert total is not None
            assert (total.steps, total.estimated) == (1, 1)
            assert total.output_tokens == 9  # the 36 characters it wrote, at 4 a token
            assert total.input_tokens > 0 and total.cost is not None and total.cost > 0
        finally:
            h.stop()


def test_the_conversation_budget_counts_the_providers_tokens_not_the_estimate(
    tmp_path: Path, provider: FakeProvider
) -> None:
    """The estimate of "hi" and "Hello!" is a few tokens; the provider bills 5000."""
    provider.replies.append(reply("Hello!", 4000, 1000))
    h = talker(tmp_path, provider, limits={"model_tokens_per_conversation": 1000})
    try:
        conv = h.conversation("talker")
        h.say(conv, "hi")
        before = h.finish(conv)
        r = h.http.post(f"/api/conversations/{conv.id}/messages", json={"text": "more"},
                        headers=conv.auth)  # fmt: skip
        assert r.status_code == 409, r.text
        assert r.json()["error"]["code"] == "conversation_limit_reached"
        after = h.snapshot(conv)
        assert after["messages"] == before["messages"]  # nothing lost, nothing added
        assert after["run"] == before["run"]
        assert len(provider.received) == 1
    finally:
        h.stop()


@pytest.mark.parametrize(
    ("prices", "problem"),
    [
        ([1, 2], "'prices' must map model names"),
        ({"m": 0.15}, "prices: 'm' must be an object with 'input' and 'output'"),
        ({"m": {"input": 0.15}}, "prices: 'm': 'output' must be a price per million tokens"),
        ({"m": {"input": -1, "output": 1}}, "'input' must be a price per million tokens, 0 or"),
        ({"m": {"input": "0.1", "output": 1}}, "'input' must be a price per million tokens"),
        ({"m": {"input": True, "output": 1}}, "'input' must be a price per million tokens"),
        ({"m": {"input": 1, "output": 1, "per": "k"}}, "prices: 'm': unknown key 'per'"),
    ],
)
def test_bad_prices_stop_the_agent_from_loading_with_the_problem_named(
    tmp_path: Path, prices: Any, problem: str
) -> None:
    agents = tmp_path / "agents"
    write_agent(agents, {"id": "talker", "model": {"kind": "scripted", "rules": []},
                         "prices": prices})  # fmt: skip
    with pytest.raises(AgentConfigError) as caught:
        Harness(tmp_path, agents)
    assert any(problem in line for line in caught.value.problems), caught.value.problems


@pytest.mark.parametrize("days", ["0", "367", "abc", "-1", "1.5"])
def test_the_usage_page_refuses_a_bad_period(harness: Harness, days: str) -> None:
    ops = ConsoleClient(harness.app, harness.runtime, "olga", "operator")
    r = ops.http.get(f"/console/usage?days={days}")
    assert r.status_code == 400, r.text
    assert "days must be a whole number from 1 to 366" in r.text


def test_the_usage_page_needs_a_signed_in_operator(harness: Harness) -> None:
    r = harness.http.get("/console/usage", follow_redirects=False)
    assert r.status_code in (302, 303, 401)


def test_every_step_is_recorded_on_postgresql_inside_the_steps_own_statements(
    tmp_path: Path,
) -> None:
    """There a step's usage rides inside its last append (a finishing step's, fenced) or
    goes with its unit's commit: no statement of its own, and never lost."""
    from hostcall.settings import DEMO_AGENTS
    from tests.support.databases import fresh_schema
    from tests.support.harness import BOARD

    with fresh_schema() as url:
        h = Harness(tmp_path, DEMO_AGENTS, database_url=url)
        try:
            conv = h.conversation()
            h.say(conv, "hello")
            h.finish(conv)
            h.say(conv, "What should I work on next?")
            assert h.answer(h.open_call(conv, "dispatched"), BOARD).status_code == 200
            assert h.finish(conv)["run"]["status"] == "finished"
            total = h.call(h.runtime.store.usage_of_conversation, conv.id)
            assert total is not None
            assert (total.steps, total.estimated) == (3, 3)  # hello; the call; the reply
            runs = h.call(h.runtime.store.usage_by_conversation, 0.0, 10)
            assert [r.key for r in runs] == [conv.id]
        finally:
            h.stop()


@pytest.mark.parametrize(
    ("cost", "shown"),
    [
        (None, ""),
        (0.0, "0.000000"),
        (0.00072, "0.000720"),
        (0.5, "0.500000"),
        (1.0, "1.00"),
        (1234.567, "1,234.57"),
    ],
)
def test_costs_show_six_places_below_one_and_cents_above(cost: float | None, shown: str) -> None:
    from hostcall.console.usage_page import money

    assert money(cost) == shown
