// Hostcall widget strings: French, what the idle chat shows (and words features share);
// each feature's own load with it, from locale-fr-<feature>.js (the rule: chat.js, "Text").
export default {
  chat: 'Discussion', conversation: 'Conversation', composer: 'Écrire un message',
  message: 'Message', placeholder: 'Écrivez un message…', send: 'Envoyer',
  history: 'Vos conversations', newConversation: 'Nouvelle conversation', close: 'Fermer la discussion', you: 'Vous',
  assistant: 'Assistant', working: 'En cours…', connecting: 'Connexion…',
  reconnecting: 'Connexion perdue. Reconnexion…', retry: 'Réessayer',
  errorStart: 'La discussion n’a pas pu démarrer.',
  errorGone: 'Cette conversation n’est plus disponible.',
  errorRun: 'Désolé, un problème est survenu. Veuillez réessayer.',
  errorStore: 'Le service est momentanément indisponible. Réessayez dans un instant.',
  errorBusy: 'Veuillez attendre que l’agent ait terminé.',
  limit: 'Les messages sont limités à {n} caractères ; le reste n’a pas été ajouté.',
  notSent: 'Non envoyé.', cancel: 'Annuler',
  busy: 'Occupé, nouvel essai…',
  stop: 'Arrêter',
}
