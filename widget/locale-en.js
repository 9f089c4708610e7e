// Hostcall widget strings: English, what the idle chat shows (and words features share);
// each feature's own load with it, from locale-en-<feature>.js (the rule: chat.js, "Text").
export default {
  chat: 'Chat', conversation: 'Conversation', composer: 'Write a message', message: 'Message',
  placeholder: 'Type a message…', send: 'Send', history: 'Your conversations', newConversation: 'New conversation',
  close: 'Close chat', you: 'You', assistant: 'Assistant', working: 'Working…',
  connecting: 'Connecting…', reconnecting: 'Connection lost. Reconnecting…', retry: 'Retry',
  errorStart: 'The chat could not start.', errorGone: 'This conversation is no longer available.',
  errorRun: 'Sorry, something went wrong. Please try again.',
  errorStore: 'The service is briefly unavailable. Please try again in a moment.',
  errorBusy: 'Please wait until the agent has finished.',
  limit: 'Messages are limited to {n} characters; the rest was not added.',
  notSent: 'Not sent.', cancel: 'Cancel',
  busy: 'Busy, retrying…',
  stop: 'Stop',
}
