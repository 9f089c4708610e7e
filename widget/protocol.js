// Generated from hostcall/protocol/ by `python -m hostcall.protocol.js_constants >
// widget/protocol.js`. Do not edit: change the Python and run the command again.

/** AG-UI event types (the JSON's `type`, and the SSE `event:` name). */
export const EVENT = Object.freeze({
  RUN_STARTED: "RUN_STARTED",
  RUN_FINISHED: "RUN_FINISHED",
  RUN_ERROR: "RUN_ERROR",
  TEXT_MESSAGE_START: "TEXT_MESSAGE_START",
  TEXT_MESSAGE_CONTENT: "TEXT_MESSAGE_CONTENT",
  TEXT_MESSAGE_END: "TEXT_MESSAGE_END",
  TOOL_CALL_START: "TOOL_CALL_START",
  TOOL_CALL_ARGS: "TOOL_CALL_ARGS",
  TOOL_CALL_END: "TOOL_CALL_END",
  TOOL_CALL_RESULT: "TOOL_CALL_RESULT",
  CUSTOM: "CUSTOM",
})

/** Names of Hostcall's own events (AG-UI CUSTOM; also their SSE `event:` name). */
export const CUSTOM = Object.freeze({
  TOOL_CALL_APPROVAL_REQUESTED: "hostcall.tool_call_approval_requested",
  TOOL_CALL_DISPATCH: "hostcall.tool_call_dispatch",
  TOOL_CALL_STATE: "hostcall.tool_call_state",
  TOOL_CALL_GUARDRAIL: "hostcall.tool_call_guardrail",
  TEXT_MESSAGE_DISCARDED: "hostcall.text_message_discarded",
  PERSON_REQUESTED: "hostcall.person_requested",
  PERSON_JOINED: "hostcall.person_joined",
  PERSON_MESSAGE: "hostcall.person_message",
  PERSON_LEFT: "hostcall.person_left",
})

/** Sizes the server allows: `_BYTES` are UTF-8 bytes, `_CHARS` code points. */
export const LIMITS = Object.freeze({
  MAX_BODY_BYTES: 262144,
  MAX_MESSAGE_CHARS: 8000,
  MAX_REASON_CHARS: 1000,
  MAX_ERROR_MESSAGE_CHARS: 1000,
})

/** postMessage types between the widget and the embed loader. */
export const MSG = Object.freeze({
  HELLO: "hostcall:hello",
  HANDLERS: "hostcall:handlers",
  READY: "hostcall:ready",
  CALL: "hostcall:call",
  RESULT: "hostcall:result",
  CANCEL: "hostcall:cancel",
  SEND: "hostcall:send",
  FOCUS: "hostcall:focus",
  CLOSE: "hostcall:close",
  EVENT: "hostcall:event",
  ACTIVE: "hostcall:active",
  IDENTITY: "hostcall:identity",
  ATTENTION: "hostcall:attention",
})
