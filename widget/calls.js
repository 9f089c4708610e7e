// Hostcall widget: one tool call's life on this surface, as a table. No DOM here:
// app.js asks `transition(state, event)` where a call goes, and renders the state it gets.
// `null` means "ignore this event in this state" — e.g. a dispatch replayed to a call whose
// handler already runs here, which is how a handler never runs twice in one page.

/** The states of a call as this surface sees it. */
export const STATE = Object.freeze({
  PROPOSED: 'proposed', //     the model is writing the call
  CONFIRM: 'confirm', //       the person approves, edits or rejects (awaiting_confirmation)
  EDIT: 'edit', //             ... editing the input
  REJECT: 'reject', //         ... writing a reason to reject
  DECIDING: 'deciding', //     the decision is on its way to the server
  APPROVED: 'approved', //     decided; the server has not dispatched it yet
  RUNNING: 'running', //       the page's handler runs it here (this surface has the claim)
  RERUNNING: 'rerunning', //   ... again: the surface that had it went away (a read)
  ELSEWHERE: 'elsewhere', //   another tab, page or console runs it; we follow its result
  FORM: 'form', //             a person answers it with the output-schema form
  SENDING: 'sending', //       the answer is on its way to the server
  SENT: 'sent', //             answered; waiting for the result event
  RETRY: 'retry', //           the answer could not be sent; the person may try again
  SETTLED: 'settled', //       answered, rejected, failed or expired (terminal)
})

/** What can happen to it. */
export const EVENT = Object.freeze({
  APPROVAL_REQUESTED: 'approval_requested',
  EDIT: 'edit', REJECT: 'reject', BACK: 'back', //  the person moves around the card
  DECIDE: 'decide', DECIDED: 'decided', DECIDE_FAILED: 'decide_failed', EDIT_REFUSED: 'edit_refused',
  HERE: 'here', //             a dispatch assigned to this surface (first assignment)
  HERE_AGAIN: 'here_again', // a dispatch assigned to this surface after another had it
  ELSEWHERE: 'elsewhere', //   a dispatch assigned to another surface
  TO_FORM: 'to_form', //       a dispatch to no surface: the form
  NO_HANDLER: 'no_handler', // the page has no handler after all
  INVALID: 'invalid', //       the handler's output does not match the output schema
  SEND: 'send', SENT: 'sent', SEND_FAILED: 'send_failed', FORM_REFUSED: 'form_refused',
  SETTLE: 'settle',
})

const S = STATE
const E = EVENT
const DECISION = [S.CONFIRM, S.EDIT, S.REJECT]
// Before anything runs here, a dispatch can still send the call anywhere.
const UNCLAIMED = [S.PROPOSED, ...DECISION, S.DECIDING, S.APPROVED, S.ELSEWHERE]
/** Where the person has something to do (the working indicator hides). @type {Set<string>} */
export const PERSON = new Set([...DECISION, S.FORM])

/** @type {Record<string, [string[], string][]>} event → [from states, to] */
const MOVES = {
  [E.APPROVAL_REQUESTED]: [[[S.PROPOSED], S.CONFIRM]],
  [E.EDIT]: [[[S.CONFIRM], S.EDIT]],
  [E.REJECT]: [[[S.CONFIRM], S.REJECT]],
  [E.BACK]: [[[S.EDIT, S.REJECT], S.CONFIRM]],
  [E.DECIDE]: [[DECISION, S.DECIDING]],
  [E.DECIDED]: [[[S.DECIDING], S.APPROVED]],
  [E.DECIDE_FAILED]: [[[S.DECIDING], S.CONFIRM]],
  [E.EDIT_REFUSED]: [[[S.DECIDING], S.EDIT]],
  // A read left on the form may come back to a page's handler: nobody has to type it.
  [E.HERE]: [[[...UNCLAIMED, S.FORM], S.RUNNING]],
  [E.HERE_AGAIN]: [[[...UNCLAIMED, S.FORM], S.RERUNNING]],
  // Do not add RUNNING or RERUNNING here: a handler that started is never abandoned; if the
  // server moved the call meanwhile, the first answer wins and the other gets a 409.
  [E.ELSEWHERE]: [[[...UNCLAIMED, S.FORM], S.ELSEWHERE]],
  [E.TO_FORM]: [[UNCLAIMED, S.FORM]],
  [E.NO_HANDLER]: [[[S.RUNNING, S.RERUNNING], S.FORM]],
  [E.INVALID]: [[[S.RUNNING, S.RERUNNING, S.SENDING], S.FORM]],
  [E.SEND]: [[[S.RUNNING, S.RERUNNING, S.FORM, S.RETRY], S.SENDING]],
  [E.SENT]: [[[S.SENDING], S.SENT]],
  [E.SEND_FAILED]: [[[S.SENDING], S.RETRY]],
  [E.FORM_REFUSED]: [[[S.SENDING], S.FORM]],
  [E.SETTLE]: [[Object.values(S).filter(s => s !== S.SETTLED), S.SETTLED]],
}

/**
 * The state a call in `state` goes to on `event`, or null to ignore the event.
 * @param {string} state @param {string} event @returns {string | null}
 */
export function transition(state, event) {
  for (const [from, to] of MOVES[event] || []) if (from.includes(state)) return to
  return null
}

/**
 * The event a dispatched CALL (docs/protocol.md) is for this surface: run it here, follow
 * it elsewhere, or answer it with the form.
 * @param {{surfaceId?: string | null, assignment?: number, route?: string}} call
 * @param {string} surfaceId this surface
 * @param {boolean} hadIt whether another surface had this call before (shown as a re-run)
 */
export function placement(call, surfaceId, hadIt = false) {
  if (!call.surfaceId || call.route !== 'handler') return E.TO_FORM
  if (call.surfaceId !== surfaceId) return E.ELSEWHERE
  return hadIt || (call.assignment ?? 1) > 1 ? E.HERE_AGAIN : E.HERE
}
