// Hostcall widget: known visitors (docs/identity.md). Fetched only when the page identifies
// its visitor with Hostcall('identify', …): a page that never does pays nothing for it.
//
// The page's identity token reaches the widget with the handshake (bridge.js) and again on
// every identify, logout ('') or refresh. The server verifies it on every request that needs
// it (api.js sends it); here it is read only to tell a refresh of the same person from
// another person, and to ask the page for a fresh one before it expires.

import { MSG } from './protocol.js'

/** @typedef {ReturnType<typeof import('./api.js').createApi>} Api */

/**
 * @typedef {object} Context
 * @property {Api} api
 * @property {string} token the page's token now ('' none: logged out)
 * @property {string} locale
 * @property {(fresh?: boolean) => void} restart leave the conversation shown; boot again
 * @property {(event: string, detail: any) => void} emit a Hostcall('on', …) event
 * @property {(type: string, data?: any) => void} toParent
 * @property {string} cid the conversation shown ('' while starting)
 */

const cfg = JSON.parse(document.getElementById('hc-config')?.textContent || '{}')
const parentOrigin = cfg.parentOrigin && window.parent !== window ? cfg.parentOrigin : ''
/** Whose conversation is shown, or will be once their first message makes it: the server's
 * word (`person` of the conversation opened), or the `sub` of a token it found none for. */
let person = ''
/** @type {ReturnType<typeof setTimeout> | undefined} */
let refresh

/** A JWT's claims, unverified (the server verifies): only `sub` and `exp` are read. */
export function claimsOf(/** @type {string} */ token) {
  try {
    return JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))) || {}
  } catch { return {} }
}

/**
 * The page's token changed (or the widget starts with one). Starting: the conversation to
 * go on with, as the server chooses it (`POST …/identify`: this browser's, adopted if it
 * was anonymous and begun; else the person's latest; else none yet, and the first message
 * makes one, sent with the token so it is theirs). Running: a refresh
 * of the same person changes nothing shown; logout, or someone else, ends this browser's
 * session of the conversation shown and starts again, so nothing of the previous person's
 * stays on screen or in memory.
 * @param {Context} c
 */
export async function go(c) {
  const { api, token } = c
  schedule(c)
  if (!c.cid) return start(c)
  const who = claimsOf(token).sub || ''
  if (who && who === person) return void api.setIdentity(token)
  if (!who && !person) return void api.setIdentity(token)
  if (person) await api.call('POST', `/api/conversations/${encodeURIComponent(c.cid)}/logout`, {}).catch(() => {})
  person = ''
  api.setIdentity(token)
  c.restart(false)
}

/** @param {Context} c */
async function start(c) {
  const { api, token } = c
  api.setIdentity(token)
  person = ''
  if (!token) return api.resume()
  const body = { locale: c.locale, parentOrigin, resumeKey: api.key }
  try {
    const opened = /** @type {any} */ (api.adopt(await api.call('POST', `/api/agents/${encodeURIComponent(cfg.agentId)}/session/identify`, body, { cookies: true, held: true })))
    person = opened.person || ''
    return opened
  } catch (/** @type {any} */ err) {
    if (err.code === 'no_session') return void (person = claimsOf(token).sub || '') // none yet
    // A token the server refused: say why to the page, and go on as an anonymous visitor.
    c.emit('error', { code: err.code || 'identify_failed', message: String(err.message || err) })
    api.setIdentity('')
    return api.resume()
  }
}

/** Ask the page for a fresh token a minute (or a fifth of its life) before this one expires. */
function schedule(/** @type {Context} */ c) {
  clearTimeout(refresh)
  const life = claimsOf(c.token).exp * 1000 - Date.now()
  if (life > 0) refresh = setTimeout(() => c.toParent(MSG.IDENTITY), Math.max(life - Math.min(60000, life / 5), 1000))
}
