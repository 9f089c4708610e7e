"""Errors, as types.

Every error a client can meet is a ``HostcallError`` carrying an HTTP status, a
machine-readable ``code`` (an ``ErrorCode``) and a message; ``hostcall.responses`` turns them into
``{"error": {"code", "message", "details"}}`` in one place.

    HostcallError
     ├── BadRequest            400  malformed_json, bad_request, bad_event_id, foreign_event_id
     ├── Unauthorized          401  missing_token, bad_token, expired_token
     ├── Forbidden             403  wrong_token
     ├── NotFound              404  unknown_agent, unknown_conversation, unknown_call
 │    └── NothingToResume       no_session (the session endpoint answers it 204: not a fault)
     ├── Conflict              409  call_already_settled, call_not_awaiting_decision, ...
     ├── RequestTimeout        408  request_timeout (a body that stopped arriving)
     ├── Gone                  410  call_expired
     ├── PayloadTooLarge       413  body_too_large
     ├── UnsupportedMediaType  415  unsupported_media_type
     ├── Unprocessable         422  invalid_result, invalid_input, invalid_message,
     │                                  page_context_not_admitted, page_context_refused
     ├── TooManyRequests       429  rate_limited (``Retry-After``)
     ├── InternalError         500  internal_error (anything unexpected; no traceback words)
     │    └── RunUnreadable         a run's row is gone, or its stored definition unparsable
     └── Unavailable           503  store_unavailable (``Retry-After``)
      ├── IdentityUnavailable   identity_unavailable (an agent's JWKS could not be read)
      └── Overloaded            overloaded (refused before any work was taken: hostcall/door.py)

``AgentConfigError`` is not an HTTP error: it stops the server at start with one line per
problem; ``StoreError`` stops it when the database cannot be used (another process holds a
SQLite file, a schema newer than this code, PostgreSQL unreachable). ``LeaseLost`` never
leaves the engine: a step whose lease another process took is rolled back, not failed.
``ToolErrorCode`` is the closed set of errors the *model* receives for a call.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from hostcall.protocol.codes import ErrorCode


class HostcallError(Exception):
    status = 500
    code: ErrorCode = ErrorCode.INTERNAL_ERROR

    def __init__(self, message: str, *, code: ErrorCode | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class BadRequest(HostcallError):
    status = 400
    code: ErrorCode = ErrorCode.BAD_REQUEST


class Unauthorized(HostcallError):
    status = 401
    code: ErrorCode = ErrorCode.BAD_TOKEN


class Forbidden(HostcallError):
    status = 403
    code: ErrorCode = ErrorCode.WRONG_TOKEN


class NotFound(HostcallError):
    status = 404
    code: ErrorCode = ErrorCode.NOT_FOUND


class NothingToResume(NotFound):
    """This browser has no conversation to resume. ``POST …/session`` answers ``204``, no
    error: a first visit is the usual case, and a browser logs every 4xx as a failure."""

    code: ErrorCode = ErrorCode.NO_SESSION


class Conflict(HostcallError):
    status = 409
    code: ErrorCode = ErrorCode.CONFLICT


class HeldByPerson(Conflict):
    """A person of the operator's team holds the conversation (docs/console.md, "Human
    handoff"): the agent starts no run. The visitor's route catches it and keeps the message
    for the person; the console's answers it as 409 ``conversation_taken``."""

    code: ErrorCode = ErrorCode.CONVERSATION_TAKEN

    def __init__(self, conversation_id: str, person: str) -> None:
        super().__init__(f"{person} holds conversation {conversation_id}", person=person)
        self.person = person


class RequestTimeout(HostcallError):
    status = 408
    code: ErrorCode = ErrorCode.REQUEST_TIMEOUT


class Gone(HostcallError):
    status = 410
    code: ErrorCode = ErrorCode.CALL_EXPIRED


class PayloadTooLarge(HostcallError):
    status = 413
    code: ErrorCode = ErrorCode.BODY_TOO_LARGE


class UnsupportedMediaType(HostcallError):
    status = 415
    code: ErrorCode = ErrorCode.UNSUPPORTED_MEDIA_TYPE


class Unprocessable(HostcallError):
    status = 422
    code: ErrorCode = ErrorCode.UNPROCESSABLE


class TooManyRequests(HostcallError):
    """``retry_after`` (whole seconds) becomes the ``Retry-After`` header."""

    status = 429
    code: ErrorCode = ErrorCode.RATE_LIMITED

    def __init__(self, message: str, *, retry_after: int, code: ErrorCode | None = None) -> None:
        super().__init__(message, code=code, retryAfter=retry_after)
        self.retry_after = retry_after


class InternalError(HostcallError):
    status = 500
    code: ErrorCode = ErrorCode.INTERNAL_ERROR


class RunUnreadable(InternalError):
    """A run cannot be read back: its row is gone, or its stored agent definition no longer
    parses (written by another version, or changed by hand). ``problems`` are for the log,
    never for a client: they may quote the definition."""

    def __init__(self, run_id: str, problems: list[str]) -> None:
        super().__init__(f"run {run_id} cannot be read back")
        self.run_id = run_id
        self.problems = problems


# Seconds a client is told to wait (``Retry-After``) when the database cannot be used: long
# enough not to hammer a database coming back, short enough for a person waiting.
STORE_RETRY_AFTER = 5


class Unavailable(HostcallError):
    """The database cannot be used right now; ``retry_after`` (whole seconds) becomes the
    ``Retry-After`` header."""

    status = 503
    code: ErrorCode = ErrorCode.STORE_UNAVAILABLE

    def __init__(
        self, message: str, *, retry_after: int = STORE_RETRY_AFTER, **details: Any
    ) -> None:
        super().__init__(message, retryAfter=retry_after, **details)
        self.retry_after = retry_after


class Overloaded(Unavailable):
    """This process cannot take more work now (``reason``: what is past its bound,
    hostcall/door.py): refused before anything was stored, so sending the same request
    again after ``Retry-After`` is safe."""

    code: ErrorCode = ErrorCode.OVERLOADED

    def __init__(self, reason: str, *, retry_after: int, **details: Any) -> None:
        super().__init__(
            f"the server is too busy to take this now ({reason}); send it again after "
            f"{retry_after} s",
            retry_after=retry_after,
            reason=reason,
            **details,
        )
        self.reason = reason


class AgentConfigError(Exception):
    """One or more agent files are wrong; ``problems`` holds one readable line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class StoreError(Exception):
    """The database cannot be used as configured; the message says why and what to do."""

    def __init__(self, message: str, *, target: str) -> None:
        super().__init__(message)
        self.message = message
        self.target = target


class StoreUnwritable(StoreError):
    """The database cannot be written at start (read-only file, full disk, …)."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(
            f"the database {path} cannot be written ({reason}); check its permissions and "
            "free space",
            target=str(path),
        )
        self.reason = reason


class LeaseLost(Exception):
    """This process no longer holds the lease on ``key`` (it stalled and another took it)."""

    def __init__(self, key: str, owner: str) -> None:
        super().__init__(f"lease {key} is no longer held by {owner}")
        self.key = key
        self.owner = owner


class ToolErrorCode(StrEnum):
    """What the model can be told instead of a tool's output (a closed, documented set)."""

    INVALID_ARGUMENTS = "invalid_arguments"
    UNKNOWN_TOOL = "unknown_tool"
    NO_HANDLER = "no_handler"
    CLIENT_ERROR = "client_error"
    APPROVAL_REJECTED = "approval_rejected"
    APPROVAL_EXPIRED = "approval_expired"
    TIMEOUT = "timeout"
    NOT_AUTHORIZED = "not_authorized"
    CALL_LIMIT_REACHED = "call_limit_reached"
    BLOCKED_BY_GUARDRAIL = "blocked_by_guardrail"
    BLOCK_FAILED = "block_failed"
    CANCELLED = "cancelled"  # the visitor stopped the run before the call ended
    OPERATOR_CANCELLED = "operator_cancelled"  # an operator cancelled the run (the console)
    OPERATOR_ENDED = "operator_ended"  # an operator ended the call ("End call", the console)


# The drivers whose errors mean the database refused or could not be reached: a DB-API
# error of either dialect, or the pool giving up waiting for a connection (its PoolTimeout
# is a psycopg OperationalError). Known by module, so that this layer imports none of them.
_STORE_DRIVERS = frozenset({"sqlite3", "psycopg", "psycopg_pool"})


def is_store_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the store's driver failing (a full disk, a read-only file, a
    database down or out of connections), not a fault of this code's."""
    return any(c.__module__.split(".")[0] in _STORE_DRIVERS for c in type(exc).__mro__)


# The error codes a surface may send in place of a result.
SURFACE_ERROR_CODES = frozenset({ToolErrorCode.NO_HANDLER, ToolErrorCode.CLIENT_ERROR})
