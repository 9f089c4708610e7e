// Hostcall widget strings: Japanese, for files sent with a message (attach.js).
export default {
  attach: 'ファイルを添付',
  attachFiles: '送信するファイル',
  attachAdded: '{name} を添付しました。次のメッセージと一緒に送信されます。',
  attachRemove: '{name} を削除',
  attachUploading: '{n} 件中 {i} 件目をアップロード中…',
  attachTypeRefused: '{name}: この種類のファイルは受け付けていません。',
  attachTooLarge: '{name} は大きすぎます (上限 {size})。',
  attachTooMany: '1 つのメッセージに添付できるファイルは {n} 件までです。',
  attachContentRefused: '{name} は拒否されました: 内容が受け付けている種類ではありません。',
  attachNotAllowed: 'このチャットはファイルを受け付けていません。',
  attachQuota: '{name} は拒否されました: この会話にはこれ以上ファイルを保存できません。',
  attachBadName: '{name} は拒否されました: ファイル名を変更してもう一度お試しください。',
  attachFailed: '{name} をアップロードできませんでした。メッセージは送信されていません。もう一度お試しください。',
}
