// Hostcall widget strings: French, for what the agent file offers (suggest.js): starters, follow-ups, the conversation's rating.
export default {
  starters: 'Questions suggérées',
  followUps: 'Réponses suggérées',
  ratingQuestion: 'Comment s’est passée cette conversation\u00a0?',
  ratingScore: '{n} sur 5',
  ratingLow: 'Mal',
  ratingHigh: 'Très bien',
  ratingRemark: 'Autre chose à ajouter\u00a0? (facultatif)',
  ratingSend: 'Envoyer la note',
  ratingThanks: 'Merci d’avoir noté cette conversation.',
  ratingFailed: 'Votre note n’a pas pu être envoyée. Veuillez réessayer.',
}
