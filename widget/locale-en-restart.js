// Hostcall widget strings: English, for the "start a new conversation?" question
// (widget/restart.js), loaded with it.
export default {
  restartAsk: 'Start a new conversation? This one will be closed, and any action waiting for you with it.',
}
