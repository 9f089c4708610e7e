// Hostcall widget strings: Japanese, for a stopped or failed run and a refused message
// (widget/control.js), loaded with it.
export default {
  stopped: 'この応答を停止しました。',
  errorUnavailable: '現在アシスタントを利用できません。しばらくしてからお試しください。',
  errorRefused: 'このメッセージは送信できませんでした。内容を変えてもう一度お試しください。',
  errorConversationLimit: 'この会話は上限に達しました。新しい会話を始めてください。',
  errorOperatorCancelled: 'サポートチームのメンバーがこのリクエストを停止しました。',
}
