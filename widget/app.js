// Hostcall widget app: owns one conversation and its tokens; this page is one surface
// (docs/protocol.md, docs/architecture.md).

import { GONE, createApi, prefetch, randomHex, resumeKey, retry, storageKind } from './api.js'
import * as ui from './chat.js'
import { t, pickLocale, setLocale } from './chat.js'
import { LIMITS, MSG } from './protocol.js'

// ============================================================================
// Constants
// ============================================================================

// Messages between the widget and the page: MSG (widget/protocol.js); what each carries:
// hostcall/protocol/js_constants.py. Bridge.js speaks them in the host page.

// ============================================================================
// Configuration and state
// ============================================================================

/** Written by server/hostcall/pages.py. */
const cfg = JSON.parse(document.getElementById('hc-config')?.textContent || '{}')
/** The server's request body limit, in UTF-8 bytes (its setting; else the protocol's default). */
const maxBodyBytes = Number(cfg.maxBodyBytes) || LIMITS.MAX_BODY_BYTES
const framed = Boolean(cfg.parentOrigin) && window.parent !== window
/** @type {Map<string, {name: string, title?: string, description?: string}>} */
const agentTools = new Map((cfg.tools || []).map(tool => [tool.name, tool]))
const api = createApi(cfg.apiBase || '', cfg.agentId, framed ? cfg.parentOrigin : '', resumeKey(cfg.agentId))
const locale = pickLocale(cfg.locale, ...navigator.languages)
/** This page load's surface id: kept across stream reconnects, new on every load. */
const surfaceId = `s_${randomHex(12)}`

const state = {
  conversationId: '', streamToken: '', lastEventId: '', lastSeq: 0,
  run: '', // '' | running | waiting | finished | failed
  runId: '',
  streaming: '', // id of the assistant message being streamed
  ready: false,
  /** @type {{close: () => void} | null} */ stream: null,
  /** @type {string[]} */ outbox: [], // texts sent before we were ready: sent once we are
}
let parentTools = new Set()
let pageTools = '' // the page's WebMCP tools: bridge.js's JSON text
let idToken = '' // the page's visitor's: known.js acts on it (docs/identity.md)
let files // files.js's
const known = () => import('./known.js').then(k => k.go({ api, token: idToken, locale, restart, emit, toParent, cid: state.conversationId }))
/** Opening the person's conversation (identify, none held): a first message waits for it.
 * @type {Promise<unknown> | null} */
let identifying = null
let handshakeDone = () => {}
const handshake = new Promise(resolve => { handshakeDone = () => resolve(0) })

// ============================================================================
// Parent bridge
// ============================================================================

// One port goes with the hello, posted to the exact parent origin; nothing posted to this
// window is read (bench/README.md says why a port).
const channel = framed ? new MessageChannel() : null

// The page's events (and unread counts) go in order with the drawing of what they tell; the
// rest at once: a call overtakes them, and none is sent while the page's handler has one.
const later = []
function toParent(type, data) {
  const m = { type, ...data }
  if (type != MSG.EVENT && type != MSG.ATTENTION) channel?.port1.postMessage(m)
  else if (later.push(m) < 2) ui.write(() => later.splice(0).forEach(m => channel?.port1.postMessage(m)))
}

/** A Hostcall('on', …) event for the page; never carries tokens. */
const emit = (event, detail) => toParent(MSG.EVENT, { event, detail })

if (channel) channel.port1.onmessage = e => {
  const m = e.data
  if (typeof m?.type !== 'string') return
  if (m.type === MSG.HANDLERS) setParentTools(m.tools, m.token, m.pageTools)
  else if (m.type === MSG.RESULT) calls?.parentResult(m) // no calls loaded: not one of ours
  else if (m.type === MSG.SEND && typeof m.text === 'string') send(m.text)
  else if (m.type === MSG.FOCUS) ui.focusComposer()
  else if (m.type === MSG.ACTIVE) active() // the person is busy on the host page
  else if (m.type === MSG.CONTEXT) setContext(m.key, m.value, m.clone)
}

/** The handshake's answer, and any later change of the page's handlers. */
function setParentTools(list, token, page) {
  parentTools = new Set(Array.isArray(list) ? list.filter(n => typeof n === 'string').slice(0, 200) : [])
  pageTools = page
  if (typeof token == 'string' && token != idToken) {
    idToken = token
    // None held (nothing written, or signed out): open the person's, as at start.
    if (state.ready && state.conversationId) known()
    else if (state.ready) identifying = resume().catch(forget).finally(() => { identifying = null })
  }
  handshakeDone()
  if (state.conversationId) sendCapabilities()
}

/** Handler negotiation: tell the server which of the agent's tools this surface answers. */
async function sendCapabilities(strict = false) {
  const tools = framed ? [...parentTools].filter(name => agentTools.has(name)) : []
  // The page's WebMCP tools too, for an agent that admits them (pagetools.js).
  // Never `&&`: a `false` here makes `page?.offer(...)` a TypeError.
  const page = cfg.pageTools && framed ? await pageToolsJs() : null
  try {
    const res = await api.capabilities(state.conversationId, surfaceId, tools, page?.offer(pageTools))
    page?.refuse(res?.refused, emit)
  } catch (err) {
    if (strict) throw err
    console.warn('hostcall: capabilities', err)
  }
}

// ============================================================================
// Boot: resume the conversation, if any; a new one is made with the first message (start)
// ============================================================================

async function boot(fresh = false) {
  ui.setConnection('connecting')
  try {
    if (framed) await Promise.race([handshake, new Promise(r => setTimeout(r, 1500))])
    // A fresh start must not resume: the cookie still names the conversation being left,
    // and creating the new one replaces it.
    if (!fresh) await resume()
    ui.setConnection('open')
    state.ready = true
    toParent(MSG.READY)
    state.outbox.splice(0).forEach(send)
  } catch (err) {
    forget()
    ui.setConnection('open')
    ui.showError(t('errorStart'), boot)
    emit('error', { code: err.code || 'start_failed', message: String(err.message || err) })
  }
  refresh()
}

/** This browser's conversation, if it has one: the server's HttpOnly cookie, with the page's
 * resume key, remembers it. */
async function resume() {
  const resumed = await (idToken ? known() : api.resume()).catch(err => { if (!GONE.includes(err.status)) throw err })
  if (!resumed) return
  state.conversationId = resumed.conversationId
  state.streamToken = resumed.streamToken
  snapshots() // these two fetched while the snapshot is asked for
  events()
  // What this page handles first: a read whose page reloaded is assigned here at once,
  // and the snapshot writes this surface's calls to it (the claim), like its stream.
  const snapshot = await sendCapabilities(true).then(() => api.snapshot(resumed.conversationId, surfaceId)).catch(err => {
    if (!GONE.includes(err.status)) throw err
  })
  if (!snapshot) return forget()
  await applySnapshot(snapshot)
  follow()
}

async function start() {
  events() // fetched while the conversation is made
  const created = await api.create(locale)
  state.conversationId = created.conversationId
  state.streamToken = created.streamToken
  await sendCapabilities()
  follow()
}

// Tabs share the conversation: one another tab made (told once its first message is in, so
// that message's calls stay with its tab) is resumed here.
const tabs = new BroadcastChannel(`hostcall:${cfg.agentId}`)
tabs.onmessage = () => state.ready && !state.conversationId && !state.run && resume().catch(forget)

function forget() {
  api.forget()
  Object.assign(state, { conversationId: '', streamToken: '' })
}

/** Start a new conversation, leaving this one. */
function restart(fresh = true) {
  state.stream?.close() // and the events it held: they must not reach the new conversation
  calls?.clear()
  forget()
  Object.assign(state, { lastEventId: '', lastSeq: 0, run: '', streaming: '', ready: false, stream: null })
  ui.reset(cfg.greeting)
  refresh() // "starting" until the conversation is drawn: a test waiting for "idle" waits for it
  boot(fresh)
  ui.focusComposer()
}

// ============================================================================
// What loads when first needed (docs/architecture.md, "The widget's modules"): each feature's
// module, once, with its strings and styles. The idle chat is this module, chat.js, api.js,
// drawing.js, protocol.js and locale-xx.js; the rest is fetched by the first use.
// ============================================================================

/**
 * `load(query)` once, for every caller: retried patiently (a server restarting) for as long
 * as it takes, each try with a fresh `query` (a failed import stays failed for its URL, in
 * HTML's module map). @template T @param {(query: string) => Promise<T>} load
 */
function once(load) {
  /** @type {Promise<T> | null} */
  let loading = null
  return () => (loading ??= retry(n => load(n ? `?retry=${n}` : ''), patiently))
}
/** @param {number} n @param {unknown} err */
function patiently(n, err) {
  console.warn('hostcall: loading a module', err)
  return Math.min(250 * 2 ** n, 5000)
}

/** The conversation's event stream, and what each event does: events.js, fetched with the
 * conversation (while its request is on its way), not with an idle chat. */
const events = once(query => prefetch(['events.js', 'protocol-events.js']).then(() => import(`./events.js${query}`)))
async function follow() {
  const cid = state.conversationId
  const m = await events()
  // Not if the person left the conversation while events.js loaded; one stream at a time.
  if (cid !== state.conversationId) return
  state.stream?.close()
  state.stream = m.follow(live)
}

/** The conversation as the server has it, merged into what is shown: snapshot.js, fetched
 * with the snapshot (an idle chat has none). */
const snapshots = once(query => import(`./snapshot.js${query}`))
async function applySnapshot(snap) {
  return (await snapshots()).apply(snap, live)
}

/** @typedef {typeof import('./toolcalls.js')} Calls */
/** @type {Calls | null} */
let calls = null
/**
 * Tool calls: toolcalls.js and its files (events.js fetches them), with a run on a page that
 * answers the agent's tools, or the first call. Events wait for it, never drop.
 * @type {() => Promise<Calls>}
 */
const toolCalls = once(async query => (calls = await (await events()).loadCalls(query, ui, {
  api, surfaceId, agentTools, personTools: new Set(cfg.personTools || []), maxBodyBytes, hasHandler: name => framed && parentTools.has(name), toParent, emit, refresh, send,
})))

// people.js: ratings, a person of the team
/** @type {() => Promise<typeof import('./people.js')>} */
const loadPeople = once(async query => {
  const m = await import(`./people.js${query}`)
  m.attach(api, state, emit)
  return m
})
/** @param {string} id @param {string} [rating] */
const rate = (id, rating) => loadPeople().then(m => m.offer(id, rating))

/** The page's context: context.js, with the first value, for an agent that admits it (its
 * caps); another agent refuses it here, on the console and as an `error` event.
 * @type {Promise<ReturnType<typeof import('./context.js').createContext>> | null} */
let pageContext = null
const contexts = once(query => import(`./context.js${query}`))
function setContext(key, value, clone) {
  if (value == null && !clone && !pageContext) return // nothing set, nothing to remove
  if (cfg.pageContext) pageContext = (pageContext || contexts().then(m => m.createContext(cfg.pageContext, refuseContext))).then(c => (c.set(key, value, clone), c))
  else refuseContext({ key: String(key).slice(0, 64), reason: 'not_admitted', message: `page context "${key}" refused: this agent admits none (its file has no page_context block)` })
}
/** @param {import('./context.js').Refusal} refusal */
function refuseContext(refusal) {
  console.error(`Hostcall: ${refusal.message}`)
  emit('error', { code: 'page_context_refused', ...refusal })
}

const pageToolsJs = once(query => import(`./pagetools.js${query}`))

/** Retry and Stop, a failed run, a refused message: widget/control.js, fetched on first use
 * (and again, if that fetch failed). */
const app = { state, api, cfg, ui, t, emit, refresh }
/** @type {() => Promise<typeof import('./control.js')>} */
const troubles = once(query => Promise.all([import(`./control.js${query}`), ui.addStrings('control', query)]).then(([m]) => m))
const control = (/** @type {boolean} */ again) => troubles().then(m => m.control(again, app))

/** What events.js is lent to follow the conversation. @type {import('./events.js').App} */
const live = {
  state, api, surfaceId, ui, t, calls: () => calls, toolCalls, people: loadPeople, rate, applySnapshot, restart, refresh, toParent, emit,
  heard: (kind, d) => suggest?.then(f => f(kind, d)),
  answersTools: () => framed && [...parentTools].some(name => agentTools.has(name)),
  runFailed: d => {
    // Not if the person left the conversation while control.js loaded.
    const cid = state.conversationId
    troubles().then(m => cid === state.conversationId && m.runFailed(d, app))
  },
}

// ============================================================================
// This surface: its id, what the person does here, and when the page goes away
// ============================================================================

/** Report activity at most every 2 s: the server sends calls to the most recently active surface. */
let lastActivity = 0
function active() {
  const now = Date.now()
  if (!state.conversationId || now - lastActivity < 2000) return
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
  // Cut at 8000 UTF-16 units, never between an emoji's two halves: a lone surrogate is
  // text the server refuses (400 invalid_text).
  const text = String(raw).trim().slice(0, 8000).replace(/[\uD800-\uDBFF]$/, '')
  if (!text && !files?.size()) return
  // Still starting (a slow network): it goes, and shows, once boot is done.
  if (!state.ready) return void state.outbox.push(text)
  if (state.run === 'running' || state.run === 'waiting') return void ui.showError(t('errorBusy'))
  const pending = ui.addPendingUser(text)
  state.run = 'running'
  refresh()
  let made = false
  try {
    if (!state.conversationId && identifying) await identifying
    made = !state.conversationId
    if (made) await patient(start, pending, text)
    // The page's whole context, as it is now.
    const context = pageContext && (await pageContext).value()
    const sent = await patient(async () => api.message(state.conversationId, text, cfg.simulate === true, context, await files?.upload(state.conversationId, pending, text)), pending, text)
    state.runId = sent?.runId
    if (!sent?.runId) state.run = '' // held by a person
  } catch (err) {
    if (err === HALTED) return
    state.run = ''
    // Refused (a 4xx): control.js says why. Else the server is down or failing (503: its
    // database, for a moment): the message stays in the thread, with a retry.
    const cid = state.conversationId
    if (err.status >= 400 && err.status < 500) troubles().then(m => cid === state.conversationId && m.refused(err, pending, () => send(text), app))
    else {
      ui.markFailed(pending, () => send(text), err.status === 503 ? t('errorStore') : '')
      emit('error', { code: err.code || 'send_failed', message: err.message })
    }
  } finally {
    if (made && state.conversationId) tabs.postMessage(0)
    refresh()
  }
}

/** Stop, while a message waits for room: not sent. @type {(() => void) | null} */
let halt = null
const HALTED = {}
/** `f()` again while refused unread (503 overloaded), after its Retry-After (30 s at most). */
function patient(f, el, text) {
  const busy = ui.h('p', { 'data-part': 'message-busy', role: 'status' }, t('busy'))
  /** @type {(() => void) | null} */
  let stop = () => { stop = null; busy.remove(); state.run = ''; ui.markFailed(el, () => send(text)); refresh() }
  return retry(() => stop ? (halt = null, f()) : Promise.reject(HALTED),
    (_, e) => e.code == 'overloaded' ? (halt = stop, el.append(busy), Math.min(e.details.retryAfter, 30) * 1e3) : NaN)
    .finally(() => { busy.remove(); if (halt == stop) halt = null })
}

/** Sync the composer with the run; publish `data-agent-state` (docs/testing.md). */
function refresh() {
  const active = state.run === 'running' || state.run === 'waiting'
  const person = Boolean(calls?.needsPerson())
  ui.setWorking(state.ready && active && !person && !state.streaming)
  ui.setSendEnabled(state.ready && !active, state.ready && active)
  ui.setAgentState(!state.ready ? 'starting' : !active ? 'idle' : person ? 'waiting' : 'working')
}

// ============================================================================
// Start
// ============================================================================

await setLocale(locale).catch(console.error) // keys shown rather than nothing
const root = document.documentElement
root.dataset.theme = ['light', 'dark'].includes(cfg.theme) ? cfg.theme : 'auto'
root.dataset.mode = framed ? cfg.mode : 'standalone'
root.dataset.storage = storageKind() // local | cookie | memory
if (ui.phone()) root.dataset.viewport = 'phone' // touch-sized controls, no autofocus
if (/^#[0-9a-f]{3,8}$/i.test(cfg.accent)) {
  root.style.setProperty('--hc-accent', cfg.accent)
  root.style.setProperty('--hc-accent-fg', cfg.accentText) // black or white by contrast (server/hostcall/pages.py)
}
ui.mountShell(document.getElementById('hc-root'), {
  title: cfg.agentName || t('chat'),
  greeting: cfg.greeting || '',
  closable: framed && cfg.mode === 'bubble',
  onSend: send,
  onClose: () => toParent(MSG.CLOSE),
  onNew: restart,
  onHistory: () => import('./history.js').then(m => m.show(api, state, restart), () => ui.showError(t('errorRun'))),
  onStop: () => halt ? halt() : control(false),
  // Starting: the first message waits for the conversation (send), a second one is refused.
  blocked: () => state.ready || state.outbox.length ? t(calls?.needsPerson() ? 'hintPending' : 'errorBusy') : '',
})
document.addEventListener('keydown', e => {
  if (e.key === 'Escape' && framed && cfg.mode === 'bubble') toParent(MSG.CLOSE)
})
refresh()
if (channel) window.parent.postMessage({ type: MSG.HELLO, version: 2 }, cfg.parentOrigin, [channel.port2])
/** The conversation and session token this widget holds in memory: a test hook, readable
 * only by scripts of the widget's own origin (a module import inside its frame). */
export const currentSession = () => api.current()
// Starters, follow-ups, a rating: suggest.js, only for an agent whose file has them.
const suggest = cfg.suggest && import('./suggest.js').then(m => m.start(cfg.suggest, { locale, send, api, state }), err => (console.warn('hostcall: suggest', err), () => {}))
if (cfg.attachments) import('./files.js').then(m => { files = m.start(cfg.attachments, app) })

boot()
