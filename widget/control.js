// Stop and Retry (docs/protocol.md): imported by app.js when the visitor first presses one,
// not with the widget (the open widget's weight budget).

/**
 * Retry (a new run over the conversation: nothing is sent twice) or Stop (the run and its
 * open calls end as `cancelled`; the stream's RUN_ERROR says so). A 409 means the run ended,
 * or another began, meanwhile: the stream tells that too.
 * @param {boolean} retry
 * @param {any} app app.js's state and helpers: state, api, cfg, ui, t, emit, refresh
 */
export async function control(retry, app) {
  const { state, api, cfg, ui, t, emit, refresh } = app
  const { run, conversationId: id } = state
  const next = retry ? 'running' : 'failed'
  if (retry === (run === 'running' || run === 'waiting')) return
  state.run = next
  refresh()
  try {
    await (retry ? api.retry(id, cfg.simulate === true) : api.stop(id, state.runId))
  } catch (err) {
    if (state.run === next) state.run = run
    if (err.status !== 409) ui.showError(t('errorRun'), retry ? () => control(true, app) : null)
    emit('error', { code: err.code || 'control_failed', message: err.message })
  } finally { refresh() }
}
