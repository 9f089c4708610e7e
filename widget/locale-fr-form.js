// Hostcall widget strings for forms (fr): loaded with form.js, when a call first needs a form.
// Keys and {placeholders} as in locale-en-form.js.
export default {
  item: 'Élément', add: 'Ajouter', addTo: 'Ajouter à {label}', remove: 'Supprimer',
  removeItem: 'Supprimer {item}', choose: '— Choisir —', json: 'JSON',
  jsonInvalid: 'Ce n’est pas du JSON valide.', fixErrors: 'Veuillez corriger les champs signalés ({n}).',
  v_required: 'Ce champ est obligatoire.', v_notEmpty: 'Ne doit pas être vide.', v_type: 'Doit être {type}.',
  v_enum: 'Doit être l’une des valeurs : {values}.', v_minLength: 'Au moins {n} caractères.',
  v_maxLength: 'Au plus {n} caractères.', v_pattern: 'Ne correspond pas au format attendu.',
  v_format: 'Doit être un(e) {format} valide.', v_minimum: 'Doit être au moins {n}.',
  v_maximum: 'Doit être au plus {n}.', v_exclusiveMinimum: 'Doit être supérieur à {n}.',
  v_exclusiveMaximum: 'Doit être inférieur à {n}.', v_multipleOf: 'Doit être un multiple de {n}.',
  v_minItems: 'Ajoutez au moins {n} élément(s).', v_maxItems: 'Au plus {n} élément(s).',
  v_additional: 'Champ inattendu « {name} ».', v_invalid: 'Cette valeur n’est pas permise.',
  type_string: 'du texte', type_number: 'un nombre', type_integer: 'un nombre entier',
  type_boolean: 'oui ou non', type_object: 'un objet', type_array: 'une liste', type_null: 'vide',
  format_date: 'date (AAAA-MM-JJ)', 'format_date-time': 'date et heure', format_time: 'heure',
  format_email: 'adresse e-mail', format_uri: 'URL',
}
