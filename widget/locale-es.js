// Hostcall widget strings: Spanish, what the idle chat shows (and words features share);
// each feature's own load with it, from locale-es-<feature>.js (the rule: chat.js, "Text").
export default {
  chat: 'Chat', conversation: 'Conversación', composer: 'Escribir un mensaje', message: 'Mensaje',
  placeholder: 'Escribe un mensaje…', send: 'Enviar', history: 'Tus conversaciones', newConversation: 'Nueva conversación',
  close: 'Cerrar el chat', you: 'Tú', assistant: 'Asistente', working: 'Trabajando…',
  connecting: 'Conectando…', reconnecting: 'Se perdió la conexión. Reconectando…',
  retry: 'Reintentar', errorStart: 'No se pudo iniciar el chat.',
  errorGone: 'Esta conversación ya no está disponible.',
  errorRun: 'Lo sentimos, algo salió mal. Inténtalo de nuevo.',
  errorStore: 'El servicio no está disponible por un momento. Inténtalo de nuevo en unos instantes.',
  errorBusy: 'Espera a que el agente termine.',
  limit: 'Los mensajes tienen un límite de {n} caracteres; el resto no se añadió.',
  notSent: 'No enviado.', cancel: 'Cancelar',
  busy: 'Ocupado, reintentando…',
  stop: 'Detener',
}
