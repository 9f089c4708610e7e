// Hostcall widget strings for forms (en): loaded with form.js, when a call first needs a form.
// Keys and {placeholders} as in locale-en-form.js.
export default {
  item: 'Item', add: 'Add', addTo: 'Add to {label}', remove: 'Remove', removeItem: 'Remove {item}',
  choose: '— Choose —', json: 'JSON', jsonInvalid: 'This is not valid JSON.',
  fixErrors: 'Please correct the highlighted fields ({n}).', v_required: 'This field is required.',
  v_notEmpty: 'Must not be empty.', v_type: 'Must be {type}.', v_enum: 'Must be one of: {values}.',
  v_minLength: 'Must be at least {n} characters.', v_maxLength: 'Must be at most {n} characters.',
  v_pattern: 'Does not match the expected format.', v_format: 'Must be a valid {format}.',
  v_minimum: 'Must be at least {n}.', v_maximum: 'Must be at most {n}.',
  v_exclusiveMinimum: 'Must be greater than {n}.', v_exclusiveMaximum: 'Must be less than {n}.',
  v_multipleOf: 'Must be a multiple of {n}.', v_minItems: 'Add at least {n} item(s).',
  v_maxItems: 'At most {n} item(s).', v_additional: 'Unexpected field “{name}”.',
  v_invalid: 'This value is not allowed.', type_string: 'text', type_number: 'a number',
  type_integer: 'a whole number', type_boolean: 'yes or no', type_object: 'an object', type_array: 'a list',
  type_null: 'empty', format_date: 'date (YYYY-MM-DD)', 'format_date-time': 'date and time',
  format_time: 'time', format_email: 'email address', format_uri: 'URL',
}
