// Hostcall widget strings: English, for the model's reasoning (widget/reasoning.js), loaded
// with it.
export default {
  reasoningThinking: 'Thinking',
  reasoningDone: 'Thought',
}
