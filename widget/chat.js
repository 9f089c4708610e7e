// Hostcall widget: the chat's DOM — shell, messages (their markdown is markdown.js's, and
// tool-call cards are cards.js's: each loaded when first needed). What a model, page or person wrote enters the DOM
// as text nodes, never innerHTML; links only for http(s). Test hooks: roles and `data-part`
// attributes.

import { LIMITS } from './protocol.js'
import { write, setAfterFlush } from './drawing.js'

// When changes are drawn (bursts of stream events, calls with the page's handler): drawing.js.
export { batch, burstEnd, hold, flushWrites, write } from './drawing.js'

// ============================================================================
// Text: English, French, Spanish, Japanese (the seeds' languages): from the snippet's
// data-locale, else the browser's languages, else English. Where a string lives (the rule,
// also in docs/architecture.md): locale-xx.js holds what the idle chat shows, and words
// features share (Retry, Cancel); a feature loaded later brings its own strings, from
// locale-xx-<feature>.js (calls, history, people, control, restart), fetched with its
// module. So a page loads one language, and only what it shows.
// ============================================================================

const LOCALES = ['en', 'fr', 'es', 'ja']
/** @type {Record<string, string>} */
let strings = {}

/** The first supported language among `candidates` ("fr-CA" → "fr"). @param {...(string | null | undefined)} candidates */
export const pickLocale = (...candidates) =>
  candidates.map(c => String(c || '').slice(0, 2).toLowerCase()).find(lang => LOCALES.includes(lang)) || 'en'

/** Load a language's strings (the page preloads that module). @param {string} lang */
export async function setLocale(lang) {
  strings = (await import(`./locale-${lang}.js`)).default
  document.documentElement.lang = lang
}

/** Add the strings of a feature loaded later (`calls`: locale-xx-calls.js, with toolcalls.js).
 * @param {string} part @param {string} [query] */
export async function addStrings(part, query = '') {
  Object.assign(strings, (await import(`./locale-${document.documentElement.lang}-${part}.js${query}`)).default)
}

/** The string for `key`, `{name}` placeholders filled from `params`. @param {string} key @param {Record<string, unknown>} [params] */
export const t = (key, params) => (strings[key] ?? key).replace(/\{(\w+)\}/g, (all, k) => (params && k in params ? String(params[k]) : all))

// ============================================================================
// DOM helpers
// ============================================================================

/**
 * An element. attrs: `text` is textContent, `on<event>` a listener, `true` an empty
 * attribute, null/false skipped. Children: nodes, strings (as text), nested arrays.
 * @param {string} tag @param {Record<string, any> | null} [attrs] @param {...any} kids
 * @returns {HTMLElement}
 */
export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue
    if (k === 'text') el.textContent = plain(v)
    else if (typeof v === 'function') el.addEventListener(k.slice(2), v)
    else el.setAttribute(k, v === true ? '' : plain(v))
  }
  el.append(...kids.flat(4).filter(kid => kid != null && kid !== false).map(kid => typeof kid === 'string' ? plain(kid) : kid))
  return el
}

/** Text without bidi embeddings, overrides and isolates: in a model's, a page's or a person's
 * text they reverse what follows ("evil" shown as "live"). Every text drawn goes through it;
 * its direction comes from its own letters (`dir="auto"`, CSS `unicode-bidi`).
 * @param {unknown} s */
export const plain = s => String(s).replace(/[\u202a-\u202e\u2066-\u2069]/g, '')

let counter = 0
/** A page-unique id, for label and aria wiring. @param {string} prefix */
export const uid = prefix => `${prefix}-${++counter}`

const ICONS = {
  close: 'M6.4 5 12 10.6 17.6 5 19 6.4 13.4 12 19 17.6 17.6 19 12 13.4 6.4 19 5 17.6 10.6 12 5 6.4z',
  send: 'M3.4 20.4 21 12 3.4 3.6 3.4 10l12.6 2-12.6 2z',
  restart: 'M12 5V2L7 6l5 4V7a5 5 0 1 1-5 5H5a7 7 0 1 0 7-7z',
  history: 'M4 5h16v2H4zm0 6h16v2H4zm0 6h11v2H4z',
}

function icon(name) {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg')
  svg.setAttribute('viewBox', '0 0 24 24')
  svg.setAttribute('aria-hidden', 'true')
  svg.append(document.createElementNS('http://www.w3.org/2000/svg', 'path'))
  svg.firstElementChild?.setAttribute('d', ICONS[name])
  return svg
}

const clip = (s, n) => (s.length > n ? `${s.slice(0, n)}…` : s)

// ============================================================================
// Shell: header, message list, working indicator, composer, live region
// ============================================================================

/** @type {Record<string, HTMLElement>} */
const parts = {}
/** @type {Map<string, {el: HTMLElement, body: HTMLElement, raw: string, role: string, shown?: string, queued?: boolean}>} */
const messages = new Map()
/** @type {HTMLElement | null} */
let pendingUser = null
let pinned = true
let scrollQueued = false

/** A phone (or another touch screen): fields are not focused for the person, since that pops
 * the on-screen keyboard over what they are about to read. The screen, not this frame's
 * width: on a desktop the bubble's frame is narrow too. */
export const phone = () => screen.width < 640 || matchMedia('(pointer: coarse)').matches

/**
 * Build the widget inside `root`. `blocked` says why a message cannot be sent now ('': it
 * can, though the send button is off: the app queues it).
 * @param {HTMLElement | null} root
 * @param {{title: string, greeting: string, closable: boolean, onSend: (text: string) => void,
 *   onClose: () => void, onNew: () => void, onHistory: () => void, onStop: () => void,
 *   blocked: () => string}} o
 */
export function mountShell(root, o) {
  const inputId = uid('composer')
  const note = (/** @type {HTMLElement} */ el, /** @type {string} */ text) => Object.assign(el, { hidden: !text, textContent: text })
  const input = /** @type {HTMLTextAreaElement} */ (h('textarea', {
    id: inputId, 'data-part': 'composer-input', rows: 1, maxlength: LIMITS.MAX_MESSAGE_CHARS, placeholder: t('placeholder'),
    'aria-describedby': `${inputId}-hint ${inputId}-limit`,
    onkeydown: e => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); input.form.requestSubmit() }
    },
    // The browser cuts a longer paste at maxlength without a word: say so.
    oninput: () => { grow(input); note(parts.limit, input.value.length >= LIMITS.MAX_MESSAGE_CHARS ? t('limit', { n: LIMITS.MAX_MESSAGE_CHARS.toLocaleString() }) : '') },
  }))
  parts.input = input
  parts.hint = h('p', { id: `${inputId}-hint`, 'data-part': 'composer-hint', role: 'status', hidden: true })
  parts.limit = h('p', { id: `${inputId}-limit`, 'data-part': 'composer-limit', hidden: true })
  parts.send = h('button', { type: 'submit', 'data-part': 'send', 'aria-label': t('send'), title: t('send') }, icon('send'))
  parts.stop = h('button', { type: 'button', 'data-part': 'stop', hidden: true, onclick: o.onStop }, t('stop'))
  parts.composer = h('form', {
    'data-part': 'composer', 'aria-label': t('composer'),
    onsubmit: e => {
      e.preventDefault()
      const text = input.value.trim()
      const why = text && parts.send.hasAttribute('disabled') && o.blocked()
      if (why) return note(parts.hint, why)
      input.value = ''
      grow(input)
      note(parts.limit, '')
      o.onSend(text)
    },
  }, h('label', { for: inputId, class: 'sr-only', text: t('message') }), input, parts.send, parts.stop)
  parts.messages = h('div', { 'data-part': 'messages', role: 'log', 'aria-live': 'off', 'aria-label': t('conversation'), tabindex: 0 })
  parts.messages.addEventListener('scroll', onScroll, { passive: true })
  parts.working = h('div', { 'data-part': 'working', role: 'status', hidden: true },
    h('span', { 'data-part': 'dots', 'aria-hidden': 'true' }, h('i'), h('i'), h('i')), t('working'))
  parts.connection = h('p', { 'data-part': 'connection', role: 'status', hidden: true })
  // Streamed text is announced once, complete, here (the log itself is aria-live="off").
  parts.live = h('div', { 'data-part': 'live', class: 'sr-only', 'aria-live': 'polite', 'aria-atomic': 'true' })
  const button = (part, label, name, onclick) =>
    h('button', { type: 'button', 'data-part': part, 'aria-label': label, title: label, onclick }, icon(name))
  // ↻ asks first (widget/restart.js and its strings, fetched when first pressed; a fresh URL
  // after a failure).
  let tries = 0
  const ask = () => {
    const query = tries ? `?retry=${tries}` : ''
    Promise.all([import(`./restart.js${query}`), addStrings('restart', query)]).then(([m]) => m.ask(parts.header, o.onNew), err => {
      tries++
      console.warn('hostcall: loading a module', err)
    })
  }
  parts.header = h('header', { 'data-part': 'header' }, h('h1', { 'data-part': 'title', text: o.title }),
    button('open-history', t('history'), 'history', o.onHistory),
    button('new-conversation', t('newConversation'), 'restart', ask),
    o.closable && button('close', t('close'), 'close', o.onClose))
  root?.replaceChildren(parts.header, parts.connection, parts.messages, parts.working, parts.hint, parts.limit, parts.composer, parts.live)
  reset(o.greeting)
}

/** Empty the conversation (keeping the greeting). @param {string} greeting */
export function reset(greeting) {
  messages.clear()
  pendingUser = null
  write(() => parts.messages.replaceChildren())
  if (greeting) message('', 'assistant', greeting).dataset.greeting = ''
}

function grow(box) {
  box.style.height = 'auto'
  box.style.height = `${Math.min(box.scrollHeight, 140)}px`
}

// A frame just shown may not be laid out yet, and cannot take focus: try the next frames.
export function focusComposer(tries = 9) {
  const input = parts.input
  if (phone() || !input) return
  input.focus()
  if (tries && document.activeElement === document.body) requestAnimationFrame(() => focusComposer(tries - 1))
}
// What the working indicator and the send button were last asked to show (their drawing may
// wait: `write`); an unchanged one is not written again, so it costs the next frame nothing.
let working = false
let sendable = true, stoppable = false
/** @param {boolean} on */
export function setWorking(on) {
  if (on === working) return
  working = on
  write(() => { parts.working.hidden = !on })
}
let agentState = ''
/** The root's `data-agent-state`, made with the changes it describes: "idle" shows once the
 * run's last words are drawn (docs/testing.md). @param {string} value */
export function setAgentState(value) {
  if (value === agentState) return
  agentState = value
  write(() => { document.documentElement.dataset.agentState = value })
}
/** @param {boolean} on @param {boolean} [stop] */
export function setSendEnabled(on, stop = false) {
  if (on === sendable && stop === stoppable) return
  sendable = on
  stoppable = stop
  write(() => {
    parts.send.toggleAttribute('disabled', !on)
    if (on) parts.hint.hidden = true
    if (!stop && document.activeElement === parts.stop) parts.input.focus()
    parts.stop.hidden = !stop
    parts.send.hidden = stop
  })
}
/** Scroll to the newest message, once per frame however many changes asked for it: in the
 * frame of the changes when they are made at a frame (`flushWrites`), else at the next. */
export function scrollToEnd() {
  pinned = true
  if (scrollQueued) return
  scrollQueued = true
  requestAnimationFrame(scrollNow)
}

function scrollNow() {
  if (!scrollQueued) return
  scrollQueued = false
  parts.messages.scrollTop = parts.messages.scrollHeight
}
setAfterFlush(scrollNow)

let nbsp = ''
/** For screen readers, once (a no-break space every other time makes a repeat a change),
 * drawn with the rest: no timer to draw during a call. @param {string} text */
export function announce(text) {
  write(() => { parts.live.textContent = clip(text, 600) + (nbsp = nbsp ? '' : '\u00a0') })
}

/** @param {'open'|'connecting'|'down'} state */
export function setConnection(state) {
  Object.assign(parts.connection, { hidden: state === 'open', textContent: t(state === 'down' ? 'reconnecting' : 'connecting') })
  parts.connection.dataset.state = state
}

/** Add to the conversation, keeping the view at the bottom if it was there. @param {Node} node */
export function append(node) {
  keepPinned(() => parts.messages.append(node))
}

/**
 * Hold a node's place at the end of the conversation, to be shown later with `fill`: a
 * comment, which nothing lays out or paints, so reserving costs the next frame nothing.
 * @returns {Comment}
 */
export function reserve() {
  const spot = document.createComment('')
  write(() => parts.messages.append(spot))
  return spot
}

/** Show `node` where `spot` (from `reserve`) is; nothing if the conversation was reset since.
 * @param {Comment} spot @param {Node} node */
export function fill(spot, node) {
  keepPinned(() => spot.parentNode && spot.replaceWith(node))
}

// Whether the view sits at the bottom is read on scroll, not around each change: reading
// scrollHeight after a DOM write forces a layout, and streamed text writes many times a frame.
function onScroll() {
  const list = parts.messages
  pinned = scrollQueued || list.scrollHeight - list.scrollTop - list.clientHeight < 80
}

/** Run a DOM change, then keep the view at the bottom if it was there. @param {() => void} change */
export function keepPinned(change) {
  write(() => {
    change()
    if (pinned) scrollToEnd()
  })
}

// ============================================================================
// Messages
// ============================================================================

/** Show the user's message at once; the server's TEXT_MESSAGE_START adopts it. @param {string} text */
export function addPendingUser(text) {
  loadMarkdown()
  retireRetries()
  pendingUser = message('', 'user', text)
  pendingUser.dataset.pending = ''
  return pendingUser
}

/** Create or find message `id`; a user message adopts the pending one. @param {string} id @param {string} role @param {string} [text] */
export function upsertMessage(id, role, text) {
  let m = messages.get(id)
  if (!m) {
    const el = role === 'user' && pendingUser ? pendingUser : message(id, role, '')
    if (el === pendingUser) pendingUser = null
    delete el.dataset.pending
    el.dataset.messageId = id
    // An adopted bubble keeps what was typed until the server's content replaces it.
    m = { el, body: /** @type {HTMLElement} */ (el.lastElementChild), raw: '', role, shown: typed.get(el) || '' }
    messages.set(id, m)
  }
  if (text !== undefined && text !== m.raw) setText(m, text)
  return m
}

/** @param {string} id @param {string} delta */
export function appendDelta(id, delta) {
  const m = messages.get(id) || upsertMessage(id, 'assistant')
  setText(m, m.raw + delta)
}

/** Finish a streamed message (an empty one is removed). @param {string} id */
export function endMessage(id) {
  const m = messages.get(id)
  if (m && !m.raw && m.shown) m.raw = m.shown
  if (m && !m.raw.trim() && !m.el.dataset.files) removeMessage(id)
  return { text: m?.raw || '', role: m?.role || '' }
}

/** @param {string} id */
export const hasMessage = id => messages.has(id)
/** @param {string} id */
export const messageEl = id => messages.get(id)?.el

/** Keep only the server's messages in `ids` (a snapshot's): one it lacks was discarded, or
 * its stream replays it from its start. @param {Set<string>} ids */
export function keepMessages(ids) {
  for (const [id, m] of messages) if (!ids.has(id)) removeMessage(id)
}

/** Remove message `id` (a message cut off by a server crash; its step streams it anew). */
export function removeMessage(id) {
  const el = messages.get(id)?.el
  if (el) write(() => el.remove())
  messages.delete(id)
}

function setText(m, text) {
  m.raw = text
  if (m.queued) return // drawn once, with the text it has by then
  m.queued = true
  keepPinned(() => {
    m.queued = false
    m.el.hidden = !m.raw.trim() && !m.el.dataset.files
    m.role === 'user' ? (m.body.textContent = plain(m.raw)) : draw(m)
  })
}

// ============================================================================
// Others' text: markdown (markdown.js), fetched when a text first has some, or when the
// person sends (the answer will need it); plain text is drawn as markdown.js draws it.
// ============================================================================

/** @type {typeof import('./markdown.js') | null} */
let markdown = null
/** @type {Promise<void> | null} */
let fetching = null
let mdTries = 0

/** Fetch markdown.js, once (again after a failure, at a fresh URL). */
export function loadMarkdown() {
  return (fetching ??= import(`./markdown.js${mdTries ? `?retry=${mdTries}` : ''}`).then(m => { markdown = m }, err => {
    mdTries++
    fetching = null
    console.warn('hostcall: loading a module', err)
  }))
}

/** One line with nothing markdown.js reads: it would draw one paragraph of it, as is. */
const PLAIN = /^(?!\s*([-+•]|\d{1,3}[.)])\s)[^\n\r`*[#]*$/

/** @param {{el: HTMLElement, body: HTMLElement, raw: string}} m */
function draw(m) {
  if (markdown) return markdown.renderMarkdown(m.raw, m.body)
  // Until markdown.js is here, the text as it is; then drawn again, if still shown.
  m.body.replaceChildren(...(m.raw.trim() ? [h('p', null, m.raw)] : []))
  if (!PLAIN.test(m.raw) || m.raw.includes('://')) loadMarkdown().then(() => markdown && m.el.isConnected && setText(m, m.raw))
}

/** What a pending user message says (its drawing may wait: `write`). @type {WeakMap<HTMLElement, string>} */
const typed = new WeakMap()

function message(id, role, text) {
  const body = h('div', { 'data-part': 'message-text', dir: 'auto' })
  const el = h('div', { 'data-part': 'message', 'data-role': role, 'data-message-id': id || null },
    h('span', { class: 'sr-only', text: `${t(role === 'user' ? 'you' : 'assistant')}: ` }), body)
  typed.set(el, text)
  setText({ el, body, raw: '', role }, text)
  append(el)
  return el
}

/** A message that could not be sent stays, marked, with a retry, and why if known.
 * @param {HTMLElement} el @param {() => void} retry @param {string} [why] */
export function markFailed(el, retry, why = '') {
  if (pendingUser === el) pendingUser = null
  delete el.dataset.pending
  el.dataset.state = 'failed'
  el.append(h('p', { 'data-part': 'message-failed' }, t('notSent'), ' ', why && `${why} `,
    h('button', { type: 'button', 'data-part': 'message-retry', onclick: () => { el.remove(); retry() } }, t('retry'))))
}

/** The conversation moved on (a run started, a message was sent): earlier errors stay as
 * what happened, without their Retry, which would retry a turn that is no longer the last. */
export function retireRetries() {
  for (const b of document.querySelectorAll('[data-part=error] [data-part=retry]')) b.remove()
}

/** A conversation-level error (a `note`: no fault), with a retry when one makes sense.
 * @param {string} text @param {(() => void) | null} [retry] @param {boolean} [note] */
export function showError(text, retry, note = false) {
  const el = h('div', { 'data-part': 'error', role: note ? 'status' : 'alert' }, h('p', { text }),
    retry && h('button', { type: 'button', 'data-part': 'retry', onclick: () => { el.remove(); retry() } }, t('retry')))
  append(el)
}
