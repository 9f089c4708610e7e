// Hostcall widget strings: Japanese, for MCP Apps views (apps.js, loaded with the first one).
// Keys and {placeholders} as in locale-en-apps.js.
export default {
  appViewTitle: 'ビュー: {name}', appLoading: 'ビューを読み込んでいます…',
  appFailed: 'このビューを表示できませんでした。',
  appUnavailable: 'この結果にはビューがありますが、このサイトでは有効になっていません。',
  appWantsSend: 'ビューが次の内容を送信しようとしています:「{text}」', appSend: '送信',
  appWantsOpen: 'ビューが {host} を開こうとしています。', appOpen: '開く', appDismiss: '閉じる',
  appWantsRun: 'ビューが {tool} を実行しようとしています。', appRun: '実行',
}
