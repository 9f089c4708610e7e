// Hostcall widget strings: French, the rating bar's (feedback.js, loaded with the first reply).
export default {
  feedbackLabel: 'Évaluer cette réponse',
  feedbackUp: 'Bonne réponse',
  feedbackDown: 'Mauvaise réponse',
  feedbackComment: 'Dites-nous en plus (facultatif)',
  feedbackSend: 'Envoyer',
  feedbackThanks: 'Merci pour votre avis.',
  feedbackFailed: 'Votre avis n’a pas pu être envoyé. Veuillez réessayer.',
}
