// Hostcall widget: the tool calls in the thread — one view per call, moved only by
// widget/calls.js's state machine: its card, the page's handler (over app.js's bridge), the
// confirmation, and the form where a person supplies a result. app.js imports this module
// when the first call event arrives and holds the stream's events until it has (the
// weight budget: the first screen never needs it). A handler runs once per page load.

import { retry } from './api.js'
import { EVENT as CALL_EVENT, PERSON, STATE, placement, transition } from './calls.js'
import { confirmPanel, readable, rejectPanel, toolCard } from './cards.js'
import * as ui from './chat.js'
import { MSG } from './protocol.js'
import { CALL_STATE, TERMINAL_STATES } from './protocol-codes.js'

const t = ui.t

/**
 * @typedef {{toolCallId: string, toolCallName: string, state: string, input?: any,
 *   inputSchema?: any, outputSchema?: any, deadline?: string, route?: string, kind?: string,
 *   formReason?: string, approval?: {scopes: string[]}, resultToken?: string, pageTool?: boolean,
 *   decisionToken?: string, outcome?: any, view?: any, app?: any}} Call  (docs/protocol.md CALL)
 * @typedef {{id: string, call: Call, card: import('./cards.js').Card, args: string, state: string,
 *   scope: string, resolveParent: Function | null}} CallView  (state: widget/calls.js STATE)
 * @typedef {import('./form.js').FieldError} FieldError
 */
/**
 * What app.js lends this module.
 * @typedef {object} Context
 * @property {Pick<ReturnType<typeof import('./api.js').createApi>, 'call' | 'current'>} api
 * @property {string} surfaceId this page load's
 * @property {Map<string, {title?: string, description?: string}>} agentTools the agent's tools, by name
 * @property {Set<string>} personTools the agent's built-in tools that ask for a person
 * @property {number} maxBodyBytes the server's request body limit, in UTF-8 bytes
 * @property {(name: string) => boolean} hasHandler whether the page answers this tool
 * @property {(type: string, data?: object) => void} toParent a message to the host page
 * @property {(event: string, detail: object) => void} emit a Hostcall('on', …) event
 * @property {() => void} refresh sync the composer with the run
 * @property {(text: string) => void} send a visitor message (a result view's button)
 */

// ============================================================================
// What app.js lends, and the calls of this conversation
// ============================================================================

/** @type {Context['api']} */ let api
/** @type {string} */ let surfaceId
/** @type {Context['agentTools']} */ let agentTools
/** @type {Context['personTools']} */ let personTools
/** @type {number} */ let maxBodyBytes
/** @type {Context['hasHandler']} */ let hasHandler
/** @type {Context['toParent']} */ let toParent
/** @type {Context['emit']} */ let emit
/** @type {Context['refresh']} */ let refresh
/** @type {Context['send']} */ let send
/** @param {Context} context */
export function attach(context) {
  ({ api, surfaceId, agentTools, personTools, maxBodyBytes, hasHandler, toParent, emit, refresh, send } = context)
  // Imported now (app.js fetched it with this module), beside the call's first events:
  // the handler's result waits for its check otherwise.
  forms().catch(console.error)
}

/** POST a call's `result` or `decision` (docs/protocol.md). @param {'result' | 'decision'} what
 * @param {string} callId @param {object} body */
const callApi = (what, callId, body) => api.call('POST', `/api/calls/${encodeURIComponent(callId)}/${what}`, body)

/** @type {Map<string, CallView>} */
const calls = new Map()
const utf8 = new TextEncoder()
const TERMINAL = new Set(TERMINAL_STATES)
/** Server call state → card `data-state` (running, waiting, done, failed, rejected, expired). */
const cardState = (/** @type {string} */ st) => ({ awaiting_confirmation: 'waiting', answered: 'done' })[st] || (TERMINAL.has(st) ? st : 'running')

/** Whether a person has something to do in a card (the working indicator hides). */
/** Whether call `id` has its card. @param {string} id */
export const has = id => calls.has(id)
export const needsPerson = () => [...calls.values()].some(v => PERSON.has(v.state))

/** The page's handler answered (MSG.RESULT). */
export const parentResult = (/** @type {any} */ m) => calls.get(String(m.callId))?.resolveParent?.(m)

/** A new conversation: stop the page's handlers of this one, forget its calls. */
export function clear() {
  appModule?.then(m => m.closeAll())
  calls.forEach(cancelParent)
  calls.clear()
}

/** The stream's tool-call events (app.js's ON_CALL sends them here). */
export const start = (/** @type {any} */ d) => void view(d.toolCallId, d.toolCallName)
export const addArgs = (/** @type {any} */ d) => { view(d.toolCallId).args += String(d.delta ?? '') }
export function endArgs(/** @type {any} */ d) {
  const v = calls.get(d.toolCallId)
  if (v && v.call.input === undefined && !forPerson(v)) try { v.card.setInput(JSON.parse(v.args)) } catch { /* malformed: the server says so */ }
}
export function callState(/** @type {any} */ d) {
  const v = calls.get(d.toolCallId)
  if (v && TERMINAL.has(d.state)) settle(v, d.state)
  else if (v) v.call.state = d.state
}
export function result(/** @type {any} */ d) {
  const v = view(d.toolCallId)
  if (d.view) v.call.view = d.view
  if (d.app) v.call.app = d.app
  settle(v, d.state || (d.outcome?.error ? CALL_STATE.FAILED : CALL_STATE.ANSWERED), d.outcome)
  emit('toolresult', { callId: v.id, toolName: v.call.toolCallName, state: v.call.state, outcome: v.call.outcome })
}

/** @type {Promise<typeof import('./form.js')> | null} */
let formModule = null
/**
 * The schema forms and validator (form.js): fetched when the first call appears, before it
 * is needed, and fetched again (a fresh URL: a failed import stays failed) if the server was
 * down then. Their styles and strings came with this module (calls.css, locale-xx-calls.js).
 */
const forms = () => (formModule ??= retry(
  n => import(`./form.js${n ? `?retry=${n}` : ''}`),
  n => (n < 6 ? 250 * 2 ** n : undefined),
).catch(err => { formModule = null; throw err }))

const publicCall = c => ({ callId: c.toolCallId, toolName: c.toolCallName, input: c.input, state: c.state, route: c.route })

// ============================================================================
// One view per call; its state is widget/calls.js's, moved only by move()
// ============================================================================

/** Move call view `v` by `event`; false (and nothing changes) if its state ignores it. */
function move(v, event) {
  const next = transition(v.state, event)
  if (next === null) return false
  v.state = next
  return true
}

/** The card's note for the errors that are not a failure of the tool. @type {Record<string, string>} */
const ERROR_NOTES = { cancelled: 'stoppedNote', operator_cancelled: 'operatorCancelledNote', operator_ended: 'operatorEndedNote' }

/** What end users see for a tool: its `title` from the agent file, not its id; for the
 * built-in person tool, what it does (its input is the model's words to the team). */
const titleOf = (/** @type {string} */ name) => personTools.has(name) ? t('askingPerson') : agentTools.get(name)?.title || name
const forPerson = (/** @type {CallView} */ v) => personTools.has(v.call.toolCallName) || v.call.kind === 'person'

/** The view of call `id`, created with its card on first sight. */
function view(id, name = '?') {
  let v = calls.get(id)
  if (!v) {
    v = {
      id, call: { toolCallId: id, toolCallName: name, state: 'proposed' }, args: '',
      state: STATE.PROPOSED, scope: 'once', card: toolCard(id, name, titleOf(name)), resolveParent: null,
    }
    v.card.setState('running')
    calls.set(id, v)
    forms().catch(console.error) // ready before a form or a result check needs it
  }
  return v
}

/** A CALL object, from the snapshot or an event. */
export function upsertCall(c) {
  if (typeof c?.toolCallId !== 'string') return
  const v = view(c.toolCallId, c.toolCallName)
  v.call = { ...v.call, ...c }
  // A server-side tool's title comes with its call (the page's config lists client tools).
  if (forPerson(v)) v.card.setTitle(t('askingPerson'))
  else if (c.title) v.card.setTitle(c.title)
  if (TERMINAL.has(c.state)) settle(v, c.state, c.outcome)
  else if (c.state === CALL_STATE.AWAITING_CONFIRMATION) { if (move(v, CALL_EVENT.APPROVAL_REQUESTED)) showConfirm(v) }
  else if (c.state === CALL_STATE.DISPATCHED || c.state === CALL_STATE.DELIVERED) place(v) // the page's handler first
  if (c.input !== undefined && !forPerson(v)) v.card.setInput(c.input, c.inputSchema)
}

/**
 * A dispatched call: the server assigned it to one surface (docs/protocol.md "Surfaces").
 * If that is this one, the assignment is the claim: run the handler now, no request first.
 */
function place(v) {
  const c = v.call
  if (c.kind && c.kind !== 'client') return // the server runs it; its result event follows
  if (!move(v, placement(c, surfaceId))) return
  if (v.state === STATE.ELSEWHERE) {
    v.card.setState('running', t('runningElsewhere'))
    v.card.setBody()
    return void v.card.show()
  }
  if (v.state === STATE.FORM) return showAnswerForm(v, { note: c.formReason === 'surface_gone' ? t('answerSurfaceGone') : undefined })
  runInParent(v)
}

/** The call reached a terminal state. */
function settle(v, st, outcome) {
  cancelParent(v)
  const again = v.state === STATE.SETTLED
  move(v, CALL_EVENT.SETTLE)
  v.call.state = st
  if (outcome !== undefined) v.call.outcome = outcome
  else if (again) return
  const oc = v.call.outcome
  // A translated sentence for each way a call ends, never a code, a page's exception or an
  // upstream body: those are the model's and the operator's (docs/embedding.md).
  const error = !oc?.error ? '' : t(ERROR_NOTES[oc.error.code] || 'toolFailed')
  const reason = oc?.error?.reason // the person's own words, not the message written for the model
  const note = st === CALL_STATE.EXPIRED ? t('expiredNote') : st !== CALL_STATE.REJECTED ? error : reason ? t('rejectedNote', { reason }) : ''
  // Stopped or ended by a person: not the tool's failure.
  v.card.setState(ERROR_NOTES[oc?.error?.code] ? 'stopped' : cardState(st), note)
  const details = oc && 'output' in oc && !forPerson(v)
    ? ui.h('details', { 'data-part': 'tool-call-result' }, ui.h('summary', { text: t('result') }), readable(oc.output, v.call.outputSchema))
    : null
  v.card.setBody(details)
  v.card.show()
  if (v.call.view && details) drawView(v, oc, details)
  if (v.call.app) showApp(v)
}

/** @type {Promise<typeof import('./apps.js')> | null} */
let appModule = null
/** The call's MCP Apps view (apps.js, fetched again if it failed), beside its text result. */
async function showApp(v) {
  const m = await (appModule ??= import('./apps.js').catch(err => { appModule = null; throw err }))
  let input = v.call.input
  if (input === undefined) try { input = JSON.parse(v.args) } catch { /* none */ }
  if (calls.get(v.id) === v) m.show(v.card.el, { ...v.call, input }, { api, send, emit, title: v.call.title || titleOf(v.call.toolCallName) })
}

/** @type {Promise<typeof import('./views.js')> | null} */
let viewModule = null
/** The result's view above its values, once views.js is here (fetched again if it failed). */
async function drawView(v, oc, details) {
  const m = await (viewModule ??= import('./views.js').catch(err => { viewModule = null; throw err }))
  // Still this outcome: a later one (another result, a new conversation) draws its own.
  if (v.call.outcome === oc && calls.get(v.id) === v) v.card.setBody(m.draw(v.call.view, titleOf(v.call.toolCallName), send), details)
}

const running = v => v.state === STATE.RUNNING || v.state === STATE.RERUNNING

/**
 * How long the thread's drawing waits for a call the page's handler has (ms): until its answer
 * has been sent and the server has replied, at most this long (then anything waiting is
 * drawn, and the card shows: cards.js SHOW_WITHIN_MS). A person notices no shorter wait.
 */
const HOLD_MS = 100

/**
 * The page's handler runs the call; its checked result is sent. The call goes to the page
 * first, and nothing in the thread is drawn until its answer has been sent and answered (at
 * most HOLD_MS): no frame runs between the call and its result to hold the answer up, nor
 * beside the server while it takes the answer. The page's `toolcall` event
 * follows the call, behind it on the way to the page.
 */
async function runInParent(v) {
  const c = v.call
  // A page tool (WebMCP) was assigned here for the page holds it: bridge.js looks it up.
  if (!c.pageTool && !hasHandler(c.toolCallName)) {
    emit('toolcall', publicCall(c))
    move(v, CALL_EVENT.NO_HANDLER)
    return showAnswerForm(v, { note: t('answerNoHandler') })
  }
  const release = ui.hold(HOLD_MS)
  try { await handOver(v) } finally { release() }
}

/** Hand call view `v` to the page's handler and send its checked answer. */
async function handOver(v) {
  const c = v.call
  const reply = new Promise(resolve => {
    v.resolveParent = resolve
    toParent(MSG.CALL, {
      callId: c.toolCallId, toolName: c.toolCallName, input: c.input,
      inputSchema: c.inputSchema, outputSchema: c.outputSchema, deadline: c.deadline, pageTool: c.pageTool,
    })
  })
  emit('toolcall', publicCall(c))
  v.card.setState('running', t(v.state === STATE.RERUNNING ? 'rerunning' : 'runningInPage'))
  v.card.setBody()
  const res = await reply
  v.resolveParent = null
  if (!running(v) || res.cancelled) return
  if (c.pageTool && 'output' in res) res.output = pageResult(res.output)
  // A page tool gone since, with no output schema for a person to answer by: no_handler.
  if (res.noHandler && c.pageTool && !c.outputSchema) return answer(v, { error: { code: 'no_handler', message: 'The page no longer has this tool.' } })
  if (res.noHandler) {
    move(v, CALL_EVENT.NO_HANDLER)
    return showAnswerForm(v, { note: t('answerNoHandler') })
  }
  if (res.error !== undefined) {
    const message = String(res.error?.message ?? res.error).slice(0, 2000) || 'The handler failed.'
    return answer(v, { error: { code: 'client_error', message } })
  }
  // Bytes, as the server counts them: a non-ASCII result is larger than its length says.
  const size = utf8.encode(JSON.stringify({ token: c.resultToken, output: res.output ?? null })).length
  if (size > maxBodyBytes) {
    return answer(v, { error: { code: 'client_error', message: `The handler's result is too large (${size} bytes; the limit is ${maxBodyBytes}).` } })
  }
  const errors = (await forms()).validate(c.outputSchema ?? {}, res.output)
  if (errors.length) {
    move(v, CALL_EVENT.INVALID)
    return showAnswerForm(v, { value: res.output, errors, note: t('answerInvalid'), returned: res.output })
  }
  return answer(v, { output: res.output })
}

/**
 * A page tool's result, from WebMCP's executeTool: the JSON text of what the tool returned,
 * or a string it returned as is (Chromium), which the agent gets as `{text}`.
 * @param {unknown} out
 */
function pageResult(out) {
  try { out = JSON.parse(String(out)) } catch { /* not JSON: text */ }
  return typeof out === 'string' ? { text: out } : out ?? null
}

/** Stop waiting for the page's handler; the page aborts its ctx.signal. */
function cancelParent(v) {
  if (!v.resolveParent) return
  toParent(MSG.CANCEL, { callId: v.id })
  v.resolveParent({ cancelled: true })
  v.resolveParent = null
}

/** POST the answer; resolves to field errors when the form that sent it should show them. */
async function answer(v, body) {
  const c = v.call
  const fromForm = v.state === STATE.FORM
  if (!move(v, CALL_EVENT.SEND)) return
  // The request first (fetch starts it now), then the card: rendering waits for no answer.
  const sending = patiently(() => callApi('result', c.toolCallId, { token: c.resultToken, ...body }))
  v.card.busy(true)
  v.card.setState('running', t('sending')) // stays while the answer is retried (server down)
  v.card.show()
  try {
    await sending
    if (!move(v, CALL_EVENT.SENT)) return
    v.card.setState('running', t('sent'))
    v.card.setBody()
    ui.focusComposer()
  } catch (err) {
    if (v.state !== STATE.SENDING) return
    if (err.status === 409 || err.status === 410) {
      move(v, CALL_EVENT.SENT) // settled by another answer (another tab, a person): its result follows
      v.card.setState(err.status === 410 ? 'expired' : 'running', t(err.status === 410 ? 'expiredNote' : 'alreadySettled'))
      return v.card.setBody()
    }
    const errors = err.status === 422 && Array.isArray(err.details?.errors)
      ? serverErrors(err.details.errors)
      : [{ path: '', message: err.status === 422 ? err.message : t('errorAnswer') }]
    if (fromForm) { move(v, CALL_EVENT.FORM_REFUSED); return errors }
    if (err.status === 422 && 'output' in body) {
      move(v, CALL_EVENT.INVALID)
      return showAnswerForm(v, { value: body.output, errors, note: t('answerInvalid'), returned: body.output })
    }
    move(v, CALL_EVENT.SEND_FAILED)
    v.card.setState('failed', t('errorAnswer'))
    v.card.setBody(ui.h('button', { type: 'button', 'data-part': 'retry', onclick: () => answer(v, body) }, t('retry')))
  } finally {
    v.card.busy(false)
    refresh()
  }
}

/** The output-schema form: a person supplies the result. */
async function showAnswerForm(v, o) {
  const c = v.call
  const state = v.state
  const { schemaForm, fromInput } = await forms()
  if (v.state !== state) return // moved on while the form module loaded
  const name = titleOf(c.toolCallName)
  const form = schemaForm(c.outputSchema ?? {}, 'value' in o ? o.value : fromInput(c), {
    purpose: 'answer',
    label: t('answerFor', { name }),
    submitLabel: t('submitAnswer'),
    onSubmit: output => answer(v, { output }),
    actions: [{ part: 'decline', label: t('decline'), onClick: () => answer(v, { error: { code: 'no_handler', message: 'The person declined to answer this call.' } }) }],
  })
  const description = agentTools.get(c.toolCallName)?.description
  toParent(MSG.ATTENTION)
  v.card.setState('waiting', o.note || t('answerPrompt'))
  v.card.show()
  v.card.setBody(
    description && ui.h('p', { 'data-part': 'tool-description', text: description }),
    'returned' in o && ui.h('details', { 'data-part': 'handler-output' },
      ui.h('summary', { text: t('returned') }), ui.h('pre', { text: json(o.returned) })),
    form.el)
  if (o.errors?.length) form.showErrors(o.errors)
  ui.announce(t('needsAnswer', { name }))
  ui.phone() || maybeFocus(form.focus)
  refresh()
}

// ============================================================================
// Confirmation: approve (once or for this conversation), edit, reject with a reason
// ============================================================================

function showConfirm(v) {
  toParent(MSG.ATTENTION)
  v.card.setState('waiting')
  v.card.show()
  const panel = confirmPanel({
    scopes: v.call.approval?.scopes || ['once'],
    scope: v.scope,
    onScope: scope => { v.scope = scope },
    onApprove: () => decide(v, { decision: 'approve', scope: v.scope }),
    onEdit: () => { if (move(v, CALL_EVENT.EDIT)) showEdit(v) },
    onReject: () => { if (move(v, CALL_EVENT.REJECT)) showReject(v) },
  })
  v.card.setBody(panel)
  emit('toolcall', publicCall(v.call))
  ui.announce(t('needsConfirm', { name: titleOf(v.call.toolCallName) }))
  maybeFocus(() => v.card.focus('approve'))
  refresh()
}

async function showEdit(v) {
  const state = v.state
  const { schemaForm } = await forms()
  if (v.state !== state) return // moved on while the form module loaded
  const back = () => { if (move(v, CALL_EVENT.BACK)) { showConfirm(v); v.card.focus('edit') } }
  const form = schemaForm(v.call.inputSchema ?? {}, v.call.input, {
    purpose: 'edit',
    label: t('editFor', { name: titleOf(v.call.toolCallName) }),
    submitLabel: t('approveEdited'),
    onSubmit: input => decide(v, { decision: 'approve', scope: v.scope, input }),
    actions: [{ part: 'cancel', label: t('cancel'), onClick: back }],
  })
  form.el.addEventListener('keydown', e => { if (e.key === 'Escape') { e.stopPropagation(); back() } })
  v.card.setBody(form.el)
  ui.phone() || (ui.flushWrites(), form.focus())
}

function showReject(v) {
  const panel = rejectPanel({
    onConfirm: reason => decide(v, reason ? { decision: 'reject', reason } : { decision: 'reject' }),
    onCancel: () => { if (move(v, CALL_EVENT.BACK)) { showConfirm(v); v.card.focus('reject') } },
  })
  v.card.setBody(panel.el)
  ui.flushWrites()
  panel.focus()
}

/**
 * POST the person's decision, naming this surface: the server runs an approved call here.
 * Resolves to field errors for the edit form.
 */
async function decide(v, body) {
  const from = v.state
  if (!move(v, CALL_EVENT.DECIDE)) return
  v.card.busy(true)
  try {
    const res = await patiently(() => callApi('decision', v.call.toolCallId, { token: v.call.decisionToken, surfaceId, ...body }))
    // The dispatch or result event got here first; the pressed button is gone with the
    // old card state, so focus would fall to <body>.
    if (v.state !== STATE.DECIDING) return void maybeFocus(ui.focusComposer)
    move(v, CALL_EVENT.DECIDED)
    const rejected = res?.state === CALL_STATE.REJECTED
    const note = rejected ? '' : t(body.scope === 'conversation' ? 'approvedForConversation' : 'approved')
    v.card.setState(rejected ? 'rejected' : 'running', note)
    v.card.setBody()
    ui.focusComposer()
  } catch (err) {
    if (v.state !== STATE.DECIDING) return
    if (err.status === 409 || err.status === 410) {
      move(v, CALL_EVENT.DECIDED)
      v.card.setState(err.status === 410 ? 'expired' : 'running', t(err.status === 410 ? 'expiredNote' : 'alreadyDecided'))
      return v.card.setBody()
    }
    if (err.status === 422 && 'input' in body && Array.isArray(err.details?.errors)) {
      move(v, CALL_EVENT.EDIT_REFUSED)
      return serverErrors(err.details.errors)
    }
    if (from === STATE.EDIT) {
      move(v, CALL_EVENT.EDIT_REFUSED)
      return [{ path: '', message: t('errorDecision') }]
    }
    move(v, CALL_EVENT.DECIDE_FAILED)
    showConfirm(v)
    v.card.setState('waiting', t('errorDecision'))
  } finally {
    v.card.busy(false)
    refresh()
  }
}

/** A 422's `details.errors` (`{path, message}`) as form errors. @param {any[]} errors */
const serverErrors = errors => errors.slice(0, 50).map(x => ({ path: x?.path === '/' ? '' : String(x?.path ?? ''), message: String(x?.message) })) // JSON Pointers


/**
 * Retry through network errors and 5xx (a server restarting) for ~15 s. Only for requests
 * safe to repeat: a second answer or decision gets a 409, read as "settled".
 * @template T @param {() => Promise<T>} request @returns {Promise<T>}
 */
const patiently = request => retry(request, (n, err) => (n < 6 && !(err.status && err.status < 500) ? 250 * 2 ** n : undefined))

/** Move focus to a new prompt only if the person is not busy elsewhere. */
function maybeFocus(focus) {
  const el = /** @type {HTMLTextAreaElement | null} */ (document.activeElement)
  const part = el?.dataset?.part
  if (!el || el === document.body || part === 'messages' || (part === 'composer-input' && !el.value)) setTimeout(() => { ui.flushWrites(); focus() })
}

function json(v) {
  try { return String(JSON.stringify(v, null, 2)).slice(0, 20000) } catch { return String(v) }
}
