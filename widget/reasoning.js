// Hostcall widget: the model's reasoning before its answer (AG-UI's REASONING_* events),
// shown collapsed where it began: "Thinking…" while it streams, "Thought" once the answer
// begins; opened, what it said. Loaded by events.js with the first REASONING_START, with its
// strings (locale-xx-reasoning.js) and styles (reasoning.css): no idle chat needs it.

import { EVENT } from './protocol-events.js'
import { addStrings, fill, h, keepPinned, t } from './chat.js'

await Promise.all([addStrings('reasoning'), new Promise(resolve => document.head.append(h('link', {
  rel: 'stylesheet', href: new URL('reasoning.css', import.meta.url).href, onload: resolve, onerror: resolve,
})))])

/** The reasoning still streaming, by its messageId. @type {Map<string, HTMLDetailsElement>} */
const open = new Map()

/**
 * One reasoning event, in the stream's order. `spot`: the place REASONING_START reserved
 * (chat.js `reserve`) when it arrived, before anything that came after it.
 * @param {string} type @param {{messageId: string, delta?: string}} d @param {Comment | null} spot
 */
export function on(type, d, spot) {
  if (type === EVENT.REASONING_START && spot) {
    const el = box('thinking', t('reasoningThinking'), '')
    open.set(d.messageId, el)
    fill(spot, el)
  }
  const el = open.get(d.messageId)
  if (!el) return
  if (type === EVENT.REASONING_MESSAGE_CONTENT) {
    const text = /** @type {HTMLElement} */ (el.lastElementChild)
    keepPinned(() => text.append(String(d.delta ?? '')))
  } else if (type === EVENT.REASONING_END) end(d.messageId)
}

/** @param {string} state @param {string} summary @param {string} text */
const box = (state, summary, text) => /** @type {HTMLDetailsElement} */ (h('details', { 'data-part': 'reasoning', 'data-state': state },
  h('summary', { 'data-part': 'reasoning-summary', text: summary }),
  h('div', { 'data-part': 'reasoning-text', text })))

/** A reasoning that ended before a reload (the snapshot's), shown where `spot` is.
 * @param {Comment} spot @param {string} text */
export function restore(spot, text) {
  const el = box('done', t('reasoningDone'), text)
  if (!text) el.dataset.empty = ''
  fill(spot, el)
}

/** Say it is over (its answer began, or the run ended without one). @param {string} id */
function end(id) {
  const el = open.get(id)
  open.delete(id)
  if (!el) return
  const [summary, text] = /** @type {HTMLElement[]} */ ([...el.children])
  el.dataset.state = 'done'
  summary.textContent = t('reasoningDone')
  if (!text.textContent) el.dataset.empty = ''
}

/** The run ended: no reasoning of it streams any more (a failure may have cut one off). */
export function endAll() {
  for (const id of [...open.keys()]) end(id)
}
