// Hostcall widget strings: English, for what the agent file offers (suggest.js): starters, follow-ups, the conversation's rating.
export default {
  starters: 'Suggested questions',
  followUps: 'Suggested replies',
  ratingQuestion: 'How was this conversation?',
  ratingScore: '{n} out of 5',
  ratingLow: 'Poor',
  ratingHigh: 'Great',
  ratingRemark: 'Anything to add? (optional)',
  ratingSend: 'Send rating',
  ratingThanks: 'Thanks for rating this conversation.',
  ratingFailed: 'Your rating could not be sent. Please try again.',
}
