// Hostcall widget strings: Spanish, for the model's reasoning (widget/reasoning.js), loaded
// with it.
export default {
  reasoningThinking: 'Pensando',
  reasoningDone: 'Razonamiento',
}
