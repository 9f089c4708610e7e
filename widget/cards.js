// Hostcall widget: the DOM of tool calls — a card per call, the confirmation and reject
// panels, and values shown readably. Loaded with widget/toolcalls.js when the first call
// appears (the weight budget: a chat that never calls a tool never fetches it).
// Like chat.js: what a model, page or person wrote enters the DOM as text nodes only.

import { flushWrites, h, keepPinned, phone, reserve, t, uid, write } from './chat.js'
import { humanize } from './form.js'
import { LIMITS } from './protocol.js'

/**
 * @typedef {{el: HTMLElement, show: () => void, setTitle: (title: string) => void, setState: (state: string, note?: string) => void,
 *   setInput: (input: unknown, schema?: any) => void, setBody: (...nodes: any[]) => void,
 *   busy: (on: boolean) => void, focus: (part: string) => void}} Card
 */

/**
 * A new card is built off the page and shown by `show()`, or this long after it was made,
 * whichever comes first (ms). A call the page's handler answers at once is shown once its
 * result is on its way: the frame that lays out and paints the new card (~2-6 ms on a
 * loaded 2-core machine) no longer runs between the call and its result, where it held up
 * the handler's answer. Any wait a person could notice shows it at once.
 */
const SHOW_WITHIN_MS = 100

const clip = (s, n) => (s.length > n ? `${s.slice(0, n)}…` : s)

// ============================================================================
// Values shown readably (tool inputs and results), labelled by the schema's titles
// ============================================================================

/** @param {unknown} v @param {any} [schema] @param {number} [depth] @returns {Node} */
export function readable(v, schema, depth = 0) {
  const none = () => h('span', { 'data-empty': '', text: t('none') })
  if (v == null || v === '' || (typeof v === 'object' && !Object.keys(v).length)) return none()
  if (typeof v === 'boolean') return document.createTextNode(t(v ? 'yes' : 'no'))
  if (typeof v !== 'object' || depth > 5) return document.createTextNode(clip(typeof v === 'object' ? JSON.stringify(v) : String(v), 500))
  if (Array.isArray(v)) return h('ul', { 'data-part': 'value-list' }, v.slice(0, 100).map(x => h('li', null, readable(x, schema?.items, depth + 1))))
  return h('dl', { 'data-part': 'value' }, Object.entries(v).slice(0, 100).map(([k, x]) => {
    const sub = schema?.properties?.[k]
    return [h('dt', { text: typeof sub?.title === 'string' ? sub.title : humanize(k) }), h('dd', { 'data-key': k }, readable(x, sub, depth + 1))]
  }))
}

// ============================================================================
// Tool-call cards
// ============================================================================

/**
 * A call's card; `data-state`: running, waiting, done, failed, rejected, expired, stopped. `name` is
 * the tool's id (`data-tool`, for tests and pages); `title` is what people read. Shown by
 * `show()`, at the latest SHOW_WITHIN_MS after it was made. Its DOM is built, and changed,
 * with the thread's drawing (chat.js `write`): a call's dispatch comes in the same network
 * read as its first events, and goes to the page before any card is built.
 * @param {string} id @param {string} name @param {string} [title] @returns {Card}
 */
export function toolCard(id, name, title = name) {
  // Its place in the thread is taken now: text that arrives meanwhile goes after it.
  const spot = reserve()
  /** @type {ReturnType<typeof build> | null} */
  let dom = null
  const built = () => (dom ??= build(id, name, title))
  let shown = false
  const show = () => { if (!shown) { shown = true; clearTimeout(timer); keepPinned(() => spot.parentNode && spot.replaceWith(built().el)) } }
  const timer = setTimeout(show, SHOW_WITHIN_MS)
  /** A change in its order with the thread's (`pin`: one that may change its height). @param {(d: ReturnType<typeof build>) => void} change */
  const draw = (change, pin = true) => (pin ? keepPinned : write)(() => change(built()))
  return {
    get el() { return built().el },
    show,
    setTitle: text => draw(d => d.named(text), false),
    setState: (state, note) => draw(({ el, status, body }) => {
      el.dataset.state = status.dataset.state = state
      status.textContent = t(`state_${state}`)
      el.querySelector('[data-part=tool-call-note]')?.remove()
      if (note) body.before(h('p', { 'data-part': 'tool-call-note', text: note }))
    }, false),
    setInput: (value, schema) => draw(({ input }) => {
      input.hidden = false
      input.replaceChildren(h('p', { 'data-part': 'label', text: t('input') }), readable(value, schema))
    }),
    setBody: (...nodes) => draw(d => d.body.replaceChildren(...nodes.filter(Boolean))),
    busy: on => draw(({ el }) => {
      for (const b of el.querySelectorAll('button')) b.toggleAttribute('disabled', on)
      on ? el.setAttribute('aria-busy', 'true') : el.removeAttribute('aria-busy')
    }, false),
    focus(part) {
      flushWrites() // what it shows is on the page first
      const target = /** @type {HTMLElement | null} */ (built().el.querySelector(`[data-part=${part}]`))
      target?.focus()
    },
  }
}

/** A card's DOM. @param {string} id @param {string} name @param {string} title */
function build(id, name, title) {
  const titleId = uid('call')
  const heading = h('h2', { id: titleId, 'data-part': 'tool-call-title' })
  /** A title people read, or the tool's id as code when it has none. @param {string} text */
  const named = text => heading.replaceChildren(h('span', { class: 'sr-only', text: `${t('toolCall')} ` }),
    text === name ? h('code', { text: name }) : h('span', { text }))
  named(title)
  const status = h('span', { 'data-part': 'tool-call-status' })
  const input = h('div', { 'data-part': 'tool-call-input', hidden: true })
  const body = h('div', { 'data-part': 'tool-call-body' })
  const el = h('article', { 'data-part': 'tool-call', 'data-call-id': id, 'data-tool': name, 'aria-labelledby': titleId },
    h('header', null, heading, status), input, body)
  return { el, named, status, input, body }
}

/**
 * Approve / Edit / Reject, and the scopes the call offers ("just this once" / "for this
 * conversation") when it offers more than one.
 * @param {{scopes: string[], scope: string, onScope: (scope: string) => void,
 *   onApprove: () => void, onEdit: () => void, onReject: () => void}} o
 */
export function confirmPanel(o) {
  const offered = ['once', 'conversation'].filter(s => o.scopes.includes(s))
  const name = uid('scope')
  const scopes = offered.length > 1 && h('fieldset', { 'data-part': 'scope' },
    h('legend', { text: t('scopeLegend') }),
    ...offered.map(scope => {
      const id = uid('scope')
      return h('div', { 'data-part': 'scope-option' },
        h('input', { type: 'radio', id, name, value: scope, 'data-part': `scope-${scope}`, checked: scope === o.scope, onchange: () => o.onScope(scope) }),
        h('label', { for: id, text: t(`scope_${scope}`) }))
    }))
  return h('div', { 'data-part': 'confirm' },
    h('p', { text: t('confirmPrompt') }),
    scopes || null,
    h('div', { 'data-part': 'actions' },
      h('button', { type: 'button', 'data-part': 'approve', 'data-kind': 'primary', onclick: o.onApprove }, t('approve')),
      h('button', { type: 'button', 'data-part': 'edit', onclick: o.onEdit }, t('edit')),
      h('button', { type: 'button', 'data-part': 'reject', 'data-kind': 'danger', onclick: o.onReject }, t('reject'))))
}

/** The reject step: an optional reason, then confirm or go back. @param {{onConfirm: (reason: string) => void, onCancel: () => void}} o */
export function rejectPanel(o) {
  const id = uid('reason')
  const box = /** @type {HTMLTextAreaElement} */ (h('textarea', { id, 'data-part': 'reject-reason', rows: 2, maxlength: LIMITS.MAX_REASON_CHARS }))
  const el = h('form', {
    'data-part': 'reject-form', novalidate: true,
    onsubmit: e => { e.preventDefault(); o.onConfirm(box.value.trim()) },
    // Escape goes back to the confirmation; it must not reach the page and close the chat.
    onkeydown: e => { if (e.key === 'Escape') { e.stopPropagation(); o.onCancel() } },
  }, h('label', { for: id, text: t('rejectReason') }), box,
  h('div', { 'data-part': 'actions' },
    h('button', { type: 'submit', 'data-part': 'reject-confirm', 'data-kind': 'danger' }, t('rejectConfirm')),
    h('button', { type: 'button', 'data-part': 'reject-cancel', onclick: o.onCancel }, t('cancel'))))
  return { el, focus: () => phone() || box.focus() }
}
