"""Property-based fuzzing of every endpoint: bodies, headers and tokens drawn by
Hypothesis, sent to the real app on a real SQLite file. Whatever arrives:

- the server never answers 5xx (TestClient re-raises any server exception, too);
- every error has the documented shape and one of the documented codes;
- ``/healthz`` still answers afterwards;
- a fixture conversation is byte-identical in the store before and after.

Bounded in time: a fixed number of examples (about half a minute on a loaded machine),
no example database, no shrinking deadline.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcall.protocol.codes import ErrorCode
from tests.support.harness import BOARD, ORIGIN, Conv, Harness
from tests.unit.test_bad_input import READ, create_call, tamper

EXAMPLES = 250
DOCUMENTED = {code.value for code in ErrorCode}
TABLES = {
    "conversations": "id",
    "messages": "conversation_id",
    "runs": "conversation_id",
    "calls": "conversation_id",
    "events": "conversation_id",
}


def rows_of(h: Harness, conversation_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every stored row of one conversation, as bytes-exact tuples."""
    db = sqlite3.connect(h.settings.db_path)
    try:
        return {
            table: db.execute(
                f"SELECT * FROM {table} WHERE {column} = ? ORDER BY 1, 2", (conversation_id,)
            ).fetchall()
            for table, column in TABLES.items()
        }
    finally:
        db.close()


# ---- what a hostile client sends ------------------------------------------------------------

NASTY_TEXT = st.sampled_from(
    ["", " ", "null", "NaN", "<script>alert(1)</script>", "\x00", "\ud800".encode(
        "utf-8", "surrogatepass").decode("utf-8", "replace"), "a" * 300, "../../etc/passwd",
     "c_" + "0" * 16, "k_" + "f" * 16, "%00", "😀" * 10]
)  # fmt: skip
TEXT = st.one_of(st.text(max_size=40), NASTY_TEXT)
NUMBER_TEXT = st.sampled_from(
    ["NaN", "Infinity", "-Infinity", "1e999", "-1e400", "9" * 5000, "0", "-0", "1.5", "1e-400"]
)


def json_text() -> st.SearchStrategy[str]:
    """JSON text, including what strict parsing must refuse (NaN, 1e999, deep nesting)."""
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), TEXT
    ).map(lambda v: json.dumps(v, allow_nan=True))
    leaves = st.one_of(scalars, NUMBER_TEXT)
    nested = st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
            st.dictionaries(TEXT, inner, max_size=4).map(
                lambda d: "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in d.items()) + "}"
            ),
        ),
        max_leaves=12,
    )
    deep = st.integers(60, 1200).map(lambda n: "[" * n + "]" * n)
    return st.one_of(nested, deep)


def body_for(tokens: list[str]) -> st.SearchStrategy[bytes]:
    value = json_text()
    token = st.sampled_from(tokens)
    fields = st.fixed_dictionaries(
        {},
        optional={
            "token": token.map(json.dumps),
            "output": value,
            "error": st.one_of(
                value,
                st.fixed_dictionaries(
                    {
                        "code": st.sampled_from(["no_handler", "client_error", "timeout", "x"]).map(
                            json.dumps
                        ),
                        "message": value,
                    }
                ).map(lambda d: "{" + ",".join(f'"{k}":{v}' for k, v in d.items()) + "}"),
            ),
            "decision": st.one_of(st.sampled_from(['"approve"', '"reject"']), value),
            "input": value,
            "scope": st.one_of(st.sampled_from(['"once"', '"conversation"']), value),
            "reason": value,
            "text": st.one_of(TEXT.map(json.dumps), value),
            "simulate": value,
            "tools": st.one_of(st.just('["read_board_tasks"]'), value),
            "locale": st.one_of(st.sampled_from(['"fr"', '"xx"']), value),
            "parentOrigin": st.one_of(st.just('"http://localhost:8001"'), value),
        },
    ).map(lambda d: ("{" + ",".join(f'"{k}":{v}' for k, v in d.items()) + "}").encode())
    return st.one_of(fields, json_text().map(str.encode), st.binary(max_size=200))


def test_no_input_makes_the_server_fail_or_touch_another_conversation(harness: Harness) -> None:
    h = harness
    # The fixture: a finished conversation, never addressed with a valid credential below.
    fixture = h.conversation()
    h.say(fixture, READ)
    call = h.open_call(fixture, "dispatched")
    assert h.answer(call, BOARD).status_code == 200
    h.settle(fixture)
    settled_token = call["resultToken"]
    # The target: a live conversation whose valid tokens the fuzzer may use.
    target, pending = create_call(h)
    before = rows_of(h, fixture.id)

    tokens = [
        "", "x", "a.b.c", tamper(target.session), tamper(pending["decisionToken"]),
        target.session, pending["decisionToken"], settled_token, fixture.session,
        fixture.stream, "Bearer", "\u00e9" * 10, "." * 200,
    ]  # fmt: skip
    ids = [target.id, pending["toolCallId"], call["toolCallId"], fixture.id, "nope", "%2e%2e"]
    paths = st.one_of(
        st.sampled_from(ids).map(lambda i: ("POST", f"/api/calls/{i}/result")),
        st.sampled_from(ids).map(lambda i: ("POST", f"/api/calls/{i}/decision")),
        st.sampled_from(ids).map(lambda i: ("POST", f"/api/calls/{i}/delivered")),
        st.sampled_from(ids).map(lambda i: ("GET", f"/api/conversations/{i}")),
        st.sampled_from(ids).map(lambda i: ("POST", f"/api/conversations/{i}/messages")),
        st.sampled_from(ids).map(lambda i: ("POST", f"/api/conversations/{i}/capabilities")),
        st.sampled_from(ids).map(lambda i: ("POST", f"/api/conversations/{i}/stream-token")),
        st.sampled_from(["planner", "nope", "../x"]).map(
            lambda a: ("POST", f"/api/agents/{a}/conversations")
        ),
        st.sampled_from(["planner", "nope"]).map(lambda a: ("POST", f"/api/agents/{a}/session")),
        st.sampled_from(["planner", "nope"]).map(lambda a: ("POST", f"/agui/{a}")),
        st.just(("GET", "/healthz")),
        st.sampled_from(["app.js", "a" * 300 + ".js", "../x", ".env", "x.css"]).map(
            lambda n: ("GET", f"/static/{n}")
        ),
        st.sampled_from(["planner", "nope"]).map(lambda a: ("GET", f"/widget/{a}")),
        st.sampled_from(["GET", "DELETE", "PUT"]).map(
            lambda m: (m, "/api/agents/planner/conversations")
        ),
    )  # fmt: skip
    garbage_stream = st.sampled_from(ids).map(
        lambda i: ("GET", f"/api/conversations/{i}/events")
    )  # only with tokens that cannot open a stream (a real one would never end)

    headers = st.fixed_dictionaries(
        {},
        optional={
            "Content-Type": st.sampled_from(
                ["application/json", "text/plain", "application/json; charset=utf-8",
                 "multipart/form-data", "x"]
            ),
            "Origin": st.sampled_from(
                ["http://testserver", "http://localhost:8001", "null", "https://evil.example",
                 "http://localhost:8001.evil.example", ""]
            ),
            "Authorization": st.sampled_from(tokens).map(lambda t: f"Bearer {t}"),
            "Last-Event-ID": TEXT.filter(lambda t: t.isprintable() and "\n" not in t),
            "Cookie": st.sampled_from(tokens).map(lambda t: f"hc_session_x={t}"),
        },
    )  # fmt: skip
    garbage = [t for t in tokens if t not in (target.session, fixture.stream)]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        endpoint=st.one_of(paths, garbage_stream),
        head=headers,
        body=body_for(tokens),
        query_token=st.sampled_from(garbage),
        with_body=st.booleans(),
    )
    def one(
        endpoint: tuple[str, str], head: dict[str, str], body: bytes, query_token: str,
        with_body: bool,
    ) -> None:  # fmt: skip
        method, path = endpoint
        raw = {k: v.encode() for k, v in head.items()}  # non-ASCII bytes go out as they are
        if path.endswith("/events"):
            r = h.http.request(method, path, params={"token": query_token}, headers=raw)
        else:
            content = body if with_body and method != "GET" else None
            r = h.http.request(method, path, content=content, headers=raw)
        assert r.status_code < 500, (method, path, head, body[:200], r.status_code, r.text[:300])
        if r.status_code >= 400 and r.headers.get("content-type", "").startswith(
            "application/json"
        ):
            error = r.json()["error"]
            assert error["code"] in DOCUMENTED, error
            assert isinstance(error["message"], str) and error["message"]
        elif r.status_code >= 400:
            assert path.startswith("/widget/"), (path, r.status_code, r.text[:200])  # HTML page

    one()
    assert h.http.get("/healthz").json()["ok"] is True
    assert rows_of(h, fixture.id) == before
    # And the fixture is still usable by its owner.
    assert (
        h.snapshot(Conv(fixture.id, fixture.session, fixture.stream))["run"]["status"] == "finished"
    )
    assert h.http.post("/api/agents/planner/conversations", headers=ORIGIN).status_code in (
        201,
        429,
    )
