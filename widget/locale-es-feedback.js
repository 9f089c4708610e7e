// Hostcall widget strings: Spanish, the rating bar's (feedback.js, loaded with the first reply).
export default {
  feedbackLabel: 'Valorar esta respuesta',
  feedbackUp: 'Buena respuesta',
  feedbackDown: 'Mala respuesta',
  feedbackComment: 'Cuéntanos más (opcional)',
  feedbackSend: 'Enviar',
  feedbackThanks: 'Gracias por tu opinión.',
  feedbackFailed: 'No se pudo enviar tu opinión. Inténtalo de nuevo.',
}
