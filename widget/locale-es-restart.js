// Hostcall widget strings: Spanish, for the "start a new conversation?" question
// (widget/restart.js), loaded with it.
export default {
  restartAsk: '¿Empezar una conversación nueva? Esta se cerrará, junto con cualquier acción que te espere.',
}
