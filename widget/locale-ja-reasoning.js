// Hostcall widget strings: Japanese, for the model's reasoning (widget/reasoning.js), loaded
// with it.
export default {
  reasoningThinking: '考え中',
  reasoningDone: '思考',
}
