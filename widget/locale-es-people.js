// Hostcall widget strings: Spanish, for what people add (people.js, loaded with the first reply or person): ratings, a person of the team.
export default {
  feedbackLabel: 'Valorar esta respuesta',
  feedbackUp: 'Buena respuesta',
  feedbackDown: 'Mala respuesta',
  feedbackComment: 'Cuéntanos más (opcional)',
  feedbackSend: 'Enviar',
  feedbackThanks: 'Gracias por tu opinión.',
  feedbackFailed: 'No se pudo enviar tu opinión. Inténtalo de nuevo.',
  personJoined: '{name} se unió a la conversación.', personLeft: '{name} dejó la conversación. El asistente vuelve a responder.',
  personRequested: 'Se ha pedido a una persona del equipo que se una.',
}
