// Hostcall widget app (issue 3): owns one conversation (docs/protocol.md) and is the only
// party that sees tokens. A client-side call goes to the page's handler over postMessage
// (only with the parent origin the server bound here and window.parent), else to a form.
// This page is one *surface* (docs/protocol.md): the server assigns each call to one surface,
// and writing the dispatch to this surface's stream is the claim, so the handler runs at
// once, with no request first. A call assigned elsewhere shows "running in another tab".
// A call's life here is widget/calls.js's state machine; a handler runs once per page load.

import { createApi, openStream, store } from './api.js'
import * as ui from './chat.js'
import { STATE, EVENT as CALL_EVENT, PERSON, transition, placement } from './calls.js'
import { t, pickLocale, setLocale } from './chat.js'
import { CALL_STATE, CUSTOM, EVENT, LIMITS, MSG, TERMINAL_STATES } from './protocol.js'

/**
 * @typedef {{toolCallId: string, toolCallName: string, state: string, input?: any,
 *   inputSchema?: any, outputSchema?: any, deadline?: string, route?: string,
 *   resultToken?: string, decisionToken?: string, outcome?: any}} Call  (docs/protocol.md CALL)
 * @typedef {{id: string, call: Call, card: import('./chat.js').Card, args: string, state: string,
 *   scope: string, resolveParent: Function | null}} CallView  (state: widget/calls.js STATE)
 * @typedef {import('./form.js').FieldError} FieldError
 */

// ============================================================================
// Constants
// ============================================================================

/**
 * The schema forms and validator, with their styles and strings: a third of the widget's
 * weight that the first screen never uses (issue 12's budget). Fetched when the first call
 * appears, before it is needed, and fetched again (a fresh URL: a failed import stays failed)
 * if the server was down then.
 * @returns {Promise<typeof import('./form.js')>}
 */
let formModule = null
function forms(attempt = 0) {
  if (formModule) return formModule
  const query = attempt ? `?retry=${attempt}` : ''
  if (!attempt) document.head.append(ui.h('link', { rel: 'stylesheet', href: new URL('form.css', import.meta.url).href }))
  return (formModule = Promise.all([import(`./form.js${query}`), ui.addStrings('form', query)]).then(([m]) => m, err => {
    formModule = null
    if (attempt === 6) throw err
    return new Promise(resolve => setTimeout(resolve, 250 * 2 ** attempt)).then(() => forms(attempt + 1))
  }))
}

// Messages between the widget and the page (MSG, from widget/protocol.js; bridge.js speaks
// them in the host page):
//   HELLO     widget → page: I am up; tell me your handlers
//   HANDLERS  page → widget: {tools: [names]}, again whenever they change
//   READY     widget → page: conversation loaded, stream open
//   CALL      widget → page: {callId, toolName, input, inputSchema, outputSchema, deadline}
//   RESULT    page → widget: {callId, output} | {callId, error: {message}} | {callId, noHandler}
//   CANCEL    widget → page: {callId}: settled elsewhere or expired; abort ctx.signal
//   SEND      page → widget: {text}: send as the user
//   FOCUS     page → widget: the panel opened; focus the composer
//   CLOSE     widget → page: close the panel (close button, Escape)
//   EVENT     widget → page: {event, detail} for Hostcall('on', …)

const TERMINAL = new Set(TERMINAL_STATES)
/** Server call state → card `data-state` (running, waiting, done, failed, rejected, expired). */
const cardState = (/** @type {string} */ st) => ({ awaiting_confirmation: 'waiting', answered: 'done' })[st] || (TERMINAL.has(st) ? st : 'running')
const GONE = [401, 403, 404] // the session or conversation no longer exists

// ============================================================================
// Configuration and state
// ============================================================================

/** Written by server/pages.py. */
const cfg = JSON.parse(document.getElementById('hc-config')?.textContent || '{}')
/** The server's request body limit, in UTF-8 bytes (its setting; else the protocol's default). */
const maxBodyBytes = Number(cfg.maxBodyBytes) || LIMITS.MAX_BODY_BYTES
const utf8 = new TextEncoder()
const framed = Boolean(cfg.parentOrigin) && window.parent !== window
/** @type {Map<string, {name: string, description: string}>} */
const agentTools = new Map((cfg.tools || []).map(tool => [tool.name, tool]))
const api = createApi(cfg.apiBase || '', cfg.agentId, framed ? cfg.parentOrigin : '')
const locale = pickLocale(cfg.locale, ...navigator.languages)
/** This page load's surface id: kept across stream reconnects, new on every load. */
const surfaceId = `s_${[...crypto.getRandomValues(new Uint8Array(12))].map(b => b.toString(16).padStart(2, '0')).join('')}`

const state = {
  conversationId: '', streamToken: '', lastEventId: '', lastSeq: 0,
  run: '', // '' | running | waiting | finished | failed
  streaming: '', // id of the assistant message being streamed
  lastUserText: '',
  ready: false,
  /** @type {{close: () => void} | null} */ stream: null,
  /** @type {string[]} */ outbox: [], // texts the page sent before we were ready
}
/** @type {Map<string, CallView>} */
const calls = new Map()
let parentTools = new Set()
let handshakeDone = () => {}
const handshake = new Promise(resolve => { handshakeDone = () => resolve(0) })

// ============================================================================
// Parent bridge
// ============================================================================

function toParent(type, data) {
  if (framed) window.parent.postMessage({ type, ...data }, cfg.parentOrigin)
}

/** A Hostcall('on', …) event for the page; never carries tokens. */
const emit = (event, detail) => toParent(MSG.EVENT, { event, detail })

const publicCall = c => ({ callId: c.toolCallId, toolName: c.toolCallName, input: c.input, state: c.state, route: c.route })

window.addEventListener('message', e => {
  const m = e.data
  if (!framed || e.origin !== cfg.parentOrigin || e.source !== window.parent || typeof m?.type !== 'string') return
  if (m.type === MSG.HANDLERS) setParentTools(m.tools)
  else if (m.type === MSG.RESULT) calls.get(String(m.callId))?.resolveParent?.(m)
  else if (m.type === MSG.SEND && typeof m.text === 'string') state.ready ? send(m.text) : state.outbox.push(m.text)
  else if (m.type === MSG.FOCUS) ui.focusComposer()
  else if (m.type === MSG.ACTIVE) active() // the person is busy on the host page
})

/** The handshake's answer, and any later change of the page's handlers. */
function setParentTools(list) {
  parentTools = new Set(Array.isArray(list) ? list.filter(n => typeof n === 'string').slice(0, 200) : [])
  handshakeDone()
  if (state.conversationId) sendCapabilities()
}

/** Handler negotiation: tell the server which of the agent's tools this surface answers. */
async function sendCapabilities(strict = false) {
  const tools = framed ? [...parentTools].filter(name => agentTools.has(name)) : []
  try { await api.capabilities(state.conversationId, surfaceId, tools) } catch (err) {
    if (strict) throw err
    console.warn('hostcall: capabilities', err)
  }
}

// ============================================================================
// Boot: restore or create the conversation, then follow its stream
// ============================================================================

async function boot(fresh = false) {
  ui.setConnection('connecting')
  try {
    if (framed) await Promise.race([handshake, new Promise(r => setTimeout(r, 1500))])
    let snapshot = null
    // The server's HttpOnly cookie, not our storage, remembers the conversation (issue 7).
    // A fresh start must not resume it: the cookie still names the conversation being left,
    // and creating the new one replaces it.
    const resumed = fresh ? null : await api.resume().catch(err => { if (!GONE.includes(err.status)) throw err })
    if (resumed) {
      state.conversationId = resumed.conversationId
      state.streamToken = resumed.streamToken
      // What this page handles first: a read whose page reloaded is assigned here at once,
      // and the snapshot writes this surface's calls to it (the claim), like its stream.
      snapshot = await sendCapabilities(true).then(() => api.snapshot(resumed.conversationId, surfaceId)).catch(err => {
        if (!GONE.includes(err.status)) throw err
      })
    }
    if (!snapshot) {
      const created = await api.create(locale)
      state.conversationId = created.conversationId
      state.streamToken = created.streamToken
      await sendCapabilities()
    }
    if (snapshot) applySnapshot(snapshot)
    state.stream = openStream({ url: streamUrl, types: Object.keys(ON), onEvent, onState: onStreamState })
    state.ready = true
    toParent(MSG.READY)
    state.outbox.splice(0).forEach(send)
  } catch (err) {
    ui.setConnection('open')
    ui.showError(t('errorStart'), boot)
    emit('error', { code: err.code || 'start_failed', message: String(err.message || err) })
  }
  refresh()
}

/** The events URL: a fresh stream token, `after` the last event applied. */
async function streamUrl(failures) {
  // Every third failure, resync from the snapshot (say the log can't resume: bad_event_id).
  if (failures && failures % 3 === 0) applySnapshot(await api.snapshot(state.conversationId, surfaceId))
  const token = state.streamToken || (await api.streamToken(state.conversationId)).streamToken
  state.streamToken = ''
  return api.eventsUrl(state.conversationId, token, state.lastEventId, surfaceId)
}

function onStreamState(s, failures, err) {
  if (GONE.includes(err?.status)) {
    ui.setConnection('open')
    ui.showError(t('errorGone'), restart)
    return false
  }
  ui.setConnection(s === 'open' ? 'open' : failures ? 'down' : 'connecting')
}

/** Start a new conversation, leaving this one. */
function restart() {
  state.stream?.close()
  calls.forEach(cancelParent)
  calls.clear()
  api.forget()
  Object.assign(state, { conversationId: '', streamToken: '', lastEventId: '', lastSeq: 0, run: '', streaming: '', ready: false, stream: null })
  ui.reset(cfg.greeting)
  boot(true)
  ui.focusComposer()
}

/** "c_…:42" → 42 */
function seqOf(id = '') {
  return Number(id.slice(id.lastIndexOf(':') + 1)) || 0
}

/** Render the conversation as the server has it, merged into what is shown. */
function applySnapshot(snap) {
  if (seqOf(snap.lastEventId) >= state.lastSeq) {
    state.lastEventId = snap.lastEventId || ''
    state.lastSeq = seqOf(snap.lastEventId)
  }
  state.run = snap.run?.status || ''
  /** @type {Map<string, Call>} */
  const byId = new Map((snap.calls || []).map((/** @type {Call} */ c) => [c.toolCallId, c]))
  for (const m of snap.messages || []) {
    if ((m.role === 'user' || m.role === 'assistant') && m.text) ui.upsertMessage(m.id, m.role, m.text)
    for (const id of m.toolCallIds || []) {
      upsertCall(byId.get(id))
      byId.delete(id)
    }
  }
  byId.forEach(upsertCall)
  ui.scrollToEnd()
  // The snapshot may be all there is (a run that finished while the stream was down):
  // no later event will come to update the composer.
  refresh()
}

// ============================================================================
// Stream events
// ============================================================================

function onEvent(type, e) {
  const seq = seqOf(e.lastEventId)
  if (seq && seq <= state.lastSeq) return // replayed: already applied
  if (seq) Object.assign(state, { lastSeq: seq, lastEventId: e.lastEventId })
  // Every event's JSON is an AG-UI event; Hostcall's own are CUSTOM, their payload in `value`.
  try {
    const d = JSON.parse(e.data)
    ON[type]?.(d.type === EVENT.CUSTOM ? d.value : d)
  } catch (err) { console.error('hostcall:', type, err) }
  refresh()
}

/** Stream event (the SSE `event:` name: the AG-UI type, or a CUSTOM event's name) → what it
 * does with the event (a CUSTOM event's `value`). @type {Record<string, (d: any) => void>} */
const ON = {
  [EVENT.RUN_STARTED]: () => { state.run = 'running' },
  [EVENT.RUN_FINISHED]: () => { state.run = 'finished' },
  [EVENT.RUN_ERROR]: d => {
    state.run = 'failed'
    const text = state.lastUserText
    // A short sentence in the visitor's language, never the server's detail (issue 12: that
    // is in the operator's log); the code goes to the page's `error` listeners.
    ui.showError(t(/^model_(unreachable|timeout|http_error)$/.test(d.code) ? 'errorUnavailable' : 'errorRun'), text ? () => send(text) : null)
    emit('error', { code: d.code, message: d.message })
  },
  [EVENT.TEXT_MESSAGE_START]: d => {
    const role = d.role === 'user' ? 'user' : 'assistant'
    if (!ui.hasMessage(d.messageId)) ui.upsertMessage(d.messageId, role)
    if (role === 'assistant') state.streaming = d.messageId
  },
  [EVENT.TEXT_MESSAGE_CONTENT]: d => ui.appendDelta(d.messageId, String(d.delta ?? '')),
  [EVENT.TEXT_MESSAGE_END]: d => {
    const { text, role } = ui.endMessage(d.messageId)
    if (state.streaming === d.messageId) state.streaming = ''
    if (!text) return
    if (role === 'assistant') ui.announce(text)
    emit('message', { messageId: d.messageId, role, text })
  },
  [EVENT.TOOL_CALL_START]: d => view(d.toolCallId, d.toolCallName),
  [EVENT.TOOL_CALL_ARGS]: d => { view(d.toolCallId).args += String(d.delta ?? '') },
  [EVENT.TOOL_CALL_END]: d => {
    const v = calls.get(d.toolCallId)
    if (v && v.call.input === undefined) try { v.card.setInput(JSON.parse(v.args)) } catch { /* malformed: the server says so */ }
  },
  [CUSTOM.TOOL_CALL_APPROVAL_REQUESTED]: d => { state.run = 'waiting'; upsertCall(d) },
  [CUSTOM.TOOL_CALL_DISPATCH]: d => { state.run = 'waiting'; upsertCall(d) },
  // A server crash cut this message off; the step runs again and streams the answer anew.
  [CUSTOM.TEXT_MESSAGE_DISCARDED]: d => {
    ui.removeMessage(d.messageId)
    if (state.streaming === d.messageId) state.streaming = ''
  },
  [CUSTOM.TOOL_CALL_STATE]: d => {
    const v = calls.get(d.toolCallId)
    if (v && TERMINAL.has(d.state)) settle(v, d.state)
    else if (v) v.call.state = d.state
  },
  [EVENT.TOOL_CALL_RESULT]: d => {
    const v = view(d.toolCallId)
    settle(v, d.state || (d.outcome?.error ? CALL_STATE.FAILED : CALL_STATE.ANSWERED), d.outcome)
    emit('toolresult', { callId: v.id, toolName: v.call.toolCallName, state: v.call.state, outcome: v.call.outcome })
  },
}

// ============================================================================
// Tool calls: one view per call; its state is widget/calls.js's, moved only by move()
// ============================================================================

/** Move call view `v` by `event`; false (and nothing changes) if its state ignores it. */
function move(v, event) {
  const next = transition(v.state, event)
  if (next === null) return false
  v.state = next
  return true
}

/** What end users see for a tool: its `title` from the agent file, not its id. */
const titleOf = (/** @type {string} */ name) => agentTools.get(name)?.title || name

/** The view of call `id`, created with its card on first sight. */
function view(id, name = '?') {
  let v = calls.get(id)
  if (!v) {
    v = {
      id, call: { toolCallId: id, toolCallName: name, state: 'proposed' }, args: '',
      state: STATE.PROPOSED, scope: 'once', card: ui.toolCard(id, name, titleOf(name)), resolveParent: null,
    }
    v.card.setState('running')
    calls.set(id, v)
    forms().catch(console.error) // ready before a form or a result check needs it
  }
  return v
}

/** A CALL object, from the snapshot or an event. */
function upsertCall(c) {
  if (typeof c?.toolCallId !== 'string') return
  const v = view(c.toolCallId, c.toolCallName)
  v.call = { ...v.call, ...c }
  if (c.input !== undefined) v.card.setInput(c.input, c.inputSchema)
  if (TERMINAL.has(c.state)) settle(v, c.state, c.outcome)
  else if (c.state === CALL_STATE.AWAITING_CONFIRMATION) { if (move(v, CALL_EVENT.APPROVAL_REQUESTED)) showConfirm(v) }
  else if (c.state === CALL_STATE.DISPATCHED || c.state === CALL_STATE.DELIVERED) place(v)
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
    return void v.card.setBody()
  }
  if (v.state === STATE.FORM) return showAnswerForm(v, { note: c.formReason === 'surface_gone' ? t('answerSurfaceGone') : undefined })
  emit('toolcall', publicCall(c))
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
    // The page's own words for a handler that threw; for anything else a translated sentence,
  // never a raw code or an upstream body (the model gets those).
  const error = !oc?.error ? '' : oc.error.code === 'client_error' && oc.error.message ? String(oc.error.message) : t('toolFailed')
  const reason = oc?.error?.reason // the person's own words, not the message written for the model
  const note = st === CALL_STATE.EXPIRED ? t('expiredNote') : st !== CALL_STATE.REJECTED ? error : reason ? t('rejectedNote', { reason }) : ''
  v.card.setState(cardState(st), note)
  v.card.setBody(oc && 'output' in oc
    ? ui.h('details', { 'data-part': 'tool-call-result' }, ui.h('summary', { text: t('result') }), ui.readable(oc.output, v.call.outputSchema))
    : null)
}

const running = v => v.state === STATE.RUNNING || v.state === STATE.RERUNNING

async function runInParent(v) {
  const c = v.call
  v.card.setState('running', t(v.state === STATE.RERUNNING ? 'rerunning' : 'runningInPage'))
  v.card.setBody()
  if (!framed || !parentTools.has(c.toolCallName)) {
    move(v, CALL_EVENT.NO_HANDLER)
    return showAnswerForm(v, { note: t('answerNoHandler') })
  }
  const res = await new Promise(resolve => {
    v.resolveParent = resolve
    toParent(MSG.CALL, {
      callId: c.toolCallId, toolName: c.toolCallName, input: c.input,
      inputSchema: c.inputSchema, outputSchema: c.outputSchema, deadline: c.deadline,
    })
  })
  v.resolveParent = null
  if (!running(v) || res.cancelled) return
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
  answer(v, { output: res.output })
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
  v.card.busy(true)
  v.card.setState('running', t('sending')) // stays while the answer is retried (server down)
  try {
    await patiently(() => api.result(c.toolCallId, { token: c.resultToken, ...body }))
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
  const { schemaForm } = await forms()
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
  v.card.setState('waiting', o.note || t('answerPrompt'))
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
  v.card.setState('waiting')
  const panel = ui.confirmPanel({
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
  ui.phone() || form.focus()
}

function showReject(v) {
  const panel = ui.rejectPanel({
    onConfirm: reason => decide(v, reason ? { decision: 'reject', reason } : { decision: 'reject' }),
    onCancel: () => { if (move(v, CALL_EVENT.BACK)) { showConfirm(v); v.card.focus('reject') } },
  })
  v.card.setBody(panel.el)
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
    const res = await patiently(() => api.decision(v.call.toolCallId, { token: v.call.decisionToken, surfaceId, ...body }))
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

// ============================================================================
// This surface: its id, what the person does here, and when the page goes away
// ============================================================================

/** Report activity at most every 2 s: the server sends calls to the most recently active surface. */
let lastActivity = 0
function active() {
  const now = Date.now()
  if (!state.ready || now - lastActivity < 2000) return
  lastActivity = now
  api.activity(state.conversationId, surfaceId).catch(() => { /* best effort */ })
}
for (const type of ['pointerdown', 'keydown', 'focus']) window.addEventListener(type, active, { capture: true, passive: true })
document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'visible') active() })
// Reload, navigation, closed tab: give this page's calls up now (a read runs again on the
// next page; a write goes to the form), rather than after the server's grace period.
window.addEventListener('pagehide', () => { if (state.conversationId) api.leave(state.conversationId, surfaceId) })
// Back from the back/forward cache: that surface left; come back as a new page load.
window.addEventListener('pageshow', e => { if (e.persisted) location.reload() })

// ============================================================================
// Sending, chrome, focus
// ============================================================================

async function send(raw) {
  const text = String(raw).trim().slice(0, 8000)
  if (!text) return
  if (state.run === 'running' || state.run === 'waiting') return void ui.showError(t('errorBusy'))
  const pending = ui.addPendingUser(text)
  state.run = 'running'
  state.lastUserText = text
  refresh()
  try {
    await api.message(state.conversationId, text, cfg.simulate === true)
  } catch (err) {
    state.run = ''
    if (err.status === 409) return void (pending.remove(), ui.showError(t('errorBusy')))
    if (err.status === 422) return void (pending.remove(), ui.showError(err.message))
    // The server is down or unreachable: the message stays in the thread, with a retry.
    ui.markFailed(pending, () => send(text))
    emit('error', { code: err.code || 'send_failed', message: err.message })
  } finally { refresh() }
}

/**
 * Retry through network errors and 5xx (a server restarting) for ~15 s. Only for requests
 * safe to repeat: a second answer or decision gets a 409, read as "settled".
 * @template T @param {() => Promise<T>} request @returns {Promise<T>}
 */
async function patiently(request) {
  for (let attempt = 0; ; attempt++) {
    try { return await request() } catch (err) {
      if (attempt === 6 || (err.status && err.status < 500)) throw err
      await new Promise(resolve => setTimeout(resolve, 250 * 2 ** attempt))
    }
  }
}

/**
 * Sync the working indicator and the send button with the run, and publish the agent's
 * state on the root for tests and pages (README: `data-agent-state`): starting, idle (the
 * agent has finished; a message can be sent), working, waiting (a person must act).
 */
function refresh() {
  const active = state.run === 'running' || state.run === 'waiting'
  const person = [...calls.values()].some(v => PERSON.has(v.state))
  ui.setWorking(state.ready && active && !person && !state.streaming)
  ui.setSendEnabled(state.ready && !active)
  document.documentElement.dataset.agentState = !state.ready ? 'starting' : !active ? 'idle' : person ? 'waiting' : 'working'
}

/** Move focus to a new prompt only if the person is not busy elsewhere. */
function maybeFocus(focus) {
  const el = /** @type {HTMLTextAreaElement | null} */ (document.activeElement)
  const part = el?.dataset?.part
  if (!el || el === document.body || part === 'messages' || (part === 'composer-input' && !el.value)) setTimeout(focus)
}

/** A starting answer: scalar fields the input shares with the output (create_task's title). */
function fromInput(c) {
  const props = c.outputSchema?.properties || {}
  const input = c.input && typeof c.input === 'object' ? c.input : {}
  return Object.fromEntries(Object.entries(input).filter(([k, x]) =>
    k in props && typeof x !== 'object' && (props[k].type === typeof x || props[k].type === undefined)))
}

function json(v) {
  try { return String(JSON.stringify(v, null, 2)).slice(0, 20000) } catch { return String(v) }
}

// ============================================================================
// Start
// ============================================================================

await setLocale(locale).catch(console.error) // keys shown rather than nothing
const root = document.documentElement
root.dataset.theme = ['light', 'dark'].includes(cfg.theme) ? cfg.theme : 'auto'
root.dataset.mode = framed ? cfg.mode : 'standalone'
root.dataset.storage = store.kind // local | cookie | memory: where the call ledger lives
if (ui.phone()) root.dataset.viewport = 'phone' // touch-sized controls, no autofocus
if (/^#[0-9a-f]{3,8}$/i.test(cfg.accent)) {
  root.style.setProperty('--hc-accent', cfg.accent)
  root.style.setProperty('--hc-accent-fg', cfg.accentText) // black or white by contrast (server/pages.py)
}
ui.mountShell(document.getElementById('hc-root'), {
  title: cfg.agentName || t('chat'),
  greeting: cfg.greeting || '',
  closable: framed && cfg.mode === 'bubble',
  onSend: send,
  onClose: () => toParent(MSG.CLOSE),
  onNew: restart,
  blocked: () => t([...calls.values()].some(v => PERSON.has(v.state)) ? 'hintPending' : 'errorBusy'),
})
document.addEventListener('keydown', e => {
  if (e.key === 'Escape' && framed && cfg.mode === 'bubble') toParent(MSG.CLOSE)
})
refresh()
toParent(MSG.HELLO, { version: 1 })
/** The conversation and session token this widget holds in memory: a test hook, readable
 * only by scripts of the widget's own origin (a module import inside its frame). */
export const currentSession = () => api.current()

boot()
