// Hostcall widget: a form generated from a JSON Schema.
//
// Two uses (seed 000, "prebuilt surfaces" and "confirmations"): a person answers a tool call
// through a form built from the tool's OUTPUT schema, and edits a proposed call through a
// form built from its INPUT schema. What the form can express: strings (format date,
// date-time, time, email, uri), numbers, integers, booleans, enums, nested objects, arrays
// of scalars and of objects (add/remove rows), required, defaults, min/max, lengths,
// pattern; `title` is the label and `description` the help. A sub-schema it cannot express
// (oneOf/anyOf/allOf/not, free-form objects, tuples) becomes a JSON text area for that part
// only — still validated before submit, and again by the server.
//
// Test hooks: every control has `data-path` (a JSON Pointer, "" for the root) and
// `data-part="input"`; its wrapper has `data-part="field"` (or "fieldset") and
// `data-field=<path>`; errors render in `[data-part=field-error]` of the nearest wrapper.

import { t } from './i18n.js'
import { validate, deref, childPath, toPointer } from './schema.js'
import { h, uid, humanize } from './chat.js'

/**
 * @typedef {{path: string, message: string}} FieldError
 * @typedef {{el: HTMLElement, get: (problems: FieldError[]) => any}} FieldNode
 * @typedef {{part: string, label: string, onClick: () => void, kind?: string}} Action
 * @typedef {{purpose: string, label: string, submitLabel: string,
 *   onSubmit: (value: any) => Promise<FieldError[] | void> | FieldError[] | void,
 *   actions?: Action[]}} FormOptions
 * @typedef {{el: HTMLFormElement, focus: () => void, showErrors: (errors: FieldError[], focus?: boolean) => void}} SchemaForm
 */

// ============================================================================
// Public API
// ============================================================================

/**
 * Build a form for `schema`, prefilled with `value` (or the schema's defaults).
 * @param {any} schema @param {unknown} value @param {FormOptions} o
 * @returns {SchemaForm}
 */
export function schemaForm(schema, value, o) {
  const summary = h('p', { 'data-part': 'form-errors', role: 'alert', hidden: true })
  const root = build(schema, value, '', t('answer'), true, { root: schema, depth: 0 })
  let tried = false
  const form = /** @type {HTMLFormElement} */ (h('form', {
    'data-part': 'form', 'data-purpose': o.purpose, 'aria-label': o.label, novalidate: true,
    oninput: () => { if (tried) check(false) },
    onchange: () => { if (tried) check(false) },
    onsubmit: async (/** @type {Event} */ e) => {
      e.preventDefault()
      tried = true
      const { value: v, errors } = check(true)
      if (errors.length) return
      busy(true)
      let server
      try { server = await o.onSubmit(v) } finally { busy(false) }
      if (server && server.length) show(server, true)
    },
  },
  summary,
  root.el,
  h('div', { 'data-part': 'actions' },
    h('button', { type: 'submit', 'data-part': 'submit', 'data-kind': 'primary' }, o.submitLabel),
    (o.actions || []).map(a => h('button', { type: 'button', 'data-part': a.part, 'data-kind': a.kind || null, onclick: a.onClick }, a.label)))))

  /** Collect the value and every error (unparsable controls first, then the schema). */
  function check(/** @type {boolean} */ focus) {
    /** @type {FieldError[]} */
    const problems = []
    const v = root.get(problems)
    const seen = new Set(problems.map(p => p.path))
    const errors = problems.concat(validate(schema, v).filter(e => !seen.has(e.path)))
    show(errors, focus)
    return { value: v, errors }
  }

  /** @param {FieldError[]} errors @param {boolean} [focus] */
  function show(errors, focus) {
    for (const slot of form.querySelectorAll('[data-part=field-error]')) { slot.textContent = ''; slot.toggleAttribute('hidden', true) }
    for (const c of form.querySelectorAll('[aria-invalid]')) c.removeAttribute('aria-invalid')
    /** @type {HTMLElement | null} */
    let first = null
    for (const err of errors) {
      const wrap = findWrap(toPointer(err.path))
      if (!wrap) continue
      const slot = /** @type {HTMLElement} */ (wrap.querySelector(':scope > [data-part=field-error]'))
      slot.hidden = false
      slot.textContent = slot.textContent ? `${slot.textContent} ${err.message}` : err.message
      const ctl = /** @type {HTMLElement | null} */ (wrap.querySelector('[data-path]'))
      if (ctl && wrap.dataset.part === 'field') ctl.setAttribute('aria-invalid', 'true')
      first ??= ctl
    }
    summary.hidden = !errors.length
    summary.textContent = errors.length ? t('fixErrors', { n: errors.length }) : ''
    if (focus && first) first.focus()
  }

  /** The wrapper for `path`, or for its nearest ancestor that has one. @param {string} path */
  function findWrap(path) {
    for (let p = path; ; p = p.slice(0, p.lastIndexOf('/'))) {
      const w = /** @type {HTMLElement | null} */ (form.querySelector(`[data-field="${CSS.escape(p)}"]`))
      if (w || !p) return w
    }
  }

  /** @param {boolean} on */
  function busy(on) {
    for (const b of form.querySelectorAll('button')) b.toggleAttribute('disabled', on)
    on ? form.setAttribute('aria-busy', 'true') : form.removeAttribute('aria-busy')
  }

  return {
    el: form,
    focus: () => /** @type {HTMLElement | null} */ (form.querySelector('[data-path]'))?.focus(),
    showErrors: (errors, focus = false) => { tried = true; show(errors, focus) },
  }
}

// ============================================================================
// Schema → kind of control
// ============================================================================

/** The one non-null type of a schema, or null when it has none or several. @param {any} s */
function mainType(s) {
  if (s.type === undefined) return s.properties ? 'object' : s.items ? 'array' : null
  const types = [].concat(s.type).filter(x => x !== 'null')
  return types.length === 1 ? types[0] : null
}

/** @param {any} s @returns {string} */
function kindOf(s) {
  if (!s || typeof s !== 'object') return 'json'
  if (s.anyOf || s.oneOf || s.allOf || s.not || s.if || 'const' in s) return 'json'
  if (Array.isArray(s.enum) && s.enum.length && s.enum.every((/** @type {any} */ e) => e === null || typeof e !== 'object')) return 'enum'
  const type = mainType(s)
  if (type === 'object') {
    const free = !s.properties || s.patternProperties || (s.additionalProperties && typeof s.additionalProperties === 'object')
    return free ? 'json' : 'object'
  }
  if (type === 'array') return s.items && typeof s.items === 'object' && !Array.isArray(s.items) ? 'array' : 'json'
  return ['string', 'number', 'integer', 'boolean'].includes(String(type)) ? String(type) : 'json'
}

// ============================================================================
// Field builders
// ============================================================================

/**
 * @param {any} schema @param {any} value @param {string} path @param {string} fallbackLabel
 * @param {boolean} required @param {{root: any, depth: number}} ctx
 * @returns {FieldNode}
 */
function build(schema, value, path, fallbackLabel, required, ctx) {
  const s = deref(schema, ctx.root)
  const kind = ctx.depth > 8 ? 'json' : kindOf(s)
  const o = s && typeof s === 'object' ? s : {}
  const label = typeof o.title === 'string' && o.title ? o.title : fallbackLabel
  const help = typeof o.description === 'string' ? o.description : ''
  if (value === undefined && o.default !== undefined) value = structuredClone(o.default)
  const sub = { root: ctx.root, depth: ctx.depth + 1 }
  if (kind === 'object') return objectField(o, value, path, label, help, required, sub)
  if (kind === 'array') return arrayField(o, value, path, label, help, required, sub)
  return scalarField(kind, o, value, path, label, help, required)
}

/** @param {string} id @param {string} help */
const helpText = (id, help) => (help ? h('p', { id, 'data-part': 'field-help', text: help }) : null)

/** @param {string} id */
const errorSlot = id => h('p', { id, 'data-part': 'field-error', hidden: true })

/**
 * @param {any} s @param {any} value @param {string} path @param {string} label @param {string} help
 * @param {boolean} required @param {{root: any, depth: number}} ctx @returns {FieldNode}
 */
function objectField(s, value, path, label, help, required, ctx) {
  const given = value && typeof value === 'object' && !Array.isArray(value) ? value : {}
  const req = new Set(Array.isArray(s.required) ? s.required : [])
  const children = Object.entries(s.properties).map(([key, sub]) =>
    /** @type {[string, FieldNode]} */ ([key, build(sub, given[key], childPath(path, key), humanize(key), req.has(key), ctx)]))
  // Keys the schema doesn't list are carried through untouched unless it forbids them.
  const extra = s.additionalProperties === false ? {} : Object.fromEntries(Object.entries(given).filter(([k]) => !(k in s.properties)))
  const id = uid('group')
  const el = path === ''
    ? h('div', { 'data-part': 'fieldset', 'data-field': '' }, children.map(([, c]) => c.el), errorSlot(`${id}-err`))
    : h('fieldset', { 'data-part': 'fieldset', 'data-field': path, 'aria-describedby': help ? `${id}-help` : null },
      h('legend', { text: label }), helpText(`${id}-help`, help), children.map(([, c]) => c.el), errorSlot(`${id}-err`))
  return {
    el,
    get(problems) {
      /** @type {Record<string, any>} */
      const out = { ...extra }
      for (const [key, c] of children) {
        const v = c.get(problems)
        if (v !== undefined) out[key] = v
      }
      return !required && !Object.keys(out).length ? undefined : out
    },
  }
}

/**
 * @param {any} s @param {any} value @param {string} path @param {string} label @param {string} help
 * @param {boolean} required @param {{root: any, depth: number}} ctx @returns {FieldNode}
 */
function arrayField(s, value, path, label, help, required, ctx) {
  const itemSchema = deref(s.items, ctx.root)
  const itemLabel = (typeof itemSchema?.title === 'string' && itemSchema.title) || t('item')
  const list = h('ol', { 'data-part': 'array-items' })
  /** @type {{el: HTMLElement, node: FieldNode}[]} */
  let rows = []
  const id = uid('group')
  const add = h('button', {
    type: 'button', 'data-part': 'add-item', 'data-array-path': path, 'aria-label': t('addTo', { label }),
    onclick: () => { row(undefined); focusIn(rows[rows.length - 1].el) },
  }, t('add'))

  /** @param {any} v */
  function row(v) {
    const i = rows.length
    const itemPath = childPath(path, i)
    const node = build(s.items, v, itemPath, `${itemLabel} ${i + 1}`, true, ctx)
    const el = h('li', { 'data-part': 'array-item' }, node.el,
      h('button', {
        type: 'button', 'data-part': 'remove-item', 'data-item-path': itemPath,
        'aria-label': t('removeItem', { item: `${itemLabel} ${i + 1}` }), onclick: () => remove(i),
      }, t('remove')))
    rows.push({ el, node })
    list.append(el)
  }

  /** @param {number} i */
  function remove(i) {
    const values = rows.map(r => r.node.get([]))
    values.splice(i, 1)
    rows = []
    list.replaceChildren()
    values.forEach(row)
    rows[Math.min(i, rows.length - 1)] ? focusIn(rows[Math.min(i, rows.length - 1)].el) : add.focus()
  }

  const initial = Array.isArray(value) ? value.slice(0, 500) : []
  while (typeof s.minItems === 'number' && initial.length < Math.min(s.minItems, 50)) initial.push(undefined)
  initial.forEach(row)
  const el = h('fieldset', { 'data-part': 'fieldset', 'data-field': path, 'aria-describedby': help ? `${id}-help` : null },
    h('legend', { text: label }), helpText(`${id}-help`, help), list, add, errorSlot(`${id}-err`))
  return {
    el,
    get(problems) {
      const out = rows.map(r => r.node.get(problems))
      return !required && !out.length ? undefined : out
    },
  }
}

/** @param {Element} el */
function focusIn(el) {
  /** @type {HTMLElement | null} */ (el.querySelector('[data-path], button'))?.focus()
}

/** ISO date-time → the `datetime-local` control's local "YYYY-MM-DDTHH:MM:SS". @param {string} iso */
function toLocalInput(iso) {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return ''
  const p = (/** @type {number} */ n) => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`
}

const INPUT_TYPES = /** @type {Record<string, string>} */ ({ date: 'date', 'date-time': 'datetime-local', time: 'time', email: 'email', uri: 'url' })

/**
 * A single control: text, textarea, date…, number, checkbox, select, or JSON text area.
 * @param {string} kind @param {any} s @param {any} value @param {string} path @param {string} label
 * @param {string} help @param {boolean} required @returns {FieldNode}
 */
function scalarField(kind, s, value, path, label, help, required) {
  const id = uid('f')
  const nullable = [].concat(s.type ?? []).includes(/** @type {never} */ ('null'))
  const empty = () => (nullable && required ? null : undefined)
  const attrs = {
    id, name: path || 'value', 'data-part': 'input', 'data-path': path, 'data-kind': kind,
    'aria-describedby': [help && `${id}-help`, `${id}-err`].filter(Boolean).join(' '),
    'aria-required': required && kind !== 'boolean' ? 'true' : null,
  }
  /** @type {any} */
  let ctl
  /** @type {(problems: FieldError[]) => any} */
  let get

  if (kind === 'enum' || (kind === 'boolean' && !required && s.default === undefined)) {
    // An optional boolean is a three-way choice (unset / yes / no), so it is a select too.
    const options = kind === 'enum' ? s.enum : [true, false]
    const known = options.some((/** @type {any} */ e) => JSON.stringify(e) === JSON.stringify(value))
    ctl = h('select', attrs,
      h('option', { value: '', text: t('choose') }),
      options.map((/** @type {any} */ e) => h('option', {
        value: JSON.stringify(e), selected: known && JSON.stringify(e) === JSON.stringify(value),
        text: typeof e === 'boolean' ? t(e ? 'yes' : 'no') : e === null ? t('none') : String(e),
      })))
    get = () => (ctl.value === '' ? empty() : JSON.parse(ctl.value))
  } else if (kind === 'boolean') {
    ctl = h('input', { ...attrs, type: 'checkbox', checked: value === true })
    get = () => ctl.checked
  } else if (kind === 'number' || kind === 'integer') {
    ctl = h('input', {
      ...attrs, type: 'number', inputmode: kind === 'integer' ? 'numeric' : 'decimal',
      step: kind === 'integer' ? '1' : 'any', min: s.minimum ?? null, max: s.maximum ?? null,
      value: value == null ? '' : String(value),
    })
    get = problems => {
      if (ctl.validity.badInput) { problems.push({ path, message: t('v_type', { type: t(`type_${kind}`) }) }); return undefined }
      return ctl.value === '' ? empty() : Number(ctl.value)
    }
  } else if (kind === 'string') {
    let type = INPUT_TYPES[s.format] || 'text'
    const str = value == null ? '' : typeof value === 'string' ? value : JSON.stringify(value)
    // A value the typed control cannot display (a handler's "next Friday" for a date) is
    // shown in a plain text box instead, so the person sees what was returned.
    if (str && type === 'date' && !/^\d{4}-\d{2}-\d{2}$/.test(str)) type = 'text'
    if (str && type === 'datetime-local' && !toLocalInput(str)) type = 'text'
    const long = type === 'text' && (s.maxLength === undefined || s.maxLength > 120) &&
      /desc|note|comment|body|message|detail|summary|reason|text/i.test(path.slice(path.lastIndexOf('/') + 1))
    const lengths = { minlength: s.minLength ?? null, maxlength: s.maxLength ?? null }
    ctl = long
      ? h('textarea', { ...attrs, ...lengths, rows: '3' }, str)
      : h('input', {
        ...attrs, ...lengths, type, step: type === 'datetime-local' ? '1' : null,
        value: type === 'datetime-local' ? toLocalInput(str) : str,
        autocomplete: type === 'email' ? 'email' : 'off',
      })
    get = () => {
      const v = ctl.value
      if (v === '') return empty()
      return type === 'datetime-local' ? new Date(v).toISOString().replace('.000Z', 'Z') : v
    }
  } else {
    ctl = h('textarea', { ...attrs, 'data-part': 'json-input', rows: '5', spellcheck: 'false' },
      value === undefined ? '' : JSON.stringify(value, null, 2))
    get = problems => {
      const text = ctl.value.trim()
      if (!text) return empty()
      try { return JSON.parse(text) } catch (err) {
        problems.push({ path, message: t('jsonInvalid') })
        return undefined
      }
    }
  }

  const mark = required && kind !== 'boolean' ? h('span', { 'data-part': 'required', 'aria-hidden': 'true', text: ' *' }) : null
  const wrap = kind === 'boolean' && ctl.tagName === 'INPUT'
    ? h('div', { 'data-part': 'field', 'data-field': path, 'data-kind': 'checkbox' },
      h('label', { for: id }, ctl, ' ', label), helpText(`${id}-help`, help), errorSlot(`${id}-err`))
    : h('div', { 'data-part': 'field', 'data-field': path, 'data-kind': kind },
      h('label', { for: id }, label, mark, kind === 'json' ? h('span', { 'data-part': 'json-hint', text: ` (${t('json')})` }) : null),
      helpText(`${id}-help`, help), ctl, errorSlot(`${id}-err`))
  return { el: wrap, get }
}
