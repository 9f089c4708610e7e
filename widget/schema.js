// Hostcall widget: a small JSON Schema validator, for the subset tool schemas use.
// A handler's output is checked before it is sent (issue 3 §2) and every form before submit;
// the server validates again with `jsonschema`, so this only has to be right where it speaks.
// Supported: type, enum, const, required, properties, additionalProperties, items,
// min/maxItems, uniqueItems, minimum/maximum (+exclusive), multipleOf, min/maxLength,
// pattern, format (date, date-time, time, email, uri), allOf/anyOf/oneOf/not, local $ref.
// Error paths are JSON Pointers: "" is the root, "/tasks/0/title" a nested field.

import { t } from './i18n.js'

/** @typedef {{path: string, message: string, keyword: string}} SchemaError */

// ============================================================================
// Public API
// ============================================================================

/** Every error of `value` against `schema` (none: valid). @param {any} schema @param {unknown} value @returns {SchemaError[]} */
export function validate(schema, value) {
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

// ============================================================================
// Checks
// ============================================================================

const isDate = s => {
  const m = /^(\d{4})-(\d\d)-(\d\d)$/.exec(s)
  const d = m && new Date(Date.UTC(+m[1], +m[2] - 1, +m[3]))
  return Boolean(m && d && d.getUTCMonth() === +m[2] - 1 && d.getUTCDate() === +m[3])
}

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
  if (schema === false) return fail('false')
  const s = deref(schema, root)
  if (!s || typeof s !== 'object' || depth > 64) return

  if (s.type !== undefined) {
    const types = [].concat(s.type)
    if (!types.some(type => isType(type, v))) return fail('type', { type: types.map(type => t(`type_${type}`)).join(' / ') })
  }
  if (Array.isArray(s.enum) && !s.enum.some(e => canon(e) === canon(v))) {
    fail('enum', { values: s.enum.map(e => (typeof e === 'string' ? e : JSON.stringify(e))).join(', ') })
  }
  if ('const' in s && canon(s.const) !== canon(v)) fail('const', { value: JSON.stringify(s.const) })

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
    if (s.uniqueItems === true && new Set(v.map(canon)).size !== v.length) fail('uniqueItems')
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
  if (s.anyOf && !s.anyOf.some(passes)) fail('anyOf')
  if (s.oneOf && s.oneOf.filter(passes).length !== 1) fail('oneOf')
  if (s.not !== undefined && passes(s.not)) fail('not')
}
