// Hostcall widget: the chat's DOM — shell, messages, safe markdown, tool-call cards.
//
// Rule for this file (PRODUCT.md principle 4): everything that came from a model, a page or a
// person is put in the DOM with text nodes and createElement, never innerHTML. Links are
// rendered only for http(s) URLs. Test hooks are `data-part` attributes and roles; classes
// are for styling only and never selected by tests.

import { t } from './i18n.js'

/**
 * @typedef {{el: HTMLElement, setState: (state: string, note?: string) => void,
 *   setInput: (input: unknown, schema?: any) => void, setBody: (...nodes: any[]) => void,
 *   busy: (on: boolean) => void, focus: (part: string) => void}} Card
 */

// ============================================================================
// DOM helpers
// ============================================================================

/**
 * Create an element. attrs: `text` sets textContent, `on<event>` adds a listener, `true` is
 * an empty attribute, null/false are skipped. Children: nodes, or strings (as text).
 * @param {string} tag @param {Record<string, any> | null} [attrs] @param {...any} kids
 * @returns {HTMLElement}
 */
export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue
    if (k === 'text') el.textContent = String(v)
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v)
    else el.setAttribute(k, v === true ? '' : String(v))
  }
  for (const kid of kids.flat(4)) if (kid != null && kid !== false) el.append(kid)
  return el
}

let counter = 0
/** A page-unique id for label/aria wiring. @param {string} prefix */
export const uid = prefix => `${prefix}-${++counter}`

const ICONS = {
  close: 'M6.4 5 12 10.6 17.6 5 19 6.4 13.4 12 19 17.6 17.6 19 12 13.4 6.4 19 5 17.6 10.6 12 5 6.4z',
  send: 'M3.4 20.4 21 12 3.4 3.6 3.4 10l12.6 2-12.6 2z',
  restart: 'M12 5V2L7 6l5 4V7a5 5 0 1 1-5 5H5a7 7 0 1 0 7-7z',
  tool: 'M21.7 18.3 13 9.6c.9-2.3.4-5-1.5-6.9A6.1 6.1 0 0 0 4.7 1.5l4 4-2.8 2.8-4-4a6 6 0 0 0 1.2 6.8 6 6 0 0 0 6.9 1.5l8.7 8.7c.4.4 1 .4 1.4 0l1.6-1.6c.4-.4.4-1 0-1.4z',
}

/** @param {keyof typeof ICONS} name */
export function icon(name) {
  const NS = 'http://www.w3.org/2000/svg'
  const svg = document.createElementNS(NS, 'svg')
  svg.setAttribute('viewBox', '0 0 24 24')
  svg.setAttribute('aria-hidden', 'true')
  svg.setAttribute('focusable', 'false')
  const path = document.createElementNS(NS, 'path')
  path.setAttribute('d', ICONS[name])
  svg.append(path)
  return svg
}

/** "dueDate" / "due_date" → "Due date". @param {string} key */
export function humanize(key) {
  const words = String(key).replace(/([a-z0-9])([A-Z])/g, '$1 $2').replace(/[_-]+/g, ' ').trim().toLowerCase()
  return words.charAt(0).toUpperCase() + words.slice(1)
}

/** @param {string} s @param {number} [n] */
const clip = (s, n = 2000) => (s.length > n ? `${s.slice(0, n)}…` : s)

// ============================================================================
// Shell: header, message list, working indicator, composer, live region
// ============================================================================

/** @type {Record<string, HTMLElement>} */
const parts = {}
/** @type {Map<string, {el: HTMLElement, body: HTMLElement, raw: string, role: string}>} */
const messages = new Map()
/** @type {HTMLElement | null} */
let pendingUser = null

/**
 * Build the widget's frame inside `root`.
 * @param {HTMLElement | null} root
 * @param {{title: string, greeting: string, closable: boolean, onSend: (text: string) => void,
 *   onClose: () => void, onNew: () => void}} o
 */
export function mountShell(root, o) {
  const inputId = uid('composer')
  parts.messages = h('div', { 'data-part': 'messages', role: 'log', 'aria-live': 'off', 'aria-label': t('conversation'), tabindex: '0' })
  parts.working = h('div', { 'data-part': 'working', role: 'status', hidden: true },
    h('span', { 'data-part': 'dots', 'aria-hidden': 'true' }, h('i'), h('i'), h('i')), t('working'))
  parts.connection = h('p', { 'data-part': 'connection', role: 'status', hidden: true })
  parts.live = h('div', { 'data-part': 'live', class: 'sr-only', 'aria-live': 'polite', 'aria-atomic': 'true' })
  parts.input = h('textarea', {
    id: inputId, 'data-part': 'composer-input', rows: '1', maxlength: '8000',
    placeholder: t('placeholder'), autocomplete: 'off',
    onkeydown: (/** @type {KeyboardEvent} */ e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); parts.composer.requestSubmit() }
    },
    oninput: () => grow(/** @type {HTMLTextAreaElement} */ (parts.input)),
  })
  parts.send = h('button', { type: 'submit', 'data-part': 'send', 'aria-label': t('send'), title: t('send') }, icon('send'))
  parts.composer = h('form', {
    'data-part': 'composer', 'aria-label': t('composer'),
    onsubmit: (/** @type {Event} */ e) => {
      e.preventDefault()
      const box = /** @type {HTMLTextAreaElement} */ (parts.input)
      const text = box.value.trim()
      if (!text || parts.send.hasAttribute('disabled')) return
      box.value = ''
      grow(box)
      o.onSend(text)
    },
  }, h('label', { for: inputId, class: 'sr-only', text: t('message') }), parts.input, parts.send)

  const header = h('header', { 'data-part': 'header' },
    h('h1', { 'data-part': 'title', text: o.title }),
    h('button', { type: 'button', 'data-part': 'new-conversation', 'aria-label': t('newConversation'), title: t('newConversation'), onclick: o.onNew }, icon('restart')),
    o.closable && h('button', { type: 'button', 'data-part': 'close', 'aria-label': t('close'), title: t('close'), onclick: o.onClose }, icon('close')))
  root?.replaceChildren(header, parts.connection, parts.messages, parts.working, parts.composer, parts.live)
  reset(o.greeting)
}

/** Empty the conversation (new conversation), keeping the greeting. @param {string} greeting */
export function reset(greeting) {
  messages.clear()
  pendingUser = null
  parts.messages.replaceChildren()
  if (greeting) {
    const body = h('div', { 'data-part': 'message-text' })
    renderMarkdown(greeting, body)
    parts.messages.append(h('div', { 'data-part': 'message', 'data-role': 'assistant', 'data-greeting': '' },
      h('span', { class: 'sr-only', text: `${t('assistant')}: ` }), body))
  }
}

/** @param {HTMLTextAreaElement} box */
function grow(box) {
  box.style.height = 'auto'
  box.style.height = `${Math.min(box.scrollHeight, 140)}px`
}

export function focusComposer() { parts.input?.focus() }

/** Let screen readers hear `text` once (streamed text is announced when complete). @param {string} text */
export function announce(text) {
  parts.live.textContent = ''
  setTimeout(() => { parts.live.textContent = clip(text, 600) }, 50)
}

/** @param {boolean} on */
export function setWorking(on) { parts.working.hidden = !on }

/** @param {boolean} on */
export function setSendEnabled(on) { on ? parts.send.removeAttribute('disabled') : parts.send.setAttribute('disabled', '') }

/** @param {'open'|'connecting'|'down'} state */
export function setConnection(state) {
  parts.connection.hidden = state === 'open'
  parts.connection.dataset.state = state
  parts.connection.textContent = state === 'down' ? t('reconnecting') : t('connecting')
}

/** Append a node to the conversation, keeping the view pinned to the bottom if it was. @param {Node} node */
export function append(node) {
  const list = parts.messages
  const pinned = list.scrollHeight - list.scrollTop - list.clientHeight < 80
  list.append(node)
  if (pinned) list.scrollTop = list.scrollHeight
}

export function scrollToEnd() { parts.messages.scrollTop = parts.messages.scrollHeight }

// ============================================================================
// Messages
// ============================================================================

/**
 * Show a user message right away; the server's TEXT_MESSAGE_START adopts it.
 * @param {string} text
 */
export function addPendingUser(text) {
  const el = message('', 'user', text)
  el.dataset.pending = ''
  pendingUser = el
  return el
}

/**
 * Create (or find) the message `id`. A user message adopts the pending one shown at send.
 * @param {string} id @param {string} role @param {string} [text]
 */
export function upsertMessage(id, role, text) {
  let m = messages.get(id)
  if (!m) {
    const el = role === 'user' && pendingUser ? pendingUser : message(id, role, '')
    if (el === pendingUser) { pendingUser = null; delete el.dataset.pending }
    el.dataset.messageId = id
    m = { el, body: /** @type {HTMLElement} */ (el.querySelector('[data-part=message-text]')), raw: '', role }
    messages.set(id, m)
    if (!el.isConnected) append(el)
  }
  if (text !== undefined && text !== m.raw) setText(m, text)
  return m
}

/** @param {string} id @param {string} delta */
export function appendDelta(id, delta) {
  const m = messages.get(id) || upsertMessage(id, 'assistant')
  setText(m, m.raw + delta)
}

/** Finish a streamed message; returns its text and role. @param {string} id */
export function endMessage(id) {
  const m = messages.get(id)
  if (!m) return { text: '', role: '' }
  if (!m.raw.trim()) { m.el.remove(); messages.delete(id) }
  return { text: m.raw, role: m.role }
}

/** @param {string} id */
export const hasMessage = id => messages.has(id)

/** @param {{el: HTMLElement, body: HTMLElement, raw: string, role: string}} m @param {string} text */
function setText(m, text) {
  const list = parts.messages
  const pinned = list.scrollHeight - list.scrollTop - list.clientHeight < 80
  m.raw = text
  m.el.hidden = !text.trim()
  if (m.role === 'user') m.body.textContent = text
  else renderMarkdown(text, m.body)
  if (pinned) list.scrollTop = list.scrollHeight
}

/** @param {string} id @param {string} role @param {string} text */
function message(id, role, text) {
  const body = h('div', { 'data-part': 'message-text' })
  const el = h('div', { 'data-part': 'message', 'data-role': role, 'data-message-id': id || null },
    h('span', { class: 'sr-only', text: `${role === 'user' ? t('you') : t('assistant')}: ` }), body)
  if (role === 'user') body.textContent = text
  else renderMarkdown(text, body)
  el.hidden = !text.trim()
  append(el)
  return el
}

/**
 * A conversation-level error with an optional retry.
 * @param {string} text @param {(() => void) | null} [retry]
 */
export function showError(text, retry) {
  const el = h('div', { 'data-part': 'error', role: 'alert' },
    h('p', { text }),
    retry && h('button', { type: 'button', 'data-part': 'retry', onclick: () => { el.remove(); retry() } }, t('retry')))
  append(el)
  return el
}

// ============================================================================
// Safe markdown subset: paragraphs, lists, fenced code, **bold**, *italic*, `code`,
// [links](https://…) and bare http(s) URLs. Built with DOM APIs only.
// ============================================================================

const INLINE = /`([^`\n]+)`|\*\*([^*\n]+?)\*\*|__([^_\n]+?)__|(?<![\w*])\*(?![\s*])([^*\n]+?)\*(?![\w*])|(?<![\w_])_(?![\s_])([^_\n]+?)_(?![\w_])|\[([^\]\n]+)\]\(\s*([^()\s]+)\s*\)|(https?:\/\/[^\s<>()"']+[^\s<>()"'.,;:!?])/g

/**
 * Render `src` as the markdown subset into `into` (replacing its children).
 * @param {string} src @param {HTMLElement} into
 */
export function renderMarkdown(src, into) {
  const lines = src.replace(/\r\n?/g, '\n').split('\n')
  /** @type {Node[]} */
  const blocks = []
  /** @type {string[]} */
  let para = []
  /** @type {{ordered: boolean, el: HTMLElement} | null} */
  let list = null
  const flush = () => { if (para.length) blocks.push(h('p', null, inline(para.join('\n')))); para = [] }
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]
    if (/^\s*```/.test(line)) {
      flush(); list = null
      const code = []
      while (++i < lines.length && !/^\s*```/.test(lines[i])) code.push(lines[i])
      blocks.push(h('pre', null, h('code', { text: code.join('\n') })))
      continue
    }
    const item = /^\s*([-*+•]|\d{1,3}[.)])\s+(.*)$/.exec(line)
    if (item) {
      flush()
      const ordered = /\d/.test(item[1])
      if (!list || list.ordered !== ordered) {
        list = { ordered, el: h(ordered ? 'ol' : 'ul', ordered && parseInt(item[1], 10) !== 1 ? { start: parseInt(item[1], 10) } : null) }
        blocks.push(list.el)
      }
      list.el.append(h('li', null, inline(item[2])))
      continue
    }
    const heading = /^#{1,6}\s+(.*)$/.exec(line)
    if (heading) { flush(); list = null; blocks.push(h('p', null, h('strong', null, inline(heading[1])))); continue }
    if (!line.trim()) { flush(); list = null; continue }
    if (list && /^\s{2,}\S/.test(line)) { list.el.lastElementChild?.append(' ', ...inline(line.trim())); continue }
    list = null
    para.push(line)
  }
  flush()
  into.replaceChildren(...blocks)
}

/** @param {string} text @returns {(Node|string)[]} */
function inline(text) {
  /** @type {(Node|string)[]} */
  const out = []
  let last = 0
  for (const m of text.matchAll(INLINE)) {
    const at = /** @type {number} */ (m.index)
    if (at > last) out.push(text.slice(last, at))
    if (m[1] != null) out.push(h('code', { text: m[1] }))
    else if (m[2] != null || m[3] != null) out.push(h('strong', null, inline(m[2] ?? m[3])))
    else if (m[4] != null || m[5] != null) out.push(h('em', null, inline(m[4] ?? m[5])))
    else if (m[6] != null) out.push(link(m[7], inline(m[6])) ?? m[0])
    else out.push(link(m[8], [m[8]]) ?? m[8])
    last = at + m[0].length
  }
  if (last < text.length) out.push(text.slice(last))
  return out
}

/** An anchor for http(s) URLs only; null for anything else (shown as plain text). */
function link(/** @type {string} */ href, /** @type {(Node|string)[]} */ kids) {
  let url
  try { url = new URL(href) } catch { return null }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null
  return h('a', { href: url.href, target: '_blank', rel: 'noopener noreferrer nofollow' }, kids)
}

// ============================================================================
// Values shown readably (tool inputs and results)
// ============================================================================

/**
 * A definition list / list / text for any JSON value; labels from the schema's titles.
 * @param {unknown} v @param {any} [schema] @param {number} [depth]
 * @returns {Node}
 */
export function readable(v, schema, depth = 0) {
  if (v === null || v === undefined || v === '') return h('span', { 'data-empty': '', text: t('none') })
  if (typeof v === 'boolean') return document.createTextNode(t(v ? 'yes' : 'no'))
  if (typeof v !== 'object') return document.createTextNode(clip(String(v), 500))
  if (depth > 5) return document.createTextNode(clip(JSON.stringify(v), 500))
  if (Array.isArray(v)) {
    if (!v.length) return h('span', { 'data-empty': '', text: t('none') })
    return h('ul', { 'data-part': 'value-list' }, v.slice(0, 100).map(x => h('li', null, readable(x, schema?.items, depth + 1))))
  }
  const entries = Object.entries(v).slice(0, 100)
  if (!entries.length) return h('span', { 'data-empty': '', text: t('none') })
  return h('dl', { 'data-part': 'value' }, entries.map(([k, x]) => {
    const sub = schema?.properties?.[k]
    return [h('dt', { text: typeof sub?.title === 'string' ? sub.title : humanize(k) }), h('dd', { 'data-key': k }, readable(x, sub, depth + 1))]
  }))
}

// ============================================================================
// Tool-call cards
// ============================================================================

/**
 * A card for one tool call; `data-state` is running, waiting, done, failed, rejected or expired.
 * @param {string} id @param {string} name @returns {Card}
 */
export function toolCard(id, name) {
  const titleId = uid('call')
  const status = h('span', { 'data-part': 'tool-call-status' })
  const input = h('div', { 'data-part': 'tool-call-input', hidden: true })
  const body = h('div', { 'data-part': 'tool-call-body' })
  const el = h('article', { 'data-part': 'tool-call', 'data-call-id': id, 'data-tool': name, 'aria-labelledby': titleId },
    h('header', null, icon('tool'),
      h('h2', { id: titleId, 'data-part': 'tool-call-title' }, h('span', { class: 'sr-only', text: `${t('toolCall')} ` }), h('code', { text: name })),
      status),
    input, body)
  append(el)
  return {
    el,
    setState(state, note) {
      el.dataset.state = state
      status.dataset.state = state
      status.textContent = t(`state_${state}`)
      const old = el.querySelector('[data-part=tool-call-note]')
      if (note) {
        const p = h('p', { 'data-part': 'tool-call-note', text: note })
        old ? old.replaceWith(p) : body.before(p)
      } else old?.remove()
    },
    setInput(value, schema) {
      if (value === undefined) return
      input.hidden = false
      input.replaceChildren(h('p', { 'data-part': 'label', text: t('input') }), readable(value, schema))
    },
    setBody(...nodes) { body.replaceChildren(...nodes.filter(Boolean)) },
    busy(on) {
      for (const b of el.querySelectorAll('button')) b.toggleAttribute('disabled', on)
      on ? el.setAttribute('aria-busy', 'true') : el.removeAttribute('aria-busy')
    },
    focus(part) { /** @type {HTMLElement | null} */ (el.querySelector(`[data-part=${part}]`))?.focus() },
  }
}

/**
 * Approve / Edit / Reject for a call awaiting confirmation.
 * @param {{onApprove: () => void, onEdit: () => void, onReject: () => void}} o
 */
export function confirmPanel(o) {
  return h('div', { 'data-part': 'confirm' },
    h('p', { text: t('confirmPrompt') }),
    h('div', { 'data-part': 'actions' },
      h('button', { type: 'button', 'data-part': 'approve', 'data-kind': 'primary', onclick: o.onApprove }, t('approve')),
      h('button', { type: 'button', 'data-part': 'edit', onclick: o.onEdit }, t('edit')),
      h('button', { type: 'button', 'data-part': 'reject', 'data-kind': 'danger', onclick: o.onReject }, t('reject'))))
}

/**
 * The reject step: an optional reason, then confirm or go back.
 * @param {{onConfirm: (reason: string) => void, onCancel: () => void}} o
 */
export function rejectPanel(o) {
  const id = uid('reason')
  const box = /** @type {HTMLTextAreaElement} */ (h('textarea', { id, 'data-part': 'reject-reason', rows: '2', maxlength: '1000' }))
  const form = h('form', {
    'data-part': 'reject-form', novalidate: true,
    onsubmit: (/** @type {Event} */ e) => { e.preventDefault(); o.onConfirm(box.value.trim()) },
  },
  h('label', { for: id, text: t('rejectReason') }), box,
  h('div', { 'data-part': 'actions' },
    h('button', { type: 'submit', 'data-part': 'reject-confirm', 'data-kind': 'danger' }, t('rejectConfirm')),
    h('button', { type: 'button', 'data-part': 'reject-cancel', onclick: o.onCancel }, t('cancel'))))
  return { el: form, focus: () => box.focus() }
}
