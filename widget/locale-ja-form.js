// Hostcall widget strings for forms (ja): loaded with form.js, when a call first needs a form.
// Keys and {placeholders} as in locale-en-form.js.
export default {
  item: '項目', add: '追加', addTo: '{label} に追加', remove: '削除', removeItem: '{item} を削除', choose: '— 選択 —',
  json: 'JSON', jsonInvalid: '有効な JSON ではありません。', fixErrors: '項目を修正してください({n})。', v_required: 'この項目は必須です。',
  v_notEmpty: '空にはできません。', v_type: '{type}で入力してください。', v_enum: '次のいずれかにしてください: {values}。',
  v_minLength: '{n} 文字以上にしてください。', v_maxLength: '{n} 文字以内にしてください。', v_pattern: '想定された形式と一致しません。',
  v_format: '有効な{format}を入力してください。', v_minimum: '{n} 以上にしてください。', v_maximum: '{n} 以下にしてください。',
  v_exclusiveMinimum: '{n} より大きくしてください。', v_exclusiveMaximum: '{n} より小さくしてください。',
  v_multipleOf: '{n} の倍数にしてください。', v_minItems: '{n} 件以上追加してください。', v_maxItems: '{n} 件以下にしてください。',
  v_additional: '想定外の項目「{name}」があります。', v_invalid: 'この値は使用できません。', type_string: 'テキスト', type_number: '数値',
  type_integer: '整数', type_boolean: 'はい/いいえ', type_object: 'オブジェクト', type_array: 'リスト', type_null: '空',
  format_date: '日付(YYYY-MM-DD)', 'format_date-time': '日時', format_time: '時刻', format_email: 'メールアドレス',
  format_uri: 'URL',
}
