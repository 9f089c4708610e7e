// Hostcall widget: a small JSON Schema validator (the subset tool schemas use).
//
// Used on both ends of a call inside the widget: a page handler's output is checked against
// the tool's output schema before it is sent (issue 3 §2), and every schema form is checked
// before submit. The server validates again with the full `jsonschema` library, so this
// subset only has to be right for what it checks, never more permissive than the server.
//
// Supported: type (incl. integer and type lists), enum, const, required, properties,
// additionalProperties, items (single schema), minItems/maxItems, uniqueItems,
// minimum/maximum/exclusiveMinimum/exclusiveMaximum, multipleOf, minLength/maxLength,
// pattern, format (date, date-time, time, email, uri), allOf/anyOf/oneOf/not, local $ref.
// Error paths are JSON Pointers ("" for the root, "/tasks/0/title").

import { t } from './i18n.js'

/**
 * @typedef {{path: string, message: string, keyword: string}} SchemaError
 * @typedef {Record<string, any> | boolean} Schema
 */

// ============================================================================
// Public API
// ============================================================================

/**
 * Validate `value` against `schema`; returns every error found (empty when valid).
 * @param {Schema} schema
 * @param {unknown} value
 * @returns {SchemaError[]}
 */
export function validate(schema, value) {
  /** @type {SchemaError[]} */
  const out = []
  walk(schema, value, '', out, schema, 0)
  return out
}

/**
 * Follow a local `$ref` ("#/$defs/x", "#/definitions/x"); unknown refs resolve to `{}`.
 * @param {Schema} schema
 * @param {Schema} root
 * @returns {Schema}
 */
export function deref(schema, root) {
  for (let hops = 0; schema && typeof schema === 'object' && typeof schema.$ref === 'string'; hops++) {
    if (hops > 20 || !schema.$ref.startsWith('#')) return {}
    /** @type {any} */
    let target = root
    for (const part of schema.$ref.slice(1).split('/').filter(Boolean)) {
      target = target && target[unescapePointer(decodeURIComponent(part))]
    }
    schema = target ?? {}
  }
  return schema
}

/** @param {string} path @param {string|number} key */
export const childPath = (path, key) => `${path}/${String(key).replace(/~/g, '~0').replace(/\//g, '~1')}`

/**
 * Turn the path spellings a server may use ("/a/0/b", "a.0.b", "a[0].b", "$.a[0].b") into a
 * JSON Pointer, so server errors land on the right form field.
 * @param {unknown} path
 */
export function toPointer(path) {
  if (Array.isArray(path)) return path.reduce((p, k) => childPath(p, k), '')
  const s = String(path ?? '')
  if (s === '/' || s === '$') return ''
  if (s === '' || s.startsWith('/')) return s
  return s.replace(/^\$\.?/, '').split(/[.[\]]+/).filter(Boolean).reduce((p, k) => childPath(p, k), '')
}

// ============================================================================
// Formats
// ============================================================================

/** @param {string} s */
const isDate = s => {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s)
  if (!m) return false
  const d = new Date(Date.UTC(+m[1], +m[2] - 1, +m[3]))
  return d.getUTCMonth() === +m[2] - 1 && d.getUTCDate() === +m[3]
}

/** @type {Record<string, (s: string) => boolean>} */
const FORMATS = {
  date: isDate,
  'date-time': s =>
    /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.test(s) &&
    isDate(s.slice(0, 10)) && !Number.isNaN(Date.parse(s.replace(' ', 'T'))),
  time: s => /^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})?$/.test(s),
  email: s => /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/.test(s),
  uri: s => {
    if (!/^[a-z][a-z0-9+.-]*:[^\s]*$/i.test(s)) return false
    try { return Boolean(new URL(s)) } catch { return false }
  },
}

// ============================================================================
// Walker
// ============================================================================

/** @param {unknown} v */
function typeOf(v) {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'array'
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number'
  return typeof v
}

/** @param {string} type @param {unknown} v */
function isType(type, v) {
  const actual = typeOf(v)
  if (type === 'number') return actual === 'number' || actual === 'integer'
  return actual === type
}

/** @param {unknown} a @param {unknown} b */
const equal = (a, b) => a === b || JSON.stringify(canon(a)) === JSON.stringify(canon(b))

/** @param {any} v @returns {any} */
function canon(v) {
  if (Array.isArray(v)) return v.map(canon)
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map(k => [k, canon(v[k])]))
  }
  return v
}

/**
 * @param {Schema} schema @param {any} v @param {string} path @param {SchemaError[]} out
 * @param {Schema} root @param {number} depth
 */
function walk(schema, v, path, out, root, depth) {
  /** @param {string} keyword @param {Record<string, any>} [params] @param {string} [at] */
  const fail = (keyword, params, at = path) =>
    out.push({ path: at, keyword, message: t(`v_${keyword}`, params) })
  if (schema === true || schema == null || depth > 64) return
  if (schema === false) return fail('false')
  const s = deref(schema, root)
  if (s === true || s == null || typeof s !== 'object') return

  if (s.type !== undefined) {
    const types = [].concat(s.type)
    if (!types.some(type => isType(type, v))) {
      const names = types.map(type => t(`type_${type}`)).join(' / ')
      return fail('type', { type: names })
    }
  }
  if (Array.isArray(s.enum) && !s.enum.some(e => equal(e, v))) {
    fail('enum', { values: s.enum.map(e => (typeof e === 'string' ? e : JSON.stringify(e))).join(', ') })
  }
  if ('const' in s && !equal(s.const, v)) fail('const', { value: JSON.stringify(s.const) })

  if (typeof v === 'string') {
    const len = [...v].length
    if (typeof s.minLength === 'number' && len < s.minLength) fail(s.minLength === 1 ? 'notEmpty' : 'minLength', { n: s.minLength })
    if (typeof s.maxLength === 'number' && len > s.maxLength) fail('maxLength', { n: s.maxLength })
    if (typeof s.pattern === 'string') {
      let re = null
      try { re = new RegExp(s.pattern, 'u') } catch { /* an unusable pattern is the server's call */ }
      if (re && !re.test(v)) fail('pattern')
    }
    const check = typeof s.format === 'string' ? FORMATS[s.format] : undefined
    if (check && !check(v)) fail('format', { format: t(`format_${s.format}`) })
  }

  if (typeof v === 'number') {
    if (typeof s.minimum === 'number' && v < s.minimum) fail('minimum', { n: s.minimum })
    if (typeof s.maximum === 'number' && v > s.maximum) fail('maximum', { n: s.maximum })
    if (typeof s.exclusiveMinimum === 'number' && v <= s.exclusiveMinimum) fail('exclusiveMinimum', { n: s.exclusiveMinimum })
    if (typeof s.exclusiveMaximum === 'number' && v >= s.exclusiveMaximum) fail('exclusiveMaximum', { n: s.exclusiveMaximum })
    if (typeof s.multipleOf === 'number' && s.multipleOf > 0) {
      const q = v / s.multipleOf
      if (Math.abs(q - Math.round(q)) > 1e-9) fail('multipleOf', { n: s.multipleOf })
    }
  }

  if (Array.isArray(v)) {
    if (typeof s.minItems === 'number' && v.length < s.minItems) fail('minItems', { n: s.minItems })
    if (typeof s.maxItems === 'number' && v.length > s.maxItems) fail('maxItems', { n: s.maxItems })
    if (s.uniqueItems === true && new Set(v.map(x => JSON.stringify(canon(x)))).size !== v.length) fail('uniqueItems')
    if (s.items !== undefined && !Array.isArray(s.items)) {
      v.forEach((item, i) => walk(s.items, item, childPath(path, i), out, root, depth + 1))
    }
  }

  if (typeOf(v) === 'object') {
    const props = s.properties && typeof s.properties === 'object' ? s.properties : {}
    for (const name of Array.isArray(s.required) ? s.required : []) {
      if (!(name in v) || v[name] === undefined) fail('required', {}, childPath(path, name))
    }
    for (const [name, item] of Object.entries(v)) {
      if (item === undefined) continue
      if (name in props) walk(props[name], item, childPath(path, name), out, root, depth + 1)
      else if (s.additionalProperties === false) fail('additional', { name }, childPath(path, name))
      else if (s.additionalProperties && typeof s.additionalProperties === 'object') {
        walk(s.additionalProperties, item, childPath(path, name), out, root, depth + 1)
      }
    }
  }

  /** @param {Schema} sub */
  const passes = sub => validate2(sub, v, root, depth) === 0
  if (Array.isArray(s.allOf)) s.allOf.forEach(sub => walk(sub, v, path, out, root, depth + 1))
  if (Array.isArray(s.anyOf) && !s.anyOf.some(passes)) fail('anyOf')
  if (Array.isArray(s.oneOf) && s.oneOf.filter(passes).length !== 1) fail('oneOf')
  if (s.not !== undefined && passes(s.not)) fail('not')
}

/** Count errors of a sub-schema without reporting them (for anyOf/oneOf/not). */
function validate2(/** @type {Schema} */ schema, /** @type {any} */ v, /** @type {Schema} */ root, /** @type {number} */ depth) {
  /** @type {SchemaError[]} */
  const out = []
  walk(schema, v, '', out, root, depth + 1)
  return out.length
}

/** @param {string} s */
function unescapePointer(s) {
  return s.replace(/~1/g, '/').replace(/~0/g, '~')
}
