// Hostcall widget: thumbs up or down, and an optional comment, on each reply of the agent
// (docs/embedding.md). Loaded by app.js with the first reply, with its strings
// (locale-xx-feedback.js) and styles (feedback.css): the first screen does not need it.
// The visitor may change their rating; the server keeps the latest (one per reply).

import { h, t, keepPinned, messageEl } from './chat.js'

const COMMENT_CHARS = 1000 // docs/protocol.md: the server's limit
const THUMB = 'M1 21h4V9H1zm22-11a2 2 0 0 0-2-2h-6.3l1-4.6v-.3c0-.4-.2-.8-.5-1.1L14.2 1 7.6 7.6C7.2 8 7 8.4 7 9v10a2 2 0 0 0 2 2h9c.8 0 1.5-.5 1.8-1.2l3-7.1.2-.7z'

/** @type {{feedback: (id: string, messageId: string, body: object) => Promise<any>}} */
let api
/** @type {() => string} */
let conversation = () => ''

/** @param {typeof api} client @param {() => string} conversationId */
export function attach(client, conversationId) {
  api = client
  conversation = conversationId
}

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
 * @param {string} id @param {string} [rating] */
export function offer(id, rating) {
  const el = messageEl(id)
  if (!el || el.querySelector('[data-part=feedback]')) return
  const status = h('p', { 'data-part': 'feedback-status', role: 'status' })
  const box = /** @type {HTMLTextAreaElement} */ (h('textarea', {
    'data-part': 'feedback-comment', rows: 2, maxlength: COMMENT_CHARS,
    'aria-label': t('feedbackComment'), placeholder: t('feedbackComment'),
  }))
  const form = h('form', { 'data-part': 'feedback-form', hidden: true, onsubmit: e => { e.preventDefault(); send(current, box.value) } },
    box, h('button', { type: 'submit', 'data-part': 'feedback-send' }, t('feedbackSend')))
  /** @type {Record<string, HTMLElement>} */
  const buttons = {}
  let current = rating || ''
  const show = () => {
    for (const [r, b] of Object.entries(buttons)) b.setAttribute('aria-pressed', String(r === current))
  }
  async function send(chosen, comment = '') {
    try {
      await api.feedback(conversation(), id, comment.trim() ? { rating: chosen, comment: comment.trim() } : { rating: chosen })
      current = chosen
      show()
      status.textContent = t('feedbackThanks')
      if (comment.trim()) form.hidden = true
      else form.hidden = false
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
  const bar = h('div', { 'data-part': 'feedback', role: 'group', 'aria-label': t('feedbackLabel') },
    h('div', { 'data-part': 'feedback-buttons' }, buttons.up, buttons.down, status), form)
  keepPinned(() => el.append(bar))
}
