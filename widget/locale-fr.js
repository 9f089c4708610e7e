// Hostcall widget strings: French, the chat's own. Keys and {placeholders} as in locale-en.js;
// the tool calls' strings are in locale-fr-calls.js, loaded with the first call.
export default {
  chat: 'Discussion', conversation: 'Conversation', composer: 'Écrire un message',
  message: 'Message', placeholder: 'Écrivez un message…', send: 'Envoyer',
  history: 'Vos conversations', newConversation: 'Nouvelle conversation', close: 'Fermer la discussion', you: 'Vous',
  assistant: 'Assistant', working: 'En cours…', connecting: 'Connexion…',
  reconnecting: 'Connexion perdue. Reconnexion…', retry: 'Réessayer',
  errorStart: 'La discussion n’a pas pu démarrer.',
  errorGone: 'Cette conversation n’est plus disponible.',
  errorRun: 'Désolé, un problème est survenu. Veuillez réessayer.',
  errorUnavailable: 'L’assistant n’est pas disponible pour le moment. Réessayez plus tard.',
  errorStore: 'Le service est momentanément indisponible. Réessayez dans un instant.',
  errorRefused: 'Ce message n’a pas pu être envoyé. Modifiez-le et réessayez.',
  errorBusy: 'Veuillez attendre que l’agent ait terminé.',
  errorConversationLimit: 'Cette conversation a atteint sa limite. Veuillez commencer une nouvelle conversation.',
  restartAsk: 'Commencer une nouvelle conversation ? Celle-ci sera fermée, avec toute action qui vous attend.',
  limit: 'Les messages sont limités à {n} caractères ; le reste n’a pas été ajouté.',
  notSent: 'Non envoyé.', cancel: 'Annuler',
  stop: 'Arrêter', stopped: 'Vous avez arrêté cette réponse.',
  errorOperatorCancelled: 'Un membre de l’équipe d’assistance a arrêté cette demande.',
}
