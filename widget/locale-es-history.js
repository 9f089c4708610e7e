// Hostcall widget strings: Spanish, for the history panel (widget/history.js), loaded with it.
export default {
  historyTitle: 'Tus conversaciones', historyNew: 'Nueva conversación', historyBack: 'Volver al chat',
  historyLoading: 'Cargando tus conversaciones…', historyEmpty: 'Todavía no hay conversaciones.',
  historyCountOne: '1 conversación', historyCount: '{n} conversaciones', historyFailed: 'No se pudieron cargar tus conversaciones. Inténtalo más tarde.',
  historyMore: 'Ver anteriores', historyUntitled: 'Aún sin mensajes', historyCurrent: 'abierta',
  historyDelete: 'Eliminar', historyDeleteLabel: 'Eliminar «{title}»',
  historyDeleteAsk: '¿Eliminar esta conversación para siempre? No se podrá recuperar.',
  historyDeleted: 'Conversación eliminada.', historyDeleteFailed: 'No se pudo eliminar. Inténtalo de nuevo.',
  historyOpenFailed: 'No se pudo abrir. Inténtalo de nuevo.',
}
