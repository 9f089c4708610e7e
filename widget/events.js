// Hostcall widget: a conversation's event stream (docs/protocol.md "Events"), kept open, and
// what each of its events does to what is shown, and the tool calls' files, fetched for the
// first. Imported by app.js with a conversation (one resumed, or made by the first message,
// while its request is on its way), not with an idle chat, which has no stream.

import { GONE, prefetch, retry, seqOf } from './api.js'
import { MSG } from './protocol.js'
import { CUSTOM, EVENT } from './protocol-events.js'

/** @typedef {typeof import('./toolcalls.js')} Calls */
/**
 * What this module reads and changes of app.js's state.
 * @typedef {object} StreamState
 * @property {string} conversationId
 * @property {string} streamToken the first stream's, from opening the conversation ('' used)
 * @property {string} lastEventId the last event applied
 * @property {number} lastSeq its number
 * @property {string} run '' | running | waiting | finished | failed
 * @property {string} runId
 * @property {string} streaming the assistant message being streamed ('' none)
 */
/**
 * app.js's state and helpers, as this module uses them.
 * @typedef {object} App
 * @property {StreamState} state
 * @property {ReturnType<typeof import('./api.js').createApi>} api
 * @property {string} surfaceId this page load's
 * @property {typeof import('./chat.js')} ui
 * @property {(key: string) => string} t
 * @property {() => Calls | null} calls toolcalls.js, if loaded
 * @property {() => Promise<Calls>} toolCalls toolcalls.js, loaded (and its strings, styles)
 * @property {() => boolean} answersTools whether this page answers some of the agent's tools
 * @property {() => Promise<typeof import('./people.js')>} people people.js, loaded
 * @property {(id: string, rating?: string) => void} rate offer a rating of an answer
 * @property {(snap: any) => Promise<void>} applySnapshot merge a snapshot into what is shown
 * @property {(d: {code: string, message: string}) => void} runFailed say that a run failed
 * @property {() => void} restart start a new conversation, leaving this one
 * @property {() => void} refresh sync the composer with the run
 * @property {(type: string, data?: object) => void} toParent a message to the host page
 * @property {(event: string, detail: object) => void} emit a Hostcall('on', …) event
 * @property {(kind: string, d?: object) => void} heard tell suggest.js (if loaded) of a reply or a hand-back
 */

/** The tool-call feature's files. form.js too: the result check needs it right after the
 * page's handler answers. */
const CALL_FILES = ['toolcalls.js', 'cards.js', 'calls.js', 'form.js', 'protocol-codes.js', 'calls.css']

/**
 * toolcalls.js, ready to use: its strings added and its styles applied first, so no card
 * shows keys or unstyled; its files fetched before it is imported (`prefetch`).
 * @param {string} query @param {typeof import('./chat.js')} ui
 * @param {import('./toolcalls.js').Context} context what app.js lends it
 * @returns {Promise<Calls>}
 */
export async function loadCalls(query, ui, context) {
  await prefetch([...CALL_FILES, `locale-${document.documentElement.lang}-calls.js`])
  const styles = new Promise(resolve => document.head.append(ui.h('link', {
    rel: 'stylesheet', href: new URL('calls.css', import.meta.url).href, onload: resolve, onerror: resolve,
  })))
  const [m] = await Promise.all([import(`./toolcalls.js${query}`), ui.addStrings('calls', query), styles])
  m.attach(context)
  return m
}

/**
 * Follow `app.state`'s conversation from its last event applied, until `close()`, which
 * also drops the events held for toolcalls.js (they are the conversation's being left).
 * @param {App} app @returns {{close: () => void}}
 */
export function follow(app) {
  const { state, api, surfaceId, ui } = app
  const { ON, ON_CALL } = handlers(app)
  /** Stream events that arrived while toolcalls.js was loading, in order. @type {[string, string][]} */
  const held = []

  /** The events URL: a fresh stream token, `after` the last event applied. @param {number} failures */
  async function url(failures) {
    // Every third failure, resync from the snapshot (say the log can't resume: bad_event_id).
    if (failures && failures % 3 === 0) await app.applySnapshot(await api.snapshot(state.conversationId, surfaceId))
    const token = state.streamToken || (await api.streamToken(state.conversationId)).streamToken
    state.streamToken = ''
    return api.eventsUrl(state.conversationId, token, state.lastEventId, surfaceId)
  }

  /** @param {string} s @param {number} failures @param {any} [err] */
  function onState(s, failures, err) {
    if (GONE.includes(err?.status)) {
      ui.setConnection('open')
      ui.showError(app.t('errorGone'), app.restart)
      return false
    }
    ui.setConnection(s === 'open' ? 'open' : failures ? 'down' : 'connecting')
  }

  /** @param {string} type @param {MessageEvent} e */
  function onEvent(type, e) {
    const seq = seqOf(e.lastEventId)
    if (seq && seq <= state.lastSeq) return // replayed: already applied
    if (seq) Object.assign(state, { lastSeq: seq, lastEventId: e.lastEventId })
    // The first call event waits for toolcalls.js, and every event after it waits in line
    // behind it: none is dropped, none overtakes another (a call at start-up, then its text).
    if (held.length || (!app.calls() && type in ON_CALL)) {
      held.push([type, e.data])
      if (held.length === 1) app.toolCalls().then(() => held.splice(0).forEach(([ty, data]) => apply(ty, data)))
      return
    }
    apply(type, e.data)
  }

  /** @param {string} type @param {string} data */
  function apply(type, data) {
    // Every event's JSON is an AG-UI event; Hostcall's own are CUSTOM, their payload in `value`.
    try {
      const d = JSON.parse(data)
      const value = d.type === EVENT.CUSTOM ? d.value : d
      const c = app.calls()
      ui.batch(() => type in ON_CALL ? c && ON_CALL[type](c, value) : ON[type]?.(value))
    } catch (err) { console.error('hostcall:', type, err) }
    ui.batch(app.refresh)
    // Nothing follows a run's end: its last words need not wait for quiet.
    if (type === EVENT.RUN_FINISHED || type === EVENT.RUN_ERROR) ui.burstEnd()
  }

  const stream = openStream({ url, types: [...Object.keys(ON), ...Object.keys(ON_CALL)], onEvent, onState })
  return { close() { stream.close(); held.length = 0 } }
}

/** The edit and regenerate controls of the last turn (branch.js): put there when a run
 * ends, taken away when one starts (once loaded; until then there are none). `app`: app.js's
 * `live`, as branch.js reads it. @param {{state: {run: string}}} app */
export function branches(app) {
  if (app.state.run !== 'running' || loadedBranch) import('./branch.js').then(m => { loadedBranch = true; m.offer(/** @type {any} */ (app)) }, console.warn)
}
let loadedBranch = false

/** A message's files (attach.js draws them): marked at once, so that a message of files
 * alone is shown, and kept when it ends with no text (chat.js). @param {HTMLElement | undefined} el
 * @param {import('./attach.js').Sent[] | undefined} sent @param {{api: import('./attach.js').Api}} app */
export function files(el, sent, app) {
  if (!el || !sent?.length) return
  el.dataset.files = String(sent.length)
  import('./attach.js').then(m => m.show(el, sent, app.api), console.warn)
}

/** What each event does: `ON`, by stream event (the SSE `event:` name: the AG-UI type, or a
 * CUSTOM event's name), with the event (a CUSTOM event's `value`); `ON_CALL`, the tool-call
 * events, handled once toolcalls.js (`c`) has loaded. @param {App} app */
function handlers(app) {
  const { state, ui } = app
  /** reasoning.js, once a reasoning began. @type {Promise<typeof import('./reasoning.js')> | null} */
  let reasoning = null
  /** @type {Record<string, (d: any) => void>} */
  const ON = {
    [EVENT.RUN_STARTED]: d => {
      ui.retireRetries()
      state.run = 'running'
      state.runId = d.runId
      // A page answering some of the agent's tools: fetch the call code while the model works.
      if (app.answersTools()) app.toolCalls()
      // An edit or a regeneration (here or in another tab): the old turn goes, as from a
      // snapshot, which has the new branch.
      if (d.parentRunId) app.api.snapshot(state.conversationId, app.surfaceId).then(app.applySnapshot, console.warn)
      branches(app)
    },
    [EVENT.RUN_FINISHED]: () => { state.run = 'finished'; reasoning?.then(m => m.endAll()); branches(app) },
    [EVENT.RUN_ERROR]: d => {
      state.run = 'failed'
      reasoning?.then(m => m.endAll())
      app.runFailed(d)
      branches(app)
    },
    [EVENT.TEXT_MESSAGE_START]: d => {
      const role = d.role === 'user' ? 'user' : 'assistant'
      if (!ui.hasMessage(d.messageId)) ui.upsertMessage(d.messageId, role)
      if (role === 'assistant') state.streaming = d.messageId
      files(ui.messageEl(d.messageId), d.attachments, app)
    },
    [EVENT.TEXT_MESSAGE_CONTENT]: d => ui.appendDelta(d.messageId, String(d.delta ?? '')),
    [EVENT.TEXT_MESSAGE_END]: d => {
      const { text, role } = ui.endMessage(d.messageId)
      if (state.streaming === d.messageId) state.streaming = ''
      if (!text) return
      if (role === 'assistant') { ui.announce(text); app.rate(d.messageId); app.heard('reply', { text }); app.toParent(MSG.ATTENTION) }
      app.emit('message', { messageId: d.messageId, role, text })
    },
    // A server crash cut this message off; the step runs again and streams the answer anew.
    [CUSTOM.TEXT_MESSAGE_DISCARDED]: d => {
      ui.removeMessage(d.messageId)
      if (state.streaming === d.messageId) state.streaming = ''
    },
  }
  // The model's reasoning: reasoning.js's, each event in order, shown where its start came.
  for (const type of [EVENT.REASONING_START, EVENT.REASONING_MESSAGE_CONTENT, EVENT.REASONING_END]) {
    ON[type] = d => {
      const spot = type === EVENT.REASONING_START ? ui.reserve() : null
      ;(reasoning ??= import('./reasoning.js')).then(m => m.on(type, d, spot))
    }
  }
  // A person of the team: people.js's; what it shows counts as unread while the chat is closed.
  // A person handing the conversation back ends their part: suggest.js may ask for a rating.
  for (const name of Object.values(CUSTOM)) if (name.includes('person')) ON[name] = d => app.people().then(m => {
    if (m.on(name, d)) app.toParent(MSG.ATTENTION)
    if (name === CUSTOM.PERSON_LEFT) app.heard('handedBack') // after its notice
  })
  /** @type {Record<string, (c: Calls, d: any) => void>} */
  const ON_CALL = {
    [EVENT.TOOL_CALL_START]: (c, d) => c.start(d),
    [EVENT.TOOL_CALL_ARGS]: (c, d) => c.addArgs(d),
    [EVENT.TOOL_CALL_END]: (c, d) => c.endArgs(d),
    [CUSTOM.TOOL_CALL_APPROVAL_REQUESTED]: (c, d) => { state.run = 'waiting'; c.upsertCall(d) },
    [CUSTOM.TOOL_CALL_DISPATCH]: (c, d) => { state.run = 'waiting'; c.upsertCall(d) },
    [CUSTOM.TOOL_CALL_STATE]: (c, d) => c.callState(d),
    [EVENT.TOOL_CALL_RESULT]: (c, d) => c.result(d),
  }
  return { ON, ON_CALL }
}

/**
 * Keep one EventSource open. On any error it is closed and reopened from `url(failures)`
 * (a fresh stream token, `after` the last event) with backoff. Do not leave this to
 * EventSource's own retry: it reuses a URL whose token expires, and stops on a non-200.
 * `onState` returning false stops for good.
 * @param {{url: (failures: number) => Promise<string>, types: readonly string[],
 *   onEvent: (type: string, e: MessageEvent) => void,
 *   onState: (state: string, failures: number, err?: any) => boolean | void}} o
 */
export function openStream(o) {
  /** @type {EventSource | null} */
  let es = null
  let closed = false

  /** One stream, until its first error. @param {number} failures @param {() => void} opened */
  async function connect(failures, opened) {
    if (closed) return
    o.onState('connecting', failures)
    const url = await o.url(failures)
    if (closed) return
    await new Promise((_, reject) => {
      const source = (es = new EventSource(url))
      source.onopen = () => { opened(); o.onState('open', 0) }
      source.onerror = () => { source.close(); reject() }
      for (const type of o.types) source.addEventListener(type, e => es === source && o.onEvent(type, /** @type {MessageEvent} */ (e)))
    })
  }

  retry(connect, (n, err) => {
    if (closed || o.onState('down', n + 1, err) === false) return void (closed = true)
    return Math.min(8000, 200 * 2 ** (n + 1)) + Math.random() * 200
  }).catch(() => {}) // stopped for good, as onState asked
  return { close() { closed = true; es?.close() } }
}
