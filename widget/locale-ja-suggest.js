// Hostcall widget strings: Japanese, for what the agent file offers (suggest.js): starters, follow-ups, the conversation's rating.
export default {
  starters: '質問の候補',
  followUps: '返信の候補',
  ratingQuestion: 'この会話はいかがでしたか？',
  ratingScore: '5 段階中 {n}',
  ratingLow: '不満',
  ratingHigh: '満足',
  ratingRemark: 'ご意見があればどうぞ (任意)',
  ratingSend: '評価を送信',
  ratingThanks: 'この会話を評価していただきありがとうございます。',
  ratingFailed: '評価を送信できませんでした。もう一度お試しください。',
}
