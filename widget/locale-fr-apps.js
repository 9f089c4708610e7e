// Hostcall widget strings: French, for MCP Apps views (apps.js, loaded with the first one).
// Keys and {placeholders} as in locale-en-apps.js.
export default {
  appViewTitle: 'Vue : {name}', appLoading: 'Chargement de la vue…',
  appFailed: 'Cette vue n’a pas pu être affichée.',
  appUnavailable: 'Ce résultat a une vue que ce site n’a pas activée.',
  appWantsSend: 'La vue veut envoyer : « {text} »', appSend: 'Envoyer',
  appWantsOpen: 'La vue veut ouvrir {host}.', appOpen: 'Ouvrir', appDismiss: 'Ignorer',
  appWantsRun: 'La vue veut exécuter {tool}.', appRun: 'Exécuter',
}
