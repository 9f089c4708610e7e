// Hostcall widget: the "start a new conversation?" question, under the header. ↻ asks first:
// one click must not throw away a conversation (or an approval in progress). Imported by
// chat.js when ↻ is first pressed, not with the widget (the open widget's weight budget).

import { h, t } from './chat.js'

/** @type {HTMLElement | null} */
let question = null

/**
 * Show the question below `header`; Escape or Cancel is "no" (the focus goes back to ↻).
 * @param {HTMLElement} header @param {() => void} onNew
 */
export function ask(header, onNew) {
  const answer = (/** @type {boolean} */ yes) => {
    if (question) question.hidden = true
    yes ? onNew() : /** @type {HTMLElement} */ (header.querySelector('[data-part=new-conversation]'))?.focus()
  }
  question ??= h('div', { 'data-part': 'restart-confirm', role: 'group', 'aria-label': t('newConversation'),
    onkeydown: (/** @type {KeyboardEvent} */ e) => { if (e.key === 'Escape') { e.stopPropagation(); answer(false) } } },
  h('p', { text: t('restartAsk') }),
  h('div', { 'data-part': 'actions' },
    h('button', { type: 'button', 'data-part': 'restart-yes', 'data-kind': 'danger', onclick: () => answer(true) }, t('newConversation')),
    h('button', { type: 'button', 'data-part': 'restart-no', onclick: () => answer(false) }, t('cancel'))))
  if (question.previousElementSibling !== header) header.after(question)
  question.hidden = false; // keep the ';': the next line starts with '('
  /** @type {HTMLElement} */ (question.querySelector('[data-part=restart-no]')).focus()
}
