"""Tokens: key rotation, one salt per purpose, no secrets in payloads, digests, max age."""

from __future__ import annotations

import dataclasses
import json
import zlib
from itertools import permutations
from typing import Any

import pytest
from itsdangerous import URLSafeTimedSerializer
from itsdangerous.encoding import base64_decode

from hostcall.errors import Forbidden, Unauthorized
from hostcall.tokens import Claims, Purpose, Tokens, input_digest
from tests.support.clock import Clock
from tests.support.harness import BOARD, ORIGIN, SECRET, Conv, Harness

OLD = "old-unit-test-key-0123456789abcdef"
NEW = "new-unit-test-key-fedcba9876543210"
DAY = {purpose: 24 * 3600 for purpose in Purpose}
CLAIMS = Claims("c_0123456789abcdef", "k_0123456789abcdef", "create_task", "0" * 32)


def payload_of(token: str) -> dict[str, Any]:
    """What anyone holding the token can read: its first part, base64 (zlib if it starts with .)."""
    payload = token.rsplit(".", 2)[0]
    raw = base64_decode(payload.lstrip("."))
    value: dict[str, Any] = json.loads(zlib.decompress(raw) if payload.startswith(".") else raw)
    return value


def refused(tokens: Tokens, purpose: Purpose, token: str | None) -> Unauthorized | Forbidden:
    with pytest.raises((Unauthorized, Forbidden)) as caught:
        tokens.verify(purpose, token)
    error = caught.value
    assert isinstance(error, Unauthorized | Forbidden)
    return error


# ---- key rotation -----------------------------------------------------------------------


@pytest.mark.parametrize("purpose", list(Purpose))
def test_token_signed_with_an_old_key_verifies_after_rotation(purpose: Purpose) -> None:
    token = Tokens((OLD,), DAY).sign(purpose, CLAIMS)
    assert Tokens((OLD, NEW), DAY).verify(purpose, token) == CLAIMS


@pytest.mark.parametrize("purpose", list(Purpose))
def test_new_tokens_are_signed_with_the_newest_key(purpose: Purpose) -> None:
    token = Tokens((OLD, NEW), DAY).sign(purpose, CLAIMS)
    assert Tokens((NEW,), DAY).verify(purpose, token) == CLAIMS
    error = refused(Tokens((OLD,), DAY), purpose, token)
    assert (error.status, error.code) == (401, "bad_token")


@pytest.mark.parametrize("purpose", list(Purpose))
def test_tokens_are_itsdangerous_own_both_ways(purpose: Purpose) -> None:
    """The signer names its digest (for OpenSSL's HMAC) but signs as the library's defaults
    do: a token another process made with them verifies here, and one made here verifies
    with them (a rolling upgrade has both)."""
    library = URLSafeTimedSerializer([OLD, NEW], salt=f"hostcall.{purpose}")
    theirs = library.dumps({"c": CLAIMS.conversation_id, "k": CLAIMS.call_id})
    claims = Tokens((OLD, NEW), DAY).verify(purpose, theirs)
    assert (claims.conversation_id, claims.call_id) == (CLAIMS.conversation_id, CLAIMS.call_id)
    ours = Tokens((OLD, NEW), DAY).sign(purpose, CLAIMS)
    assert library.loads(ours, max_age=60)["k"] == CLAIMS.call_id


def test_tokens_survive_a_key_rotation_and_die_with_the_retired_key(harness: Harness) -> None:
    before = harness.conversation()
    harness.say(before, "What should I work on next?")
    call = harness.open_call(before)

    harness.stop()
    harness.settings = dataclasses.replace(harness.settings, secret_keys=(SECRET[0], NEW))
    harness.start()
    assert harness.snapshot(before)["conversationId"] == before.id
    assert harness.answer(call, BOARD).status_code == 200  # a call token from before rotation
    after = harness.conversation()

    harness.stop()
    harness.settings = dataclasses.replace(harness.settings, secret_keys=(NEW,))
    harness.start()
    assert harness.snapshot(after)["conversationId"] == after.id
    r = harness.http.get(f"/api/conversations/{before.id}", headers=before.auth)
    assert r.status_code == 401 and r.json()["error"]["code"] == "bad_token"


# ---- one salt per purpose ---------------------------------------------------------------


@pytest.mark.parametrize(("signed_for", "sent_as"), list(permutations(Purpose, 2)))
def test_a_token_of_one_purpose_is_refused_as_another(
    signed_for: Purpose, sent_as: Purpose
) -> None:
    tokens = Tokens((SECRET[0],), DAY)
    token = tokens.sign(signed_for, CLAIMS)
    assert tokens.verify(signed_for, token) == CLAIMS
    error = refused(tokens, sent_as, token)
    assert (error.status, error.code) == (403, "wrong_token")
    assert str(sent_as) in error.message


def test_the_same_claims_sign_differently_for_each_purpose() -> None:
    tokens = Tokens((SECRET[0],), DAY)
    signatures = {tokens.sign(p, CLAIMS).rsplit(".", 1)[1] for p in Purpose}
    assert len(signatures) == len(Purpose)


def test_a_token_signed_with_another_secret_is_a_bad_token_not_a_wrong_one() -> None:
    token = Tokens((OLD,), DAY).sign(Purpose.SESSION, CLAIMS)
    error = refused(Tokens((NEW,), DAY), Purpose.STREAM, token)
    assert (error.status, error.code) == (401, "bad_token")


# ---- payloads ---------------------------------------------------------------------------


def test_payloads_hold_only_what_the_token_is_for(harness: Harness) -> None:
    r = harness.http.post("/api/agents/planner/conversations", headers=ORIGIN)
    body = r.json()
    conv = Conv(body["conversationId"], body["sessionToken"], body["streamToken"])
    assert payload_of(conv.session) == {"c": conv.id}
    # A stream ticket adds only its random single-use id (no secret: it is not a key).
    ticket = payload_of(conv.stream)
    assert set(ticket) == {"c", "n"} and ticket["c"] == conv.id and len(ticket["n"]) >= 16
    harness.say(conv, "Add a task to call Bob")
    call = harness.open_call(conv, "awaiting_confirmation")
    bound = {
        "c": conv.id,
        "k": call["toolCallId"],
        "t": "create_task",
        "d": input_digest(call["input"]),
        # The run: its agent has the tool's output schema (hostcall/calls/answers.py).
        "r": call["runId"],
    }
    decision_token = call["decisionToken"]
    assert payload_of(decision_token) == bound
    assert harness.decide(call, "approve").status_code == 200
    result_token = harness.open_call(conv, "dispatched")["resultToken"]
    assert payload_of(result_token) == bound
    for token in (conv.session, conv.stream, decision_token, result_token):
        assert SECRET[0] not in json.dumps(payload_of(token)) and SECRET[0] not in token


def test_input_digest_ignores_key_order_but_not_values() -> None:
    assert input_digest({"a": 1, "b": "é"}) == input_digest({"b": "é", "a": 1})
    assert input_digest({"a": 1}) != input_digest({"a": 2})
    assert len(input_digest(None)) == 32


def test_approving_with_edits_invalidates_a_result_token_for_the_shown_input(
    harness: Harness,
) -> None:
    conv = harness.conversation()
    harness.say(conv, "Add a task to review the Q3 report before Friday")
    shown = harness.open_call(conv, "awaiting_confirmation")
    stale = harness.runtime.tokens.sign(
        Purpose.CALL_RESULT,
        Claims(conv.id, shown["toolCallId"], "create_task", input_digest(shown["input"])),
    )
    edited = {"title": "Review the Q3 report draft"}
    assert harness.decide(shown, "approve", input=edited).status_code == 200

    output = {"id": "t9", "title": edited["title"], "status": "todo"}
    r = harness.http.post(
        f"/api/calls/{shown['toolCallId']}/result", json={"token": stale, "output": output}
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "input_changed"
    assert shown["toolCallId"] in r.json()["error"]["message"]
    call = harness.open_call(conv, "dispatched")
    assert call["input"] == edited
    assert harness.answer(call, output).status_code == 200


# ---- max age ----------------------------------------------------------------------------


def test_max_age_applies_to_every_purpose() -> None:
    clock = Clock()
    tokens = Tokens((SECRET[0],), {purpose: 1 for purpose in Purpose}, clock=clock)
    signed = {purpose: tokens.sign(purpose, CLAIMS) for purpose in Purpose}
    for purpose, token in signed.items():
        assert tokens.verify(purpose, token) == CLAIMS
    clock.advance(2.1)  # itsdangerous ages in whole seconds and expires past max_age
    for purpose, token in signed.items():
        error = refused(tokens, purpose, token)
        assert (error.status, error.code) == (401, "expired_token")
        assert str(purpose) in error.message
    # A longer max age for the same key accepts them: the age is what refused them.
    assert Tokens((SECRET[0],), DAY).verify(Purpose.SESSION, signed[Purpose.SESSION]) == CLAIMS


@pytest.mark.parametrize("token", ["", None])
def test_a_missing_token_is_refused_for_every_purpose(token: str | None) -> None:
    tokens = Tokens((SECRET[0],), DAY)
    for purpose in Purpose:
        error = refused(tokens, purpose, token)
        assert (error.status, error.code) == (401, "missing_token")
