// Hostcall widget strings: Japanese, for editing the last message and regenerating the last answer (branch.js, loaded when a run has ended).
export default {
  branchEdit: '編集',
  branchEditLabel: '最後のメッセージを編集',
  branchRegenerate: '再生成',
  branchRegenerateLabel: '最後の回答をもう一度書く',
  branchSend: '送信',
  branchCancel: 'キャンセル',
  branchAlreadyHappened: 'これはすでに実行されました。アシスタントはそのメッセージに基づいて操作しており、元に戻せません。代わりに新しいメッセージを送ってください。',
  branchNew: '新しいメッセージを書く',
  branchFailed: 'うまくいきませんでした。もう一度お試しください。',
}
