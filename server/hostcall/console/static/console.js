// Hostcall console: what every console page script shares — its data block, its words, the
// CSRF-carrying fetch, and the widget's own DOM helper and form strings (one form
// implementation in the product: the widget's form.js). Test hooks: data-part attributes.

import { addStrings, h, setLocale } from '/static/chat.js'

export { h }

/** @type {{data: any, t: Record<string, string>, lang: string}} */
export const page = JSON.parse(document.getElementById('hc-data')?.textContent || '{"data":null,"t":{},"lang":"en"}')

/** The page's string for `key`, `{name}` placeholders filled. @param {string} key @param {Record<string, unknown>} [params] */
export const tr = (key, params) => (page.t[key] ?? key).replace(/\{(\w+)\}/g, (all, k) => (params && k in params ? String(params[k]) : all))

/** Load the widget's strings for the schema forms (locale-xx-calls.js), in the console's language. */
export const ready = setLocale(page.lang).then(() => addStrings('calls'))

const csrf = document.querySelector('meta[name="hc-csrf"]')?.getAttribute('content') || ''

/**
 * A console API call. Resolves to {ok, status, body}; never throws for an HTTP error.
 * @param {string} path @param {unknown} [body] POSTs `body` as JSON when given
 */
export async function api(path, body) {
  const init = body === undefined
    ? { headers: { Accept: 'application/json' } }
    : { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf }, body: JSON.stringify(body) }
  try {
    const response = await fetch(path, { ...init, credentials: 'same-origin' })
    const data = await response.json().catch(() => ({}))
    return { ok: response.ok, status: response.status, body: data }
  } catch (error) {
    return { ok: false, status: 0, body: { error: { code: 'network', message: String(error) } } }
  }
}

/**
 * What the reader reads for a failed API call: the error code's sentence in their language
 * (text.py's error_<code>), else the server's own words.
 * @param {{status: number, body: any}} result
 */
export function errorText(result) {
  const e = result.body?.error || {}
  const d = e.details || {}
  if (e.code === 'role_required' && page.t[`role_name_${d.role}`] && page.t[`role_name_${d.current}`]) {
    return tr('error_role_required', { role: tr(`role_name_${d.role}`), current: tr(`role_name_${d.current}`), account: d.account })
  }
  if (e.code === 'bad_request' && typeof d.field === 'string') return tr('error_bad_request_field', { field: d.field })
  return (e.code !== 'role_required' && page.t[`error_${e.code}`]) || e.message || `HTTP ${result.status}`
}

/** An ISO timestamp as the reader's local date and time. @param {number} seconds */
export const when = seconds => new Date(seconds * 1000).toLocaleString(page.lang)

/** Run `fn` now and every `ms` while the page is visible. @param {() => Promise<void>} fn @param {number} ms */
export function every(fn, ms) {
  let busy = false
  const tick = async () => {
    if (busy || document.hidden) return
    busy = true
    try { await fn() } finally { busy = false }
  }
  setInterval(tick, ms)
  document.addEventListener('visibilitychange', tick)
}

/** Compact JSON for display (as text, never HTML). @param {unknown} value */
export const json = value => JSON.stringify(value, null, 2)
