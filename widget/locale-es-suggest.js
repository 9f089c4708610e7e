// Hostcall widget strings: Spanish, for what the agent file offers (suggest.js): starters, follow-ups, the conversation's rating.
export default {
  starters: 'Preguntas sugeridas',
  followUps: 'Respuestas sugeridas',
  ratingQuestion: '¿Qué tal ha ido esta conversación?',
  ratingScore: '{n} de 5',
  ratingLow: 'Mal',
  ratingHigh: 'Muy bien',
  ratingRemark: '¿Algo que añadir? (opcional)',
  ratingSend: 'Enviar valoración',
  ratingThanks: 'Gracias por valorar esta conversación.',
  ratingFailed: 'No se pudo enviar su valoración. Inténtelo de nuevo.',
}
