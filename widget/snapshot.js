// Hostcall widget: the conversation as the server has it (its snapshot, docs/protocol.md),
// merged into what is shown: when a conversation is resumed (a reload, another tab's), and
// when the stream cannot resume. Imported by app.js with the snapshot's request, not with an
// idle chat, which has no conversation to resume.

import { seqOf } from './api.js'
import { branches, files } from './events.js'

/** @typedef {typeof import('./toolcalls.js')} Calls */
/** @typedef {import('./toolcalls.js').Call} Call */
/**
 * A snapshot, as this module reads it (docs/protocol.md).
 * @typedef {object} Snapshot
 * @property {string} [conversationId]
 * @property {string} [lastEventId] the last event it includes
 * @property {{status: string, runId: string} | null} [run] the latest run
 * @property {{id: string, role: string, text?: string, name?: string, feedback?: string,
 *   toolCallIds?: string[], supersededBy?: string, reasoning?: string,
 *   attachments?: import('./attach.js').Sent[]}[]} [messages] (`supersededBy`: an old branch's;
 *   `reasoning`: what the model reasoned before it; `attachments`: a visitor's message's files)
 * @property {Call[]} [calls]
 * @property {string} [person] the person of the team holding the conversation
 * @property {{score: number, remark: string} | null} [rating] the visitor's rating of it, given once
 */
/**
 * What this module reads and changes of app.js's state.
 * @typedef {object} StreamState
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
 * @property {typeof import('./chat.js')} ui
 * @property {() => Calls | null} calls toolcalls.js, if loaded
 * @property {() => Promise<Calls>} toolCalls toolcalls.js, loaded (and its strings, styles)
 * @property {() => Promise<typeof import('./people.js')>} people people.js, loaded
 * @property {(id: string, rating?: string) => void} rate offer a rating of an answer
 * @property {() => void} refresh sync the composer with the run
 * @property {(kind: string, d?: object) => void} heard tell suggest.js (if loaded) of the conversation
 */

/** Draw `snap` into what is shown. @param {Snapshot} snap @param {App} app */
export async function apply(snap, app) {
  const { state, ui } = app
  // The current branch only: an edit or a regeneration superseded the rest (and its calls).
  const messages = (snap.messages || []).filter(m => !m.supersededBy)
  const old = new Set((snap.messages || []).flatMap(m => m.supersededBy ? m.toolCallIds || [] : []))
  const c = snap.calls?.length ? await app.toolCalls() : app.calls()
  if (seqOf(snap.lastEventId) >= state.lastSeq) {
    state.lastEventId = snap.lastEventId || ''
    state.lastSeq = seqOf(snap.lastEventId)
    // Up to there the snapshot is the whole story (a discarded message is not in it; one
    // still streaming comes again from its start).
    ui.keepMessages(new Set(messages.map(m => m.id)))
    if (state.streaming && !ui.hasMessage(state.streaming)) state.streaming = ''
    // Only a snapshot as new as the stream says how the run is: one fetched before a
    // RUN_FINISHED the stream has applied since would make the run look running for good.
    state.run = snap.run?.status || ''
    state.runId = snap.run?.runId || ''
  }
  // Superseded stays superseded: the old branch goes however old the snapshot.
  for (const m of snap.messages || []) if (m.supersededBy) ui.removeMessage(m.id)
  const byId = new Map((snap.calls || []).filter(x => !old.has(x.toolCallId)).map(x => [x.toolCallId, x]))
  for (const m of messages) {
    // What the model reasoned first, drawn before it: only where this thread lacks it.
    if (m.reasoning != null && !ui.hasMessage(m.id) && !m.toolCallIds?.some(id => c?.has(id))) {
      const spot = ui.reserve()
      import('./reasoning.js').then(r => r.restore(spot, String(m.reasoning)))
    }
    if (m.text || m.attachments?.length) ui.upsertMessage(m.id, m.role, m.text)
    files(ui.messageEl(m.id), m.attachments, app)
    if (m.role === 'assistant' && m.text) app.rate(m.id, m.feedback)
    for (const id of m.toolCallIds || []) {
      c?.upsertCall(byId.get(id))
      byId.delete(id)
    }
  }
  byId.forEach(x => c?.upsertCall(x))
  if (snap.person || messages.length) app.people().then(p => p.holder(snap.person, messages))
  // Rated already (before a reload, in another tab): its end never asks again.
  if (snap.rating) app.heard('rated', { conversationId: snap.conversationId })
  // What followed its last reply (follow-ups, a rating question not answered) comes back
  // with it, as it was; a rating asked is never asked anew.
  const last = messages[messages.length - 1]
  if (last?.role === 'assistant' && last.text) app.heard('resumed', { text: last.text })
  ui.scrollToEnd()
  // The snapshot may be all there is (a run that finished while the stream was down):
  // no later event will come to update the composer.
  app.refresh()
  if (messages.length) branches(app)
}
