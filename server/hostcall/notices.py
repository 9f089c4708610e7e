"""What a visitor is told when a run fails, by error code; the detail is for the operator.

Issue 12: "internal error: object of type 'builtin_function_or_method' has no len()", a
model's base URL or raw upstream JSON must never reach a visitor. A failed run's stored
error and its ``RUN_ERROR`` event carry the ``code`` and one of these sentences (the widget
shows its own translation of the code); the engine logs the detail, with the agent, the
conversation, the run and the rule or tool, for the operator.
"""

from __future__ import annotations

GENERIC = "Sorry, something went wrong and the assistant stopped. Please try again."

RUN_NOTICES = {
    "model_unreachable": "The assistant is not available right now. Please try again later.",
    "model_timeout": "The assistant took too long to answer. Please try again.",
    "model_http_error": "The assistant is not available right now. Please try again later.",
    "model_bad_reply": GENERIC,
    "reply_template_failed": GENERIC,
    "step_limit": "The assistant could not finish this request. Please try rephrasing it.",
    "internal_error": GENERIC,
    "store_unavailable": "The server could not save this answer. Please send your message "
    "again in a moment.",
    "cancelled": "An operator stopped this request.",
}


def run_notice(code: str) -> str:
    """The sentence a visitor reads for a failed run with ``code``."""
    return RUN_NOTICES.get(code, GENERIC)
