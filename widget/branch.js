// Hostcall widget: the visitor edits their last message, or has the last answer written again
// (docs/protocol.md, `.../messages/{id}/edit` and `.../regenerate`): a new run on a branch,
// the old turn superseded on the server and taken out of the thread here. Loaded by
// events.js and snapshot.js when a run has ended, with its strings (locale-xx-branch.js)
// and styles (branch.css): the first screen needs none of it.

import { addStrings, append, focusComposer, h, keepPinned, removeMessage, t } from './chat.js'

// Strings and styles first: nothing of this module shows as keys or unstyled.
await Promise.all([addStrings('branch'), new Promise(resolve => document.head.append(h('link', {
  rel: 'stylesheet', href: new URL('branch.css', import.meta.url).href, onload: resolve, onerror: resolve,
})))])

/**
 * What this module uses of app.js.
 * @typedef {object} App
 * @property {{conversationId: string, run: string, runId: string}} state
 * @property {Pick<ReturnType<typeof import('./api.js').createApi>, 'call' | 'conv'>} api
 * @property {() => void} refresh sync the composer with the run
 * @property {(event: string, detail: any) => void} emit
 */

/** The last message of `role` in the thread, if the server has it. @param {string} role */
const last = role => /** @type {HTMLElement | undefined} */ ([...document.querySelectorAll(`[data-part=message][data-role=${role}][data-message-id]`)].pop())

/** Put the controls on the last turn, or take them away while a run goes on: with the
 * drawing of that turn (its answer may still wait to be drawn), the view kept at the end.
 * @param {App} app */
export const offer = app => keepPinned(() => {
  for (const el of document.querySelectorAll('[data-part=branch]')) el.remove()
  const { state } = app
  if (!state.conversationId || state.run === 'running' || state.run === 'waiting') return
  const asked = last('user')
  if (!asked) return
  const answer = last('assistant')
  asked.append(bar(h('button', { type: 'button', 'data-part': 'branch-edit', 'aria-label': t('branchEditLabel'), onclick: () => edit(app, asked) }, t('branchEdit'))))
  if (answer && asked.compareDocumentPosition(answer) & Node.DOCUMENT_POSITION_FOLLOWING) {
    const id = String(answer.dataset.messageId)
    answer.append(bar(h('button', { type: 'button', 'data-part': 'branch-regenerate', 'aria-label': t('branchRegenerateLabel'), onclick: () => branch(app, asked, id, 'regenerate') }, t('branchRegenerate'))))
  }
})

/** @param {HTMLElement} button */
const bar = button => h('div', { 'data-part': 'branch' }, button)

/** The edit form in place of the message's text: Enter sends, Escape puts it back.
 * @param {App} app @param {HTMLElement} asked */
function edit(app, asked) {
  const text = /** @type {HTMLElement} */ (asked.querySelector('[data-part=message-text]'))
  const controls = /** @type {HTMLElement} */ (asked.querySelector('[data-part=branch]'))
  const box = /** @type {HTMLTextAreaElement} */ (h('textarea', { 'data-part': 'branch-input', rows: 2, maxlength: 8000, 'aria-label': t('branchEditLabel') }))
  box.value = text.textContent || ''
  const back = () => { form.remove(); text.hidden = controls.hidden = false; controls.querySelector('button')?.focus() }
  const form = /** @type {HTMLFormElement} */ (h('form', {
    'data-part': 'branch-form',
    onsubmit: (/** @type {Event} */ e) => { e.preventDefault(); if (box.value.trim()) branch(app, asked, String(asked.dataset.messageId), 'edit', box.value.trim()) },
    onkeydown: (/** @type {KeyboardEvent} */ e) => {
      if (e.key === 'Escape') { e.stopPropagation(); back() }
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && e.target === box) { e.preventDefault(); form.requestSubmit() }
    },
  }, box, h('div', null,
    h('button', { type: 'button', 'data-part': 'branch-cancel', onclick: back }, t('branchCancel')),
    h('button', { type: 'submit', 'data-part': 'branch-send' }, t('branchSend')))))
  text.hidden = controls.hidden = true
  asked.append(form)
  box.focus()
}

/** Edit (with `text`) or regenerate; the turn from `asked` on leaves the thread once the
 * server started its new run, whose events draw the new turn.
 * @param {App} app @param {HTMLElement} asked @param {string} id @param {'edit' | 'regenerate'} how @param {string} [text] */
async function branch(app, asked, id, how, text) {
  const { api, state } = app
  for (const el of document.querySelectorAll('[data-part=branch] button, [data-part=branch-form] button')) /** @type {HTMLButtonElement} */ (el).disabled = true
  // What is there now, not what the new run's events may add while the request is out.
  /** @type {HTMLElement[]} */
  const turn = []
  for (let el = /** @type {Element | null} */ (asked); el; el = el.nextElementSibling) turn.push(/** @type {HTMLElement} */ (el))
  try {
    const started = await api.call('POST', api.conv(state.conversationId, `/messages/${encodeURIComponent(id)}/${how}`), text ? { text } : {})
    // Running, unless its RUN_STARTED (and maybe its end) came first on the stream.
    if (state.runId !== started.runId) Object.assign(state, { run: 'running', runId: started.runId })
    for (const el of turn) el.dataset.messageId ? removeMessage(el.dataset.messageId) : el.remove()
    app.refresh()
  } catch (err) {
    // The message as it was, with its controls again.
    asked.querySelector('[data-part=branch-form]')?.remove()
    const shown = /** @type {HTMLElement | null} */ (asked.querySelector('[data-part=message-text]'))
    if (shown) shown.hidden = false
    offer(app)
    refused(app, /** @type {any} */ (err), text)
  }
}

/** Why the server said no; a write that already ran offers a new message instead (with the
 * edited text, if any). @param {App} app @param {{code?: string, message?: string}} err @param {string} [text] */
function refused(app, err, text) {
  const done = err.code === 'write_already_ran'
  const el = h('div', { 'data-part': 'error', 'data-code': err.code || null, role: 'alert' },
    h('p', { text: t(done ? 'branchAlreadyHappened' : err.code === 'run_in_progress' ? 'errorBusy' : 'branchFailed') }),
    done && h('button', {
      type: 'button', 'data-part': 'branch-new',
      onclick: () => {
        el.remove()
        const input = /** @type {HTMLTextAreaElement | null} */ (document.querySelector('[data-part=composer-input]'))
        if (input && text) input.value = text
        focusComposer()
      },
    }, t('branchNew')))
  append(el)
  app.emit('error', { code: err.code || 'branch_failed', message: err.message })
}
