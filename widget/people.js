// Hostcall widget: what people add to the conversation — the visitor's thumbs up or down (and
// an optional comment) on each reply of the agent, and a person of the operator's team who
// takes the conversation over, writes, and hands it back (docs/embedding.md). Loaded by
// app.js with the first reply or the first person's event, with its strings
// (locale-xx-people.js) and styles (people.css): the first screen needs none of it.

import { CUSTOM } from './protocol-events.js'
import { addStrings, announce, append, h, keepPinned, messageEl, t, upsertMessage } from './chat.js'

const COMMENT_CHARS = 1000 // docs/protocol.md: the server's limit
const THUMB = 'M1 21h4V9H1zm22-11a2 2 0 0 0-2-2h-6.3l1-4.6v-.3c0-.4-.2-.8-.5-1.1L14.2 1 7.6 7.6C7.2 8 7 8.4 7 9v10a2 2 0 0 0 2 2h9c.8 0 1.5-.5 1.8-1.2l3-7.1.2-.7z'

// Strings and styles first: nothing of this module shows as keys or unstyled.
await Promise.all([addStrings('people'), new Promise(resolve => document.head.append(h('link', {
  rel: 'stylesheet', href: new URL('people.css', import.meta.url).href, onload: resolve, onerror: resolve,
})))])

/** @type {ReturnType<typeof import('./api.js').createApi>} */
let api
/** @type {{conversationId: string}} */
let state
/** @type {(event: string, detail: any) => void} */
let emit
/** Who of the operator's team holds the conversation ('' nobody). */
let person = ''

/** app.js's API client, state (its conversation) and page events.
 * @param {typeof api} client @param {typeof state} app @param {typeof emit} toPage */
export function attach(client, app, toPage) {
  api = client
  state = app
  emit = toPage
}

// ============================================================================
// A person of the team
// ============================================================================

/** A line about the conversation itself, read out too. @param {string} text */
function notice(text) {
  append(h('p', { 'data-part': 'notice', text }))
  announce(text)
}

/** Name the person of the team who wrote message `id` (shown, and read out). @param {string} id @param {string} name */
function author(id, name) {
  const el = messageEl(id)
  if (!el || el.querySelector('[data-part=message-author]')) return
  const said = el.querySelector('.sr-only')
  if (said) said.textContent = `${name}: `
  el.prepend(h('span', { 'data-part': 'message-author', 'aria-hidden': 'true', text: name }))
}

/** Who holds the conversation, and who wrote what, as a snapshot tells it (after a reload):
 * a person who joined is said once (then true). @param {string} [name] @param {any[]} [messages] */
export function holder(name = '', messages = []) {
  for (const m of messages) if (m.name) author(m.id, m.name)
  const joined = Boolean(name && name !== person)
  if (joined) notice(t('personJoined', { name }))
  person = name
  return joined
}

/** A person's event (a CUSTOM event's `value`); true when it showed the visitor something
 * new to read (a closed chat counts it on its launcher). @param {string} type @param {any} d */
export function on(type, d) {
  if (type === CUSTOM.PERSON_JOINED) return holder(String(d.name))
  if (type === CUSTOM.PERSON_LEFT) { person = ''; notice(t('personLeft', d)); return true }
  if (type === CUSTOM.PERSON_REQUESTED) { notice(t('personRequested')); return true }
  if (type !== CUSTOM.PERSON_MESSAGE || messageEl(d.messageId)) return false
  upsertMessage(d.messageId, 'operator', String(d.text))
  author(d.messageId, String(d.name))
  announce(`${d.name}: ${d.text}`)
  emit('message', { messageId: d.messageId, role: 'operator', name: d.name, text: d.text })
  return true
}

// ============================================================================
// Ratings of replies
// ============================================================================

function thumb(rating) {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg')
  svg.setAttribute('viewBox', '0 0 24 24')
  svg.setAttribute('aria-hidden', 'true')
  svg.append(document.createElementNS('http://www.w3.org/2000/svg', 'path'))
  svg.firstElementChild?.setAttribute('d', THUMB)
  if (rating === 'down') svg.setAttribute('transform', 'rotate(180)')
  return svg
}

/** Add the rating bar to reply `id` (once); `rating` is the visitor's earlier one, if any.
 * The visitor may change it: the server keeps the latest (one per reply).
 * @param {string} id @param {string} [rating] */
export function offer(id, rating) {
  const el = messageEl(id)
  // Built with the reply's drawing, not while the stream's events wait behind it.
  if (el) keepPinned(() => el.querySelector('[data-part=feedback]') || el.append(bar(id, rating)))
}

/** The bar, its buttons and comment form. @param {string} id @param {string} [rating] */
function bar(id, rating) {
  const status = h('p', { 'data-part': 'feedback-status', role: 'status' })
  const box = /** @type {HTMLTextAreaElement} */ (h('textarea', {
    'data-part': 'feedback-comment', rows: 2, maxlength: COMMENT_CHARS,
    'aria-label': t('feedbackComment'), placeholder: t('feedbackComment'),
  }))
  const form = h('form', { 'data-part': 'feedback-form', hidden: true, onsubmit: e => { e.preventDefault(); send(current, box.value.trim()) } },
    box, h('button', { type: 'submit', 'data-part': 'feedback-send' }, t('feedbackSend')))
  /** @type {Record<string, HTMLElement>} */
  const buttons = {}
  let current = rating || ''
  const show = () => {
    for (const [r, b] of Object.entries(buttons)) b.setAttribute('aria-pressed', String(r === current))
  }
  /** @param {string} chosen @param {string} [comment] */
  async function send(chosen, comment = '') {
    try {
      await api.call('POST', api.conv(state.conversationId, `/messages/${encodeURIComponent(id)}/feedback`), comment ? { rating: chosen, comment } : { rating: chosen })
      current = chosen
      show()
      status.textContent = t('feedbackThanks')
      form.hidden = Boolean(comment) // a comment is asked for once a thumb is chosen
    } catch (err) {
      status.textContent = t('feedbackFailed')
      console.warn('hostcall: feedback', err)
    }
  }
  for (const r of ['up', 'down']) {
    const label = t(r === 'up' ? 'feedbackUp' : 'feedbackDown')
    buttons[r] = h('button', { type: 'button', 'data-part': `feedback-${r}`, 'aria-label': label, title: label, onclick: () => send(r) }, thumb(r))
  }
  show()
  return h('div', { 'data-part': 'feedback', role: 'group', 'aria-label': t('feedbackLabel') },
    h('div', { 'data-part': 'feedback-buttons' }, buttons.up, buttons.down, status), form)
}
