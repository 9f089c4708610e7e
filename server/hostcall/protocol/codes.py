"""The ``code`` of every HTTP error response (docs/protocol.md, "Errors").

The codes the *model* can receive for a call are ``hostcall.errors.ToolErrorCode``; the
codes of a ``RUN_ERROR`` event are ``RunErrorCode``. tests/unit/test_protocol_doc.py keeps
these sets, the server's raises and docs/protocol.md in agreement.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    # 400
    MALFORMED_JSON = "malformed_json"
    BAD_REQUEST = "bad_request"
    BAD_EVENT_ID = "bad_event_id"
    FOREIGN_EVENT_ID = "foreign_event_id"
    INVALID_TEXT = "invalid_text"  # a NUL or a lone surrogate: text no store can hold
    BAD_ATTACHMENT_NAME = "bad_attachment_name"  # an upload's name: missing, a path, too long
    # 401
    MISSING_TOKEN = "missing_token"
    BAD_TOKEN = "bad_token"
    EXPIRED_TOKEN = "expired_token"
    USED_TOKEN = "used_token"
    SESSION_REPLACED = "session_replaced"
    NOT_SIGNED_IN = "not_signed_in"  # the console's (docs/console.md)
    # A visitor's identity token (docs/identity.md): not valid, past its exp, or needed.
    BAD_IDENTITY = "bad_identity"
    EXPIRED_IDENTITY = "expired_identity"
    IDENTITY_REQUIRED = "identity_required"
    # 403
    WRONG_TOKEN = "wrong_token"
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    ROLE_REQUIRED = "role_required"  # the console's
    CSRF_FAILED = "csrf_failed"  # the console's
    WRONG_PERSON = "wrong_person"  # a session token of another person than the conversation's
    # An MCP App's view asked for a tool its server does not list, or another server's;
    # or for a write, which views may not make (docs/agents.md, "MCP Apps").
    APP_TOOL_REFUSED = "app_tool_refused"
    APP_WRITE_REFUSED = "app_write_refused"
    # 404
    NOT_FOUND = "not_found"
    UNKNOWN_AGENT = "unknown_agent"
    UNKNOWN_CONVERSATION = "unknown_conversation"
    UNKNOWN_CALL = "unknown_call"
    NO_SESSION = "no_session"
    UNKNOWN_RUN = "unknown_run"  # the console's
    UNKNOWN_MESSAGE = "unknown_message"
    UNKNOWN_INTERRUPT = "unknown_interrupt"  # an AG-UI resume names no interrupt of the thread
    UNKNOWN_ATTACHMENT = "unknown_attachment"  # none of this conversation's files
    # The call has no view to speak for (none declared, not read, or no apps origin set).
    NO_APP = "no_app"
    # 405
    METHOD_NOT_ALLOWED = "method_not_allowed"
    # 408
    REQUEST_TIMEOUT = "request_timeout"
    # 409
    CONFLICT = "conflict"
    CALL_ALREADY_SETTLED = "call_already_settled"
    CALL_NOT_AWAITING_DECISION = "call_not_awaiting_decision"
    CALL_NOT_DISPATCHED = "call_not_dispatched"
    RUN_IN_PROGRESS = "run_in_progress"
    INPUT_CHANGED = "input_changed"
    RUN_NOT_ACTIVE = "run_not_active"  # a stop of a run that already ended
    NOTHING_TO_RETRY = "nothing_to_retry"  # a retry with no failed run to run again
    ALREADY_RATED = "already_rated"  # a conversation's second, different rating
    # An edit or a regeneration of a message that is not the last turn's, or of a turn in
    # which a write tool's call already ran (on the page or the server): it stays done.
    NOT_LAST_MESSAGE = "not_last_message"
    WRITE_ALREADY_RAN = "write_already_ran"
    AGENT_EXISTS = "agent_exists"  # the console's
    CONVERSATION_LIMIT_REACHED = "conversation_limit_reached"
    CONVERSATION_TAKEN = "conversation_taken"  # the console's: another person holds it
    NOT_TAKEN_OVER = "not_taken_over"  # the console's: you do not hold it
    CONVERSATION_FINISHED = "conversation_finished"  # the console's: its agent is gone
    # AG-UI: a new message on a thread whose interrupts no resume answered.
    INTERRUPTS_PENDING = "interrupts_pending"
    # An MCP App view's write, which the agent file allows: the visitor must confirm it.
    APPROVAL_REQUIRED = "approval_required"
    # 410
    CALL_EXPIRED = "call_expired"
    # 413
    BODY_TOO_LARGE = "body_too_large"
    ATTACHMENT_TOO_LARGE = "attachment_too_large"  # past its type's size in the agent file
    # 415
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    # A file whose content is none of the agent's types, or not what its name says.
    ATTACHMENT_TYPE_REFUSED = "attachment_type_refused"
    # 422
    UNPROCESSABLE = "unprocessable"
    INVALID_RESULT = "invalid_result"
    INVALID_INPUT = "invalid_input"
    INVALID_MESSAGE = "invalid_message"
    # The agent file has no page_context block / a value over a cap, a bad key, not JSON.
    PAGE_CONTEXT_NOT_ADMITTED = "page_context_not_admitted"
    PAGE_CONTEXT_REFUSED = "page_context_refused"
    NOT_A_REPLY = "not_a_reply"
    RATING_NOT_ASKED = "rating_not_asked"  # the agent file has no rating block
    ATTACHMENTS_NOT_ALLOWED = "attachments_not_allowed"  # the agent file has no attachments
    ATTACHMENT_QUOTA = "attachment_quota"  # the conversation's files past max_total_mb
    # A message's attachment id: unknown, another conversation's, already sent, too many.
    BAD_ATTACHMENT = "bad_attachment"
    # An AG-UI part whose source is a URL: never fetched (only this server's own file's).
    ATTACHMENT_URL_REFUSED = "attachment_url_refused"
    AGENT_ID_CHANGED = "agent_id_changed"  # the console's
    AGENT_INVALID = "agent_invalid"  # the console's
    # 429
    RATE_LIMITED = "rate_limited"
    TOKEN_BUDGET_EXHAUSTED = "token_budget_exhausted"
    # 500
    INTERNAL_ERROR = "internal_error"
    # 503
    STORE_UNAVAILABLE = "store_unavailable"
    IDENTITY_UNAVAILABLE = "identity_unavailable"  # the agent's JWKS could not be read
    OVERLOADED = "overloaded"  # refused at the door: this process cannot take more work now
    # Any other status Starlette raises itself (none is known to reach a client).
    HTTP_ERROR = "http_error"


class RunErrorCode(StrEnum):
    """Why a run stopped (the ``code`` of ``RUN_ERROR`` and of the snapshot's ``run.error``)."""

    STEP_LIMIT = "step_limit"
    INTERNAL_ERROR = "internal_error"
    MODEL_BAD_REPLY = "model_bad_reply"
    MODEL_HTTP_ERROR = "model_http_error"
    MODEL_TIMEOUT = "model_timeout"
    MODEL_UNREACHABLE = "model_unreachable"
    REPLY_TEMPLATE_FAILED = "reply_template_failed"
    STORE_UNAVAILABLE = "store_unavailable"
    CANCELLED = "cancelled"  # the visitor stopped the run (Stop)
    OPERATOR_CANCELLED = "operator_cancelled"  # an operator cancelled the run (the console)
    # An AG-UI client's tool the agent's page_tools block refused (hostcall/page_tools.py).
    PAGE_TOOL_REFUSED = "page_tool_refused"


class PageToolRefusal(StrEnum):
    """Why a tool the page offered was not admitted (the ``reason`` of a capabilities
    answer's ``refused`` entry, and of an AG-UI ``RUN_ERROR``)."""

    NOT_ADMITTED = "not_admitted"  # the agent file has no page_tools block
    NOT_ALLOWED = "not_allowed"  # its name is not in the block's allow list
    SHADOWED = "shadowed"  # the agent file has a tool of that name: it wins
    BAD_NAME = "bad_name"
    BAD_SCHEMA = "bad_schema"  # not an object schema, too deep, a remote $ref, a pattern
    TOO_LARGE = "too_large"  # its input schema is over max_schema_bytes
    DESCRIPTION_TOO_LONG = "description_too_long"
    TOO_MANY = "too_many"  # past max_tools
