// Hostcall widget strings: French, for a stopped or failed run and a refused message
// (widget/control.js), loaded with it.
export default {
  stopped: 'Vous avez arrêté cette réponse.',
  errorUnavailable: 'L’assistant n’est pas disponible pour le moment. Réessayez plus tard.',
  errorRefused: 'Ce message n’a pas pu être envoyé. Modifiez-le et réessayez.',
  errorConversationLimit: 'Cette conversation a atteint sa limite. Veuillez commencer une nouvelle conversation.',
  errorOperatorCancelled: 'Un membre de l’équipe d’assistance a arrêté cette demande.',
}
