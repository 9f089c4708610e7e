"""What a visitor is told when a run or a call fails, by error code; the detail is for the
operator (and, for a call, the model).

A visitor once read "internal error: object of type 'builtin_function_or_method' has no len()", a
model's base URL or raw upstream JSON must never reach a visitor. A failed run's stored
error and its ``RUN_ERROR`` event carry the ``code`` and one of these sentences (the widget
shows its own translation of the code); the engine logs the detail, with the agent, the
conversation, the run and the rule or tool, for the operator.
"""

from __future__ import annotations

from hostcall.errors import ToolErrorCode
from hostcall.protocol.codes import RunErrorCode

GENERIC = "Sorry, something went wrong and the assistant stopped. Please try again."
# A conversation that has spent its model-token budget takes no more messages: the message
# of its ``conversation_limit_reached`` (the widget shows its own translation).
CONVERSATION_LIMIT = "This conversation has reached its limit. Please start a new conversation."

RUN_NOTICES: dict[RunErrorCode, str] = {
    RunErrorCode.MODEL_UNREACHABLE: "The assistant is not available right now. Please try "
    "again later.",
    RunErrorCode.MODEL_TIMEOUT: "The assistant took too long to answer. Please try again.",
    RunErrorCode.MODEL_HTTP_ERROR: "The assistant is not available right now. Please try "
    "again later.",
    RunErrorCode.MODEL_BAD_REPLY: GENERIC,
    RunErrorCode.REPLY_TEMPLATE_FAILED: GENERIC,
    RunErrorCode.STEP_LIMIT: "The assistant could not finish this request. Please try "
    "rephrasing it.",
    RunErrorCode.INTERNAL_ERROR: GENERIC,
    RunErrorCode.STORE_UNAVAILABLE: "The server could not save this answer. Please send your "
    "message again in a moment.",
    RunErrorCode.CANCELLED: "You stopped this reply.",
    RunErrorCode.OPERATOR_CANCELLED: "The support team stopped this request.",
    RunErrorCode.PAGE_TOOL_REFUSED: GENERIC,
}

# What a visitor reads for a call that ended without an output (events and snapshots carry
# it as the error's ``message``). The model's message, which may quote an upstream body or
# a page's exception, stays with the model and the operator's console.
TOOL_FAILED = "This action could not be completed."
TOOL_NOTICES: dict[ToolErrorCode, str] = {
    ToolErrorCode.APPROVAL_REJECTED: "This action was rejected.",
    ToolErrorCode.APPROVAL_EXPIRED: "This action expired before anyone approved it.",
    ToolErrorCode.TIMEOUT: "This action expired before it was answered.",
    ToolErrorCode.CANCELLED: "This action was stopped.",
    ToolErrorCode.OPERATOR_CANCELLED: "The support team cancelled this action.",
    ToolErrorCode.OPERATOR_ENDED: "The support team ended this action.",
}


def run_notice(code: str) -> str:
    """The sentence a visitor reads for a failed run with ``code`` (one this server does not
    know, stored by a newer version, gets the generic sentence)."""
    try:
        return RUN_NOTICES.get(RunErrorCode(code), GENERIC)
    except ValueError:
        return GENERIC


# Added for a write that ended without a result after its request went out (the error's
# ``mayHaveRun``): nobody should take "stopped" for "did not happen" and do it again.
MAY_HAVE_RUN = "It may already have taken effect: check before trying again."


def tool_notice(code: str, *, may_have_run: bool = False) -> str:
    """The sentence a visitor reads for a call that failed with ``code``."""
    try:
        notice = TOOL_NOTICES.get(ToolErrorCode(code), TOOL_FAILED)
    except ValueError:
        notice = TOOL_FAILED
    return f"{notice} {MAY_HAVE_RUN}" if may_have_run else notice
