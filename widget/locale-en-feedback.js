// Hostcall widget strings: English, the rating bar's (feedback.js, loaded with the first reply).
export default {
  feedbackLabel: 'Rate this reply',
  feedbackUp: 'Good reply',
  feedbackDown: 'Bad reply',
  feedbackComment: 'Tell us more (optional)',
  feedbackSend: 'Send',
  feedbackThanks: 'Thanks for your feedback.',
  feedbackFailed: 'Your feedback could not be sent. Please try again.',
}
