"""Signed tokens: one itsdangerous serializer per purpose, always checked with ``max_age``.

Payloads bind what the token is for (conversation, call, tool, input digest) and hold no
secret. Single use is not the signer's job: the store settles a call exactly once.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

from itsdangerous import BadSignature, SignatureExpired, TimestampSigner, URLSafeTimedSerializer

from hostcall.errors import Forbidden, Unauthorized
from hostcall.protocol.codes import ErrorCode


class Purpose(StrEnum):
    SESSION = "session"
    STREAM = "stream"
    CALL_RESULT = "call-result"
    CALL_DECISION = "call-decision"
    # The widget's resume cookie: not a session token, and it resumes only with the key
    # whose digest it binds (hostcall/visitors/sessions.py).
    RESUME = "resume"
    # An MCP App's view: binds the conversation, the call and the resource it shows
    # (hostcall/apps/routes.py); short-lived, a snapshot mints a fresh one each time.
    APP_VIEW = "app-view"


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def input_digest(value: Any) -> str:
    canonical = _CANONICAL.encode(value)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Claims:
    conversation_id: str
    call_id: str | None = None
    tool: str | None = None
    digest: str | None = None
    # A stream ticket's single-use id: the store accepts each one once.
    nonce: str | None = None
    # A session token's generation (see Conversation.session_generation).
    generation: int = 0
    # A call token's run: the answer knows the run's agent, and so the tool's output schema,
    # before it reads the call (hostcall/calls/answers.py). Tokens from before it have none.
    run_id: str | None = None
    # A resume cookie's binding: the digest of the page's key it resumes with.
    binding: str | None = None
    # A session token's person: the verified ``sub`` it was issued to, for a conversation
    # that belongs to one (Conversation.person); None for an anonymous one.
    person: str | None = None
    # The browser a resume cookie or session token was issued to: a random id that only
    # the browser's HttpOnly cookie carries from one page to the next
    # (hostcall/visitors/sessions.py), never derived from the page's resume key. None in
    # tokens from before browsers had one.
    browser: str | None = None


class _ClockedSigner(TimestampSigner):
    """itsdangerous's signer, timed by the app's clock (the seam tests move instead of
    sleeping) rather than by ``time.time`` directly."""

    clock: Callable[[], float] = staticmethod(time.time)
    # The library's own default, SHA-1, named directly: its default is a Python function
    # that calls ``hashlib.sha1`` (so that a FIPS build fails late, not on import), and
    # ``hmac`` given a function that is not OpenSSL's runs HMAC in Python, ~15 calls a
    # token. The same HMAC-SHA1 and the same tokens either way (tests/unit/test_tokens.py).
    default_digest_method = staticmethod(hashlib.sha1)

    def get_timestamp(self) -> int:
        return int(self.clock())


class Tokens:
    def __init__(
        self,
        secret_keys: tuple[str, ...],
        max_ages: dict[Purpose, int],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        assert secret_keys, "at least one secret key"
        self._max_ages = max_ages
        signer = type("Signer", (_ClockedSigner,), {"clock": staticmethod(clock)})
        self._serializers = {
            purpose: URLSafeTimedSerializer(
                list(secret_keys), salt=f"hostcall.{purpose}", signer=signer
            )
            for purpose in Purpose
        }
        # The signer each serializer makes, made once: ``dumps`` and ``loads`` build a new
        # one per token (~20 us of the answer's path). The same keys, salt, HMAC
        # and timestamp; the serializers have no fallback signers, so ``loads`` would try
        # this one alone too.
        self._signers: dict[Purpose, TimestampSigner] = {
            purpose: cast(TimestampSigner, serializer.make_signer())
            for purpose, serializer in self._serializers.items()
        }

    def sign(self, purpose: Purpose, claims: Claims) -> str:
        payload: dict[str, str | int] = {"c": claims.conversation_id}
        if claims.call_id is not None:
            payload |= {"k": claims.call_id, "t": claims.tool or "", "d": claims.digest or ""}
            if claims.run_id is not None:
                payload["r"] = claims.run_id
        if claims.nonce is not None:
            payload["n"] = claims.nonce
        if claims.generation:
            payload["g"] = claims.generation
        if claims.binding is not None:
            payload["b"] = claims.binding
        if claims.person is not None:
            payload["p"] = claims.person
        if claims.browser is not None:
            payload["w"] = claims.browser
        signed = self._signers[purpose].sign(self._serializers[purpose].dump_payload(payload))
        return signed.decode()

    def verify(self, purpose: Purpose, token: str | None) -> Claims:
        if not token:
            raise Unauthorized(f"a {purpose} token is required", code=ErrorCode.MISSING_TOKEN)
        serializer = self._serializers[purpose]
        try:
            # ``serializer.loads(token, max_age=...)``, without a new signer per token.
            signed = self._signers[purpose].unsign(token, max_age=self._max_ages[purpose])
            payload = serializer.load_payload(signed)
        except SignatureExpired:
            raise Unauthorized(
                f"the {purpose} token has expired", code=ErrorCode.EXPIRED_TOKEN
            ) from None
        except BadSignature:
            # A genuine token of another purpose fails here too (other salt): say so, since
            # "you sent the decision token to the result endpoint" is a fixable mistake.
            if self._signed_for_other_purpose(purpose, token):
                raise Forbidden(
                    f"this token was not issued as a {purpose} token", code=ErrorCode.WRONG_TOKEN
                ) from None
            raise Unauthorized(
                f"the {purpose} token is not valid", code=ErrorCode.BAD_TOKEN
            ) from None
        if not isinstance(payload, dict) or "c" not in payload:
            raise Unauthorized(f"the {purpose} token is not valid", code=ErrorCode.BAD_TOKEN)
        return Claims(
            conversation_id=payload["c"],
            call_id=payload.get("k"),
            tool=payload.get("t"),
            digest=payload.get("d"),
            nonce=payload.get("n"),
            generation=payload.get("g", 0) if isinstance(payload.get("g", 0), int) else -1,
            run_id=payload.get("r"),
            binding=payload.get("b") if isinstance(payload.get("b"), str) else None,
            person=payload.get("p") if isinstance(payload.get("p"), str) else None,
            browser=payload.get("w") if isinstance(payload.get("w"), str) else None,
        )

    def _signed_for_other_purpose(self, purpose: Purpose, token: str) -> bool:
        for other, serializer in self._serializers.items():
            if other is purpose:
                continue
            try:
                serializer.loads(token)
            except BadSignature:
                continue
            return True
        return False
