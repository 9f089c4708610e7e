// Hostcall widget: JSON Schema — a small validator, and forms built from schemas (seed 000:
// prebuilt surfaces, confirmations): the answer to a call (output schema) and the edit of a
// proposed call (input schema). What a form cannot express (oneOf/anyOf/allOf/not, free-form
// objects, tuples) becomes a JSON text area for that part, still validated. Hooks: a control
// has `data-path` (a JSON Pointer); its wrapper (`data-part` field or fieldset, with
// `data-field`) holds its `field-error`.

import { t, h, uid } from './chat.js'

// A field's label when its schema has no title; the tool-call cards name keys with it too
// (here, not in chat.js: the first screen has no form and no card).
/** "dueDate" / "due_date" → "Due date". @param {string} key */
export function humanize(key) {
  const words = key.replace(/([a-z0-9])([A-Z])/g, '$1 $2').replace(/[_-]+/g, ' ').trim().toLowerCase()
  return words.charAt(0).toUpperCase() + words.slice(1)
}

/**
 * @typedef {{path: string, message: string}} FieldError
 * @typedef {{el: HTMLElement, get: (problems: FieldError[]) => any}} FieldNode
 * @typedef {{s: any, value: any, path: string, label: string, help: string, required: boolean,
 *   root: any, depth: number}} Field
 */

// ============================================================================
// Public API
// ============================================================================

/**
 * A call's starting answer: the scalar fields its input shares with its output (create_task's
 * title). The widget's form and the console's start from the same.
 * @param {{input?: unknown, outputSchema?: any}} c @returns {Record<string, unknown>}
 */
export function fromInput(c) {
  const props = c.outputSchema?.properties || {}
  const input = c.input && typeof c.input === 'object' ? c.input : {}
  return Object.fromEntries(Object.entries(input).filter(([k, x]) =>
    k in props && typeof x !== 'object' && (props[k].type === typeof x || props[k].type === undefined)))
}

/**
 * A form for `schema`, prefilled with `value` (else the schema's defaults). `onSubmit` gets
 * a valid value and may resolve to server errors to show.
 * @param {any} schema @param {unknown} value
 * @param {{purpose: string, label: string, submitLabel: string,
 *   onSubmit: (value: any) => Promise<FieldError[] | undefined>,
 *   actions?: {part: string, label: string, onClick: () => void}[]}} o
 * @returns {{el: HTMLFormElement, focus: () => void, showErrors: (errors: FieldError[]) => void}}
 */
export function schemaForm(schema, value, o) {
  const summary = h('p', { 'data-part': 'form-errors', role: 'alert', hidden: true })
  const root = build(schema, value, '', t('answer'), true, schema, 0)
  let tried = false
  const form = /** @type {HTMLFormElement} */ (h('form', {
    'data-part': 'form', 'data-purpose': o.purpose, 'aria-label': o.label, novalidate: true,
    oninput: () => tried && check(false),
    onchange: () => tried && check(false),
    onsubmit: async e => {
      e.preventDefault()
      tried = true
      const { value: v, errors } = check(true)
      if (errors.length) return
      busy(true)
      const server = await o.onSubmit(v).finally(() => busy(false))
      if (server?.length) show(server, true)
    },
  },
  summary,
  root.el,
  h('div', { 'data-part': 'actions' },
    h('button', { type: 'submit', 'data-part': 'submit', 'data-kind': 'primary' }, o.submitLabel),
    (o.actions || []).map(a => h('button', { type: 'button', 'data-part': a.part, onclick: a.onClick }, a.label)))))

  /** The value, and its errors: unreadable controls first, then the schema's. */
  function check(focus) {
    const problems = []
    const v = root.get(problems)
    const seen = new Set(problems.map(p => p.path))
    const errors = problems.concat(validate(schema, v).filter(e => !seen.has(e.path)))
    show(errors, focus)
    return { value: v, errors }
  }

  /** Each error on the wrapper of its path, or of its nearest ancestor. */
  function show(errors, focus) {
    for (const slot of form.querySelectorAll('[data-part=field-error]')) Object.assign(slot, { textContent: '', hidden: true })
    for (const c of form.querySelectorAll('[aria-invalid]')) c.removeAttribute('aria-invalid')
    for (const err of errors) {
      let path = toPointer(err.path)
      let wrap
      while (!(wrap = form.querySelector(`[data-field="${CSS.escape(path)}"]`)) && path) path = path.slice(0, path.lastIndexOf('/'))
      const slot = /** @type {HTMLElement | null | undefined} */ (wrap?.querySelector(':scope > [data-part=field-error]'))
      if (!wrap || !slot) continue
      slot.hidden = false
      slot.textContent = `${slot.textContent} ${err.message}`.trim()
      if (wrap.dataset.part === 'field') wrap.querySelector('[data-path]')?.setAttribute('aria-invalid', 'true')
    }
    summary.hidden = !errors.length
    summary.textContent = t('fixErrors', { n: errors.length })
    // Focus the first field with an error, in reading order.
    const slot = [...form.querySelectorAll('[data-part=field-error]')].find(e => !e.hasAttribute('hidden'))
    if (focus) /** @type {HTMLElement | null | undefined} */ (slot?.parentElement?.querySelector('[data-path]'))?.focus()
  }

  function busy(on) {
    for (const b of form.querySelectorAll('button')) b.toggleAttribute('disabled', on)
    on ? form.setAttribute('aria-busy', 'true') : form.removeAttribute('aria-busy')
  }

  return {
    el: form,
    focus: () => /** @type {HTMLElement | null} */ (form.querySelector('[data-path]'))?.focus(),
    showErrors: errors => { tried = true; show(errors, false) },
  }
}

// ============================================================================
// Validator: the subset tool schemas use. A handler's output is checked before it is sent
//, every form before submit; the server checks again with `jsonschema`, so this
// only has to be right where it speaks. type, enum, const, required, properties,
// additionalProperties, items, min/maxItems, uniqueItems, minimum/maximum (+exclusive),
// multipleOf, min/maxLength, pattern, format (date, date-time, time, email, uri),
// allOf/anyOf/oneOf/not, local $ref. Error paths are JSON Pointers ("" is the root).
// ============================================================================

/** @typedef {{path: string, message: string, keyword: string}} SchemaError */

/** Every error of `value` against `schema` (none: valid). @param {any} schema @param {unknown} value @returns {SchemaError[]} */
export function validate(schema, value) {
  /** @type {SchemaError[]} */
  const out = []
  walk(schema, value, '', out, schema, 0)
  return out
}

/** Follow a local `$ref` ("#/$defs/x"); anything else resolves to `{}`. @param {any} schema @param {any} root */
export function deref(schema, root) {
  for (let hops = 0; typeof schema?.$ref === 'string'; hops++) {
    if (hops > 20 || !schema.$ref.startsWith('#')) return {}
    schema = schema.$ref.slice(1).split('/').filter(Boolean)
      .reduce((node, part) => node?.[decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~')], root) ?? {}
  }
  return schema
}

/** @param {string} path @param {string|number} key */
export const childPath = (path, key) => `${path}/${String(key).replace(/~/g, '~0').replace(/\//g, '~1')}`

/**
 * Any path spelling a server may use ("/a/0/b", "/", "a.0.b", "a[0].b", "$.a[0].b", a list)
 * as a JSON Pointer, so its errors land on the right field. @param {unknown} path
 */
export function toPointer(path) {
  if (Array.isArray(path)) return path.reduce(childPath, '')
  const s = String(path ?? '')
  if (s === '/' || s === '$') return ''
  if (!s || s.startsWith('/')) return s
  return s.replace(/^\$\.?/, '').split(/[.[\]]+/).filter(Boolean).reduce(childPath, '')
}

const isDate = s => {
  const m = /^(\d{4})-(\d\d)-(\d\d)$/.exec(s)
  const d = m && new Date(Date.UTC(+m[1], +m[2] - 1, +m[3]))
  return Boolean(m && d && d.getUTCMonth() === +m[2] - 1 && d.getUTCDate() === +m[3])
}

/** @type {Record<string, (s: string) => boolean>} */
const FORMATS = {
  date: isDate,
  'date-time': s => /^\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)$/.test(s) && isDate(s.slice(0, 10)),
  time: s => /^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?([Zz]|[+-]\d\d:\d\d)?$/.test(s),
  email: s => /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/.test(s),
  uri: s => { try { return /^[a-z][a-z0-9+.-]*:\S*$/i.test(s) && Boolean(new URL(s)) } catch { return false } },
}

const typeOf = v => (v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v)

const isType = (type, v) => type === typeOf(v) || (type === 'number' && typeOf(v) === 'integer')

/** JSON text with sorted keys, to compare values. */
const canon = v => JSON.stringify(v, (_, x) => (x && typeof x === 'object' && !Array.isArray(x)
  ? Object.fromEntries(Object.keys(x).sort().map(k => [k, x[k]])) : x))

function walk(schema, v, path, out, root, depth) {
  const fail = (keyword, params, at = path) => out.push({ path: at, keyword, message: t(`v_${keyword}`, params) })
  if (schema === false) return fail('invalid')
  const s = deref(schema, root)
  if (!s || typeof s !== 'object' || depth > 64) return

  if (s.type !== undefined) {
    const types = [].concat(s.type)
    if (!types.some(type => isType(type, v))) return fail('type', { type: types.map(type => t(`type_${type}`)).join(' / ') })
  }
  if (Array.isArray(s.enum) && !s.enum.some(e => canon(e) === canon(v))) {
    fail('enum', { values: s.enum.map(e => (typeof e === 'string' ? e : JSON.stringify(e))).join(', ') })
  }
  if ('const' in s && canon(s.const) !== canon(v)) fail('invalid')

  if (typeof v === 'string') {
    const len = [...v].length
    if (len < s.minLength) fail(s.minLength === 1 ? 'notEmpty' : 'minLength', { n: s.minLength })
    if (len > s.maxLength) fail('maxLength', { n: s.maxLength })
    try { if (typeof s.pattern === 'string' && !new RegExp(s.pattern, 'u').test(v)) fail('pattern') } catch { /* the server's call */ }
    if (FORMATS[s.format] && !FORMATS[s.format](v)) fail('format', { format: t(`format_${s.format}`) })
  }

  if (typeof v === 'number') {
    if (v < s.minimum) fail('minimum', { n: s.minimum })
    if (v > s.maximum) fail('maximum', { n: s.maximum })
    if (typeof s.exclusiveMinimum === 'number' && v <= s.exclusiveMinimum) fail('exclusiveMinimum', { n: s.exclusiveMinimum })
    if (typeof s.exclusiveMaximum === 'number' && v >= s.exclusiveMaximum) fail('exclusiveMaximum', { n: s.exclusiveMaximum })
    if (s.multipleOf > 0 && Math.abs(v / s.multipleOf - Math.round(v / s.multipleOf)) > 1e-9) fail('multipleOf', { n: s.multipleOf })
  }

  if (Array.isArray(v)) {
    if (v.length < s.minItems) fail('minItems', { n: s.minItems })
    if (v.length > s.maxItems) fail('maxItems', { n: s.maxItems })
    if (s.uniqueItems === true && new Set(v.map(canon)).size !== v.length) fail('invalid')
    if (s.items && !Array.isArray(s.items)) v.forEach((item, i) => walk(s.items, item, childPath(path, i), out, root, depth + 1))
  }

  if (typeOf(v) === 'object') {
    const props = s.properties || {}
    for (const name of Array.isArray(s.required) ? s.required : []) {
      if (v[name] === undefined) fail('required', {}, childPath(path, name))
    }
    for (const [name, item] of Object.entries(v)) {
      const at = childPath(path, name)
      if (name in props) walk(props[name], item, at, out, root, depth + 1)
      else if (s.additionalProperties === false) fail('additional', { name }, at)
      else if (typeof s.additionalProperties === 'object') walk(s.additionalProperties, item, at, out, root, depth + 1)
    }
  }

  const passes = sub => { const errs = ([]); walk(sub, v, path, errs, root, depth + 1); return !errs.length }
  for (const sub of s.allOf || []) walk(sub, v, path, out, root, depth + 1)
  // The rare combinators share one message: the field is wrong, the server says exactly why.
  if ((s.anyOf && !s.anyOf.some(passes)) || (s.oneOf && s.oneOf.filter(passes).length !== 1) || (s.not !== undefined && passes(s.not))) fail('invalid')
}

// ============================================================================
// Schema → control
// ============================================================================

/** The kind of control for a (dereferenced) schema. */
function kindOf(s) {
  if (s.anyOf || s.oneOf || s.allOf || s.not || s.if || 'const' in s) return 'json'
  if (s.enum?.length && s.enum.every(e => e === null || typeof e !== 'object')) return 'enum'
  const types = [].concat(s.type ?? (s.properties ? 'object' : s.items ? 'array' : [])).filter(x => x !== 'null')
  const type = types.length === 1 ? types[0] : 'json'
  if (type === 'object') return !s.properties || s.patternProperties || typeof s.additionalProperties === 'object' ? 'json' : type
  if (type === 'array') return typeof s.items === 'object' && !Array.isArray(s.items) ? type : 'json'
  return ['string', 'number', 'integer', 'boolean'].includes(type) ? type : 'json'
}

function build(schema, value, path, fallbackLabel, required, root, depth) {
  const s = deref(schema, root)
  const o = s && typeof s === 'object' ? s : {}
  /** @type {Field} */
  const f = {
    s: o, path, required, root, depth: depth + 1,
    value: value === undefined && o.default !== undefined ? structuredClone(o.default) : value,
    label: typeof o.title === 'string' && o.title ? o.title : fallbackLabel,
    help: typeof o.description === 'string' ? o.description : '',
  }
  const kind = depth > 8 ? 'json' : kindOf(o)
  return kind === 'object' ? objectField(f) : kind === 'array' ? arrayField(f) : scalarField(kind, f)
}

/** A fieldset with legend, help and error slot (the root object: a plain div). */
function group(f, ...kids) {
  const id = uid('group')
  if (!f.path) return h('div', { 'data-part': 'fieldset', 'data-field': '' }, kids, h('p', { 'data-part': 'field-error', hidden: true }))
  return h('fieldset', { 'data-part': 'fieldset', 'data-field': f.path, 'aria-describedby': f.help ? `${id}-help` : null },
    h('legend', { text: f.label }), f.help && h('p', { id: `${id}-help`, 'data-part': 'field-help', text: f.help }),
    kids, h('p', { 'data-part': 'field-error', hidden: true }))
}

function objectField(f) {
  const given = f.value && typeof f.value === 'object' && !Array.isArray(f.value) ? f.value : {}
  const required = new Set(f.s.required || [])
  const children = Object.entries(f.s.properties).map(([key, sub]) =>
    ([key, build(sub, given[key], childPath(f.path, key), humanize(key), required.has(key), f.root, f.depth)]))
  // Keys the schema does not list travel through untouched, unless it forbids them.
  const extra = f.s.additionalProperties === false ? {} : Object.fromEntries(Object.entries(given).filter(([k]) => !(k in f.s.properties)))
  return {
    el: group(f, children.map(([, c]) => c.el)),
    get(problems) {
      const out = { ...extra }
      for (const [key, c] of children) out[key] = c.get(problems)
      for (const key in out) if (out[key] === undefined) delete out[key]
      return f.required || Object.keys(out).length ? out : undefined
    },
  }
}

function arrayField(f) {
  const item = deref(f.s.items, f.root)
  const itemLabel = (typeof item?.title === 'string' && item.title) || t('item')
  const list = h('ol', { 'data-part': 'array-items' })
  /** @type {{el: HTMLElement, node: FieldNode}[]} */
  let rows = []
  const focusIn = (el) => (el?.querySelector('[data-path], button'))?.focus()
  const add = h('button', {
    type: 'button', 'data-part': 'add-item', 'data-array-path': f.path, 'aria-label': t('addTo', { label: f.label }),
    onclick: () => { row(undefined); focusIn(rows.at(-1)?.el) },
  }, t('add'))

  function row(v) {
    const i = rows.length
    const label = `${itemLabel} ${i + 1}`
    const node = build(f.s.items, v, childPath(f.path, i), label, true, f.root, f.depth)
    const el = h('li', { 'data-part': 'array-item' }, node.el, h('button', {
      type: 'button', 'data-part': 'remove-item', 'data-item-path': childPath(f.path, i),
      'aria-label': t('removeItem', { item: label }), onclick: () => remove(i),
    }, t('remove')))
    rows.push({ el, node })
    list.append(el)
  }

  /** Rows are rebuilt so that paths and labels stay in order. */
  function remove(i) {
    const values = rows.map(r => r.node.get([]))
    values.splice(i, 1)
    rows = []
    list.replaceChildren()
    values.forEach(row)
    rows.length ? focusIn(rows[Math.min(i, rows.length - 1)].el) : add.focus()
  }

  const initial = Array.isArray(f.value) ? f.value.slice(0, 500) : []
  while (initial.length < Math.min(f.s.minItems || 0, 50)) initial.push(undefined)
  initial.forEach(row)
  return {
    el: group(f, list, add),
    get(problems) {
      const out = rows.map(r => r.node.get(problems))
      return f.required || out.length ? out : undefined
    },
  }
}

/** ISO date-time → the `datetime-local` control's local "YYYY-MM-DDTHH:MM:SS". */
function toLocal(iso) {
  const d = new Date(iso)
  return Number.isNaN(d.getTime()) ? '' : new Date(d.getTime() - d.getTimezoneOffset() * 6e4).toISOString().slice(0, 19)
}

const INPUT_TYPES = ({ date: 'date', 'date-time': 'datetime-local', time: 'time', email: 'email', uri: 'url' })

/** One control: text, textarea, date…, number, checkbox, select, or a JSON text area. */
function scalarField(kind, f) {
  const { s, value, path, required } = f
  const id = uid('f')
  const empty = () => ([].concat(s.type).includes(('null')) && required ? null : undefined)
  const attrs = {
    id, name: path || 'value', 'data-part': 'input', 'data-path': path, 'data-kind': kind,
    'aria-describedby': `${f.help ? `${id}-help ` : ''}${id}-err`,
    'aria-required': required && kind !== 'boolean' ? 'true' : null,
  }
  let ctl
  /** @type {FieldNode['get']} */
  let get = () => (ctl.value === '' ? empty() : ctl.value)

  if (kind === 'enum' || (kind === 'boolean' && !required && s.default === undefined)) {
    // An optional boolean is a three-way choice (unset, yes, no): a select too.
    const options = kind === 'enum' ? s.enum : [true, false]
    const current = JSON.stringify(value)
    ctl = h('select', attrs, h('option', { value: '', text: t('choose') }),
      options.map(e => h('option', {
        value: JSON.stringify(e), selected: JSON.stringify(e) === current,
        text: typeof e === 'boolean' ? t(e ? 'yes' : 'no') : e === null ? t('none') : e,
      })))
    get = () => (ctl.value === '' ? empty() : JSON.parse(ctl.value))
  } else if (kind === 'boolean') {
    ctl = h('input', { ...attrs, type: 'checkbox', checked: value === true })
    get = () => ctl.checked
  } else if (kind === 'number' || kind === 'integer') {
    ctl = h('input', {
      ...attrs, type: 'number', step: kind === 'integer' ? 1 : 'any', min: s.minimum, max: s.maximum,
      value: value == null ? '' : String(value),
    })
    get = problems => (ctl.validity.badInput
      ? void problems.push({ path, message: t('v_type', { type: t(`type_${kind}`) }) })
      : ctl.value === '' ? empty() : Number(ctl.value))
  } else if (kind === 'string') {
    const str = value == null ? '' : typeof value === 'string' ? value : JSON.stringify(value)
    let type = INPUT_TYPES[s.format] || 'text'
    // A value a typed control can't show (a handler's "Friday" for a date): plain text box.
    if (str && ((type === 'date' && !/^\d{4}-\d\d-\d\d$/.test(str)) || (type === 'datetime-local' && !toLocal(str)))) type = 'text'
    const lengths = { minlength: s.minLength, maxlength: s.maxLength }
    const long = type === 'text' && !(s.maxLength <= 120) && /desc|note|comment|body|message|detail|summary|reason|text/i.test(path.slice(path.lastIndexOf('/')))
    ctl = long
      ? h('textarea', { ...attrs, ...lengths, rows: 3 }, str)
      : h('input', { ...attrs, ...lengths, type, step: type === 'datetime-local' ? 1 : null, value: type === 'datetime-local' ? toLocal(str) : str })
    if (type === 'datetime-local') get = () => (ctl.value === '' ? empty() : new Date(ctl.value).toISOString().replace('.000Z', 'Z'))
  } else {
    ctl = h('textarea', { ...attrs, 'data-part': 'json-input', rows: 5, spellcheck: 'false' }, value === undefined ? '' : JSON.stringify(value, null, 2))
    get = problems => {
      try { return ctl.value.trim() ? JSON.parse(ctl.value) : empty() } catch { problems.push({ path, message: t('jsonInvalid') }) }
    }
  }

  const help = f.help && h('p', { id: `${id}-help`, 'data-part': 'field-help', text: f.help })
  const error = h('p', { id: `${id}-err`, 'data-part': 'field-error', hidden: true })
  const checkbox = ctl.type === 'checkbox'
  const label = checkbox
    ? h('label', { for: id }, ctl, ' ', f.label)
    : h('label', { for: id }, f.label,
      required && kind !== 'boolean' && !/\/\d+$/.test(path) && h('span', { 'data-part': 'required', 'aria-hidden': 'true', text: ' *' }),
      kind === 'json' && h('span', { 'data-part': 'json-hint', text: ` (${t('json')})` }))
  return { el: h('div', { 'data-part': 'field', 'data-field': path, 'data-kind': checkbox ? 'checkbox' : kind }, label, help, checkbox ? null : ctl, error), get }
}
