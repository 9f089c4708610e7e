// Hostcall widget strings: Spanish, for a stopped or failed run and a refused message
// (widget/control.js), loaded with it.
export default {
  stopped: 'Has detenido esta respuesta.',
  errorUnavailable: 'El asistente no está disponible ahora. Inténtalo más tarde.',
  errorRefused: 'No se pudo enviar este mensaje. Cámbialo e inténtalo de nuevo.',
  errorConversationLimit: 'Esta conversación ha alcanzado su límite. Empieza una nueva conversación.',
  errorOperatorCancelled: 'Un miembro del equipo de soporte detuvo esta solicitud.',
}
