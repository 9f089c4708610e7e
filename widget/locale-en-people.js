// Hostcall widget strings: English, for what people add (people.js, loaded with the first reply or person): ratings, a person of the team.
export default {
  feedbackLabel: 'Rate this reply',
  feedbackUp: 'Good reply',
  feedbackDown: 'Bad reply',
  feedbackComment: 'Tell us more (optional)',
  feedbackSend: 'Send',
  feedbackThanks: 'Thanks for your feedback.',
  feedbackFailed: 'Your feedback could not be sent. Please try again.',
  personJoined: '{name} joined the conversation.', personLeft: '{name} left the conversation. The assistant answers again.',
  personRequested: 'A person of the team has been asked to join.',
}
