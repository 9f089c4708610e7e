// Generated from hostcall/protocol/ by `python -m hostcall.protocol.js_constants protocol-events.js >
// widget/protocol-events.js`. Do not edit: change the Python and run the command again.

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
  REASONING_START: "REASONING_START",
  REASONING_MESSAGE_START: "REASONING_MESSAGE_START",
  REASONING_MESSAGE_CONTENT: "REASONING_MESSAGE_CONTENT",
  REASONING_MESSAGE_END: "REASONING_MESSAGE_END",
  REASONING_END: "REASONING_END",
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
