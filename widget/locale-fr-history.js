// Hostcall widget strings: French, for the history panel (widget/history.js), loaded with it.
export default {
  historyTitle: 'Vos conversations', historyNew: 'Nouvelle conversation', historyBack: 'Retour à la discussion',
  historyLoading: 'Chargement de vos conversations…', historyEmpty: 'Aucune conversation pour l’instant.',
  historyCountOne: '1 conversation', historyCount: '{n} conversations', historyFailed: 'Vos conversations n’ont pas pu être chargées. Réessayez plus tard.',
  historyMore: 'Voir les plus anciennes', historyUntitled: 'Pas encore de message', historyCurrent: 'ouverte',
  historyDelete: 'Supprimer', historyDeleteLabel: 'Supprimer « {title} »',
  historyDeleteAsk: 'Supprimer définitivement cette conversation ? Elle ne pourra pas être récupérée.',
  historyDeleted: 'Conversation supprimée.', historyDeleteFailed: 'Elle n’a pas pu être supprimée. Réessayez.',
  historyOpenFailed: 'Elle n’a pas pu être ouverte. Réessayez.',
}
