// Hostcall widget strings: English, the chat's own. Keys and {placeholders} as in locale-en.js;
// the tool calls' strings are in locale-en-calls.js, loaded with the first call.
export default {
  chat: 'Chat', conversation: 'Conversation', composer: 'Write a message', message: 'Message',
  placeholder: 'Type a message…', send: 'Send', history: 'Your conversations', newConversation: 'New conversation',
  close: 'Close chat', you: 'You', assistant: 'Assistant', working: 'Working…',
  connecting: 'Connecting…', reconnecting: 'Connection lost. Reconnecting…', retry: 'Retry',
  errorStart: 'The chat could not start.', errorGone: 'This conversation is no longer available.',
  errorRun: 'Sorry, something went wrong. Please try again.',
  errorUnavailable: 'The assistant is not available right now. Please try again later.',
  errorStore: 'The service is briefly unavailable. Please try again in a moment.',
  errorRefused: 'This message could not be sent. Please change it and try again.',
  errorBusy: 'Please wait until the agent has finished.',
  errorConversationLimit: 'This conversation has reached its limit. Please start a new conversation.',
  restartAsk: 'Start a new conversation? This one will be closed, and any action waiting for you with it.',
  limit: 'Messages are limited to {n} characters; the rest was not added.',
  notSent: 'Not sent.', cancel: 'Cancel',
  stop: 'Stop', stopped: 'You stopped this reply.',
  errorOperatorCancelled: 'The support team stopped this request.',
}
