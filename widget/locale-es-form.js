// Hostcall widget strings for forms (es): loaded with form.js, when a call first needs a form.
// Keys and {placeholders} as in locale-en-form.js.
export default {
  item: 'Elemento', add: 'Añadir', addTo: 'Añadir a {label}', remove: 'Quitar', removeItem: 'Quitar {item}',
  choose: '— Elegir —', json: 'JSON', jsonInvalid: 'No es JSON válido.',
  fixErrors: 'Corrige los campos marcados ({n}).', v_required: 'Este campo es obligatorio.',
  v_notEmpty: 'No puede estar vacío.', v_type: 'Debe ser {type}.', v_enum: 'Debe ser uno de: {values}.',
  v_minLength: 'Al menos {n} caracteres.', v_maxLength: 'Como máximo {n} caracteres.',
  v_pattern: 'No tiene el formato esperado.', v_format: 'Debe ser un/a {format} válido/a.',
  v_minimum: 'Debe ser al menos {n}.', v_maximum: 'Debe ser como máximo {n}.',
  v_exclusiveMinimum: 'Debe ser mayor que {n}.', v_exclusiveMaximum: 'Debe ser menor que {n}.',
  v_multipleOf: 'Debe ser múltiplo de {n}.', v_minItems: 'Añade al menos {n} elemento(s).',
  v_maxItems: 'Como máximo {n} elemento(s).', v_additional: 'Campo inesperado «{name}».',
  v_invalid: 'Este valor no está permitido.', type_string: 'texto', type_number: 'un número',
  type_integer: 'un número entero', type_boolean: 'sí o no', type_object: 'un objeto', type_array: 'una lista',
  type_null: 'vacío', format_date: 'fecha (AAAA-MM-DD)', 'format_date-time': 'fecha y hora',
  format_time: 'hora', format_email: 'correo electrónico', format_uri: 'URL',
}
