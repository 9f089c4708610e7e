// Hostcall widget strings: English, for a stopped or failed run and a refused message
// (widget/control.js), loaded with it.
export default {
  stopped: 'You stopped this reply.',
  errorUnavailable: 'The assistant is not available right now. Please try again later.',
  errorRefused: 'This message could not be sent. Please change it and try again.',
  errorConversationLimit: 'This conversation has reached its limit. Please start a new conversation.',
  errorOperatorCancelled: 'The support team stopped this request.',
}
