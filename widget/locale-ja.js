// Hostcall widget strings: Japanese, the chat's own. Keys and {placeholders} as in locale-en.js;
// the tool calls' strings are in locale-ja-calls.js, loaded with the first call.
export default {
  chat: 'チャット', conversation: '会話', composer: 'メッセージを書く', message: 'メッセージ',
  placeholder: 'メッセージを入力…', send: '送信', history: 'あなたの会話', newConversation: '新しい会話', close: 'チャットを閉じる', you: 'あなた',
  assistant: 'アシスタント', working: '処理中…', connecting: '接続中…', reconnecting: '接続が切れました。再接続中…',
  retry: '再試行', errorStart: 'チャットを開始できませんでした。', errorGone: 'この会話は利用できなくなりました。',
  errorRun: '問題が発生しました。もう一度お試しください。', errorUnavailable: '現在アシスタントを利用できません。しばらくしてからお試しください。',
  errorStore: 'サービスが一時的に利用できません。少し待ってからもう一度お試しください。',
  errorRefused: 'このメッセージは送信できませんでした。内容を変えてもう一度お試しください。',
  errorBusy: '処理が終わるまでお待ちください。', restartAsk: '新しい会話を始めますか? この会話と、確認待ちの操作は閉じられます。',
  errorConversationLimit: 'この会話は上限に達しました。新しい会話を始めてください。',
  limit: 'メッセージは {n} 文字までです。超えた部分は追加されていません。',
  notSent: '送信されませんでした。', cancel: 'キャンセル',
  stop: '停止', stopped: 'この応答を停止しました。',
  errorOperatorCancelled: 'サポートチームのメンバーがこのリクエストを停止しました。',
}
