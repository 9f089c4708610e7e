// Hostcall widget strings: Japanese, the rating bar's (feedback.js, loaded with the first reply).
export default {
  feedbackLabel: 'この回答を評価',
  feedbackUp: '良い回答',
  feedbackDown: '良くない回答',
  feedbackComment: '詳しく教えてください (任意)',
  feedbackSend: '送信',
  feedbackThanks: 'フィードバックありがとうございます。',
  feedbackFailed: 'フィードバックを送信できませんでした。もう一度お試しください。',
}
