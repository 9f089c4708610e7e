// Hostcall widget strings: Japanese, for the history panel (widget/history.js), loaded with it.
export default {
  historyTitle: 'あなたの会話', historyNew: '新しい会話', historyBack: 'チャットに戻る',
  historyLoading: '会話を読み込んでいます…', historyEmpty: 'まだ会話はありません。',
  historyCountOne: '会話 1 件', historyCount: '会話 {n} 件', historyFailed: '会話を読み込めませんでした。しばらくしてからもう一度お試しください。',
  historyMore: '以前の会話を表示', historyUntitled: 'まだメッセージはありません', historyCurrent: '表示中',
  historyDelete: '削除', historyDeleteLabel: '「{title}」を削除',
  historyDeleteAsk: 'この会話を完全に削除しますか？元に戻すことはできません。',
  historyDeleted: '会話を削除しました。', historyDeleteFailed: '削除できませんでした。もう一度お試しください。',
  historyOpenFailed: '開けませんでした。もう一度お試しください。',
}
