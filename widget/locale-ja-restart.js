// Hostcall widget strings: Japanese, for the "start a new conversation?" question
// (widget/restart.js), loaded with it.
export default {
  restartAsk: '新しい会話を始めますか? この会話と、確認待ちの操作は閉じられます。',
}
