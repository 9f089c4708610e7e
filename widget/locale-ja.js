// Hostcall widget strings: Japanese, what the idle chat shows (and words features share);
// each feature's own load with it, from locale-ja-<feature>.js (the rule: chat.js, "Text").
export default {
  chat: 'チャット', conversation: '会話', composer: 'メッセージを書く', message: 'メッセージ',
  placeholder: 'メッセージを入力…', send: '送信', history: 'あなたの会話', newConversation: '新しい会話', close: 'チャットを閉じる', you: 'あなた',
  assistant: 'アシスタント', working: '処理中…', connecting: '接続中…', reconnecting: '接続が切れました。再接続中…',
  retry: '再試行', errorStart: 'チャットを開始できませんでした。', errorGone: 'この会話は利用できなくなりました。',
  errorRun: '問題が発生しました。もう一度お試しください。',
  errorStore: 'サービスが一時的に利用できません。少し待ってからもう一度お試しください。',
  errorBusy: '処理が終わるまでお待ちください。',
  limit: 'メッセージは {n} 文字までです。超えた部分は追加されていません。',
  notSent: '送信されませんでした。', cancel: 'キャンセル',
  busy: '混雑中、再試行しています…',
  stop: '停止',
}
