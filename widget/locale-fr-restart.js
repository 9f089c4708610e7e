// Hostcall widget strings: French, for the "start a new conversation?" question
// (widget/restart.js), loaded with it.
export default {
  restartAsk: 'Commencer une nouvelle conversation ? Celle-ci sera fermée, avec toute action qui vous attend.',
}
