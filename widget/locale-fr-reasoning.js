// Hostcall widget strings: French, for the model's reasoning (widget/reasoning.js), loaded
// with it.
export default {
  reasoningThinking: 'Réflexion',
  reasoningDone: 'Réflexion terminée',
}
