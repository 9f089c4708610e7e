// Hostcall widget strings: Japanese, for what people add (people.js, loaded with the first reply or person): ratings, a person of the team.
export default {
  feedbackLabel: 'この回答を評価',
  feedbackUp: '良い回答',
  feedbackDown: '良くない回答',
  feedbackComment: '詳しく教えてください (任意)',
  feedbackSend: '送信',
  feedbackThanks: 'フィードバックありがとうございます。',
  feedbackFailed: 'フィードバックを送信できませんでした。もう一度お試しください。',
  personJoined: '{name} さんが会話に参加しました。', personLeft: '{name} さんが会話から退出しました。アシスタントが再び応答します。',
  personRequested: 'チームの担当者を呼びました。',
}
