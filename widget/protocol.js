// Generated from hostcall/protocol/ by `python -m hostcall.protocol.js_constants >
// widget/protocol.js`. Do not edit: change the Python and run the command again.

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
  CONTEXT: "hostcall:context",
})
