// Stop and Retry (docs/protocol.md), and what the visitor is told when a run fails or the
// server refuses a message: imported by app.js when first needed, not with the widget (the
// open widget's weight budget). The server answered by then, so this module can be fetched.

/** @typedef {import('./api.js').ApiError} ApiError */
/** @typedef {ReturnType<typeof import('./api.js').createApi>} Api */
/**
 * What this module reads and changes of app.js's state.
 * @typedef {object} RunState
 * @property {string} conversationId
 * @property {string} runId the latest run's: the one Stop stops
 * @property {string} run '' | running | waiting | finished | failed
 */
/**
 * app.js's state and helpers, as this module uses them.
 * @typedef {object} App
 * @property {RunState} state
 * @property {Pick<Api, 'call' | 'conv'>} api
 * @property {{simulate?: boolean}} cfg the widget's configuration (its page's hc-config)
 * @property {typeof import('./chat.js')} ui
 * @property {(key: string) => string} t
 * @property {(event: string, detail: {code: string, message: string}) => void} emit the page API's
 * @property {() => void} refresh sync the composer with the run
 */

/**
 * Retry (a new run over the conversation: nothing is sent twice) or Stop (the run and its
 * open calls end as `cancelled`; the stream's RUN_ERROR says so). A 409 means the run ended,
 * or another began, meanwhile: the stream tells that too.
 * @param {boolean} retry
 * @param {App} app
 */
export async function control(retry, app) {
  const { state, api, cfg, ui, t, emit, refresh } = app
  const { run, conversationId: id } = state
  const next = retry ? 'running' : 'failed'
  if (retry === (run === 'running' || run === 'waiting')) return
  state.run = next
  refresh()
  try {
    await (retry ? api.call('POST', api.conv(id, '/retry'), { simulate: cfg.simulate === true })
      : api.call('POST', api.conv(id, `/runs/${encodeURIComponent(state.runId)}/stop`), {}))
  } catch (err) {
    if (state.run === next) state.run = run
    if (retry && err.code === 'overloaded') {
      // Refused unread (the server is too busy: docs/deploy.md, "Back-pressure"): said so,
      // and asked again after its Retry-After (30 s at most), as app.js sends a message.
      ui.showError(t('busy'), null, true)
      const notes = document.querySelectorAll('[data-part=error]')
      const note = notes[notes.length - 1]
      setTimeout(() => { note.remove(); if (id === state.conversationId) control(true, app) }, Math.min(err.details.retryAfter, 30) * 1e3)
      return
    }
    if (err.status !== 409) ui.showError(t('errorRun'), retry ? () => control(true, app) : null)
    emit('error', { code: err.code || 'control_failed', message: err.message })
  } finally { refresh() }
}

/**
 * A RUN_ERROR: a short sentence in the visitor's language, never the server's detail (that
 * is in the operator's log), with Retry; the code goes to the page's `error` listeners.
 * @param {{code: string, message: string}} d @param {App} app
 */
export function runFailed(d, app) {
  const { ui, t, emit } = app
  const sentence = d.code === 'store_unavailable' ? 'errorStore' : d.code === 'cancelled' ? 'stopped'
    : d.code === 'operator_cancelled' ? 'errorOperatorCancelled'
    : /^model_(unreachable|timeout|http_error)$/.test(d.code) ? 'errorUnavailable' : 'errorRun'
  ui.batch(() => ui.showError(t(sentence), () => control(true, app), /cancelled$/.test(d.code)))
  emit('error', { code: d.code, message: d.message })
}

/**
 * The server refused a message (a 4xx; app.js keeps the failures where this module may not
 * load). The English detail goes to the page's `error` event; the visitor gets a translated
 * sentence.
 * @param {ApiError} err @param {HTMLElement} pending the message shown
 * @param {() => void} again send it again @param {App} app
 */
export function refused(err, pending, again, app) {
  const { ui, t, emit } = app
  // A file refused: attach.js said why, by the file, and gave the text back to the composer.
  if (/** @type {any} */ (err).said) return void emit('error', { code: err.code, message: err.message })
  const drop = (/** @type {string} */ key) => { pending.remove(); ui.showError(t(key)) }
  let code = err.code
  // The conversation has spent its model budget (docs/protocol.md: 409
  // conversation_limit_reached): only a new one goes on, from the header's button.
  if (code === 'conversation_limit_reached') drop('errorConversationLimit')
  else if (err.status === 409) return drop('errorBusy')
  // 422: the server refused the text itself (docs/protocol.md: invalid_message), or 400
  // invalid_text (a NUL, a lone surrogate: sending it again cannot help).
  else if (err.status === 422 || code === 'invalid_text') {
    drop('errorRefused')
    code ||= 'invalid_message'
  } else {
    ui.markFailed(pending, again) // any other refusal stays in the thread, with a retry
    code ||= 'send_failed'
  }
  emit('error', { code, message: err.message })
}
