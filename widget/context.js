// Hostcall widget: the page's context (Hostcall('context', key, value), docs/embedding.md),
// checked against the agent's caps before it is kept. Loaded with the first value the page
// sets, for an agent whose file admits page context only: other pages never fetch it.
//
// The server checks every message's context again (it never trusts the widget); these
// checks refuse early, on the page, with the server's reasons: a refused value would make
// every message refused. What the server cannot store or parse is refused too (a lone
// surrogate, a NUL, nesting past its JSON depth).

/** @typedef {{maxEntryBytes: number, maxTotalBytes: number, maxEntries: number}} Caps */
/** @typedef {{key: string, reason: string, message: string}} Refusal */

/** The tool names' rule (docs/agents.md). */
const KEY = /^[A-Za-z0-9_.-]{1,64}$/
/** The server parses a message body at most 64 containers deep: the body and `context`
 * are two of them. */
const MAX_DEPTH = 62
const utf8 = new TextEncoder()

/**
 * The page's context as this widget keeps it: each accepted value as compact JSON, in the
 * order the page set them. `report(refusal)` hears each refusal.
 * @param {Caps} caps @param {(refusal: Refusal) => void} report
 */
export function createContext(caps, report) {
  /** @type {Map<string, string>} */
  const kept = new Map()
  /** Why one more entry, `json`, goes past a cap; null if it does not. @param {string} key @param {string} json */
  function overCaps(key, json) {
    const size = utf8.encode(json).length
    const total = [...kept.values()].reduce((sum, other) => sum + utf8.encode(other).length, size)
    const why = size > caps.maxEntryBytes ? ['entry_too_large', `it is ${size} bytes of JSON; the limit is ${caps.maxEntryBytes} per entry`]
      : kept.size >= caps.maxEntries ? ['too_many_entries', `it would be entry ${kept.size + 1}; the limit is ${caps.maxEntries}`]
        : total > caps.maxTotalBytes ? ['total_too_large', `the page context would be ${total} bytes of JSON; the limit is ${caps.maxTotalBytes} in total`]
          : null
    return why && { reason: why[0], message: `page context "${key}" refused: ${why[1]}` }
  }
  return {
    /**
     * Set, replace or (`value` null or undefined) remove one entry. A refused value is not
     * kept, and the key's earlier value goes too: it no longer says what the page shows.
     * `clone`: why the page could not copy the value to the widget.
     * @param {unknown} key @param {unknown} value @param {string} [clone]
     */
    set(key, value, clone) {
      const name = String(key).slice(0, 64)
      const named = typeof key === 'string' && KEY.test(key)
      if (named) kept.delete(name)
      const why = !named
        ? { reason: 'bad_key', message: `page context key "${name}" must be 1 to 64 letters, digits, '_', '-' or '.'` }
        : check(name, value, clone) || (value == null ? null : overCaps(name, JSON.stringify(value)))
      if (why) report({ key: name, ...why })
      else if (value != null) kept.set(name, JSON.stringify(value))
    },
    /** What a message carries: the whole map, or undefined when it is empty. */
    value() {
      if (!kept.size) return undefined
      /** @type {Record<string, unknown>} */
      const out = {}
      for (const [key, json] of kept) out[key] = JSON.parse(json)
      return out
    },
  }
}

/**
 * Why `value` is not strict JSON for key `key`, or null when it is.
 * @param {string} key @param {unknown} value @param {string} [clone]
 * @returns {{reason: string, message: string} | null}
 */
export function check(key, value, clone) {
  const why = clone !== undefined ? `it could not be copied (${clone})` : value == null ? '' : notJson(value, key, [])
  return why ? { reason: 'not_json', message: `page context "${key}" refused: ${why}` } : null
}

/**
 * What makes `value` (at `path`) not JSON the server takes, or '' when nothing does.
 * `parents`: the containers above it, for cycles and depth.
 * @param {unknown} value @param {string} path @param {object[]} parents @returns {string}
 */
function notJson(value, path, parents) {
  const t = typeof value
  if (value === null || t === 'boolean') return ''
  if (t === 'string') return /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(/** @type {string} */ (value))
    ? `${path} holds a NUL or a lone surrogate, which no store keeps` : ''
  if (t === 'number') {
    const n = /** @type {number} */ (value)
    if (!Number.isFinite(n)) return `${path} is ${n}, which JSON cannot hold`
    // Written without an exponent (under 1e21), the server reads it as an integer.
    return !Number.isSafeInteger(n) && Number.isInteger(n) && Math.abs(n) < 1e21 ? `${path} is an integer past 2^53, which JavaScript does not hold exactly` : ''
  }
  if (t !== 'object') return `${path} is ${t === 'undefined' ? 'undefined' : `a ${t}`}, which is not JSON`
  const o = /** @type {object} */ (value)
  if (parents.includes(o)) return `${path} contains itself (a cycle)`
  if (parents.length >= MAX_DEPTH) return `${path} is nested past ${MAX_DEPTH} levels`
  const inner = [...parents, o]
  if (Array.isArray(o)) {
    for (let i = 0; i < o.length; i++) {
      const why = i in o ? notJson(o[i], `${path}[${i}]`, inner) : `${path}[${i}] is a hole, which is not JSON`
      if (why) return why
    }
    return ''
  }
  const proto = Object.getPrototypeOf(o)
  if (proto !== Object.prototype && proto !== null) return `${path} is a ${proto?.constructor?.name || 'object'}, not a plain object`
  for (const [k, v] of Object.entries(o)) {
    const why = notJson(k, `${path} key`, inner) || notJson(v, `${path}.${k}`, inner)
    if (why) return why
  }
  return ''
}
