// Hostcall widget strings: French, for what people add (people.js, loaded with the first reply or person): ratings, a person of the team.
export default {
  feedbackLabel: 'Évaluer cette réponse',
  feedbackUp: 'Bonne réponse',
  feedbackDown: 'Mauvaise réponse',
  feedbackComment: 'Dites-nous en plus (facultatif)',
  feedbackSend: 'Envoyer',
  feedbackThanks: 'Merci pour votre avis.',
  feedbackFailed: 'Votre avis n’a pas pu être envoyé. Veuillez réessayer.',
  personJoined: '{name} a rejoint la conversation.', personLeft: '{name} a quitté la conversation. L’assistant répond à nouveau.',
  personRequested: 'Une personne de l’équipe a été appelée.',
}
