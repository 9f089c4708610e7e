// Generated from hostcall/protocol/ by `python -m hostcall.protocol.js_constants protocol-codes.js >
// widget/protocol-codes.js`. Do not edit: change the Python and run the command again.

/** A tool call's states (docs/protocol.md). */
export const CALL_STATE = Object.freeze({
  PROPOSED: "proposed",
  AWAITING_CONFIRMATION: "awaiting_confirmation",
  DISPATCHED: "dispatched",
  DELIVERED: "delivered",
  ANSWERED: "answered",
  REJECTED: "rejected",
  FAILED: "failed",
  EXPIRED: "expired",
})

export const TERMINAL_STATES = Object.freeze(["answered", "rejected", "failed", "expired"])

/** Why a run stopped: the `code` of `RUN_ERROR` (docs/protocol.md). */
export const RUN_ERROR_CODE = Object.freeze({
  STEP_LIMIT: "step_limit",
  INTERNAL_ERROR: "internal_error",
  MODEL_BAD_REPLY: "model_bad_reply",
  MODEL_HTTP_ERROR: "model_http_error",
  MODEL_TIMEOUT: "model_timeout",
  MODEL_UNREACHABLE: "model_unreachable",
  REPLY_TEMPLATE_FAILED: "reply_template_failed",
  STORE_UNAVAILABLE: "store_unavailable",
  CANCELLED: "cancelled",
  OPERATOR_CANCELLED: "operator_cancelled",
  PAGE_TOOL_REFUSED: "page_tool_refused",
})

/** Error codes a surface may send instead of a result. */
export const SURFACE_ERROR_CODES = Object.freeze(["client_error", "no_handler"])
