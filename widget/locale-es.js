// Hostcall widget strings: Spanish, the chat's own. Keys and {placeholders} as in locale-en.js;
// the tool calls' strings are in locale-es-calls.js, loaded with the first call.
export default {
  chat: 'Chat', conversation: 'Conversación', composer: 'Escribir un mensaje', message: 'Mensaje',
  placeholder: 'Escribe un mensaje…', send: 'Enviar', history: 'Tus conversaciones', newConversation: 'Nueva conversación',
  close: 'Cerrar el chat', you: 'Tú', assistant: 'Asistente', working: 'Trabajando…',
  connecting: 'Conectando…', reconnecting: 'Se perdió la conexión. Reconectando…',
  retry: 'Reintentar', errorStart: 'No se pudo iniciar el chat.',
  errorGone: 'Esta conversación ya no está disponible.',
  errorRun: 'Lo sentimos, algo salió mal. Inténtalo de nuevo.',
  errorUnavailable: 'El asistente no está disponible ahora. Inténtalo más tarde.',
  errorStore: 'El servicio no está disponible por un momento. Inténtalo de nuevo en unos instantes.',
  errorRefused: 'No se pudo enviar este mensaje. Cámbialo e inténtalo de nuevo.',
  errorBusy: 'Espera a que el agente termine.',
  errorConversationLimit: 'Esta conversación ha alcanzado su límite. Empieza una nueva conversación.',
  restartAsk: '¿Empezar una conversación nueva? Esta se cerrará, junto con cualquier acción que te espere.',
  limit: 'Los mensajes tienen un límite de {n} caracteres; el resto no se añadió.',
  notSent: 'No enviado.', cancel: 'Cancelar',
  stop: 'Detener', stopped: 'Has detenido esta respuesta.',
  errorOperatorCancelled: 'Un miembro del equipo de soporte detuvo esta solicitud.',
}
