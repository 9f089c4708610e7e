// widget/calls.js: every (state, event) pair of the widget's call state machine, with
// node's own test runner (`node --test tests/widget`); tests/system/test_widget_js.py runs it.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { STATE as S, EVENT as E, PERSON, transition, placement } from '../../widget/calls.js'

const UNCLAIMED = [S.PROPOSED, S.CONFIRM, S.EDIT, S.REJECT, S.DECIDING, S.APPROVED, S.ELSEWHERE]
const ALL_BUT_SETTLED = Object.values(S).filter(s => s !== S.SETTLED)

/** Written out by hand, apart from the module: [event, from states, to]. */
const EXPECTED = [
  [E.APPROVAL_REQUESTED, [S.PROPOSED], S.CONFIRM],
  [E.EDIT, [S.CONFIRM], S.EDIT],
  [E.REJECT, [S.CONFIRM], S.REJECT],
  [E.BACK, [S.EDIT, S.REJECT], S.CONFIRM],
  [E.DECIDE, [S.CONFIRM, S.EDIT, S.REJECT], S.DECIDING],
  [E.DECIDED, [S.DECIDING], S.APPROVED],
  [E.DECIDE_FAILED, [S.DECIDING], S.CONFIRM],
  [E.EDIT_REFUSED, [S.DECIDING], S.EDIT],
  [E.HERE, [...UNCLAIMED, S.FORM], S.RUNNING],
  [E.HERE_AGAIN, [...UNCLAIMED, S.FORM], S.RERUNNING],
  [E.ELSEWHERE, [...UNCLAIMED, S.FORM], S.ELSEWHERE],
  [E.TO_FORM, UNCLAIMED, S.FORM],
  [E.NO_HANDLER, [S.RUNNING, S.RERUNNING], S.FORM],
  [E.INVALID, [S.RUNNING, S.RERUNNING, S.SENDING], S.FORM],
  [E.SEND, [S.RUNNING, S.RERUNNING, S.FORM, S.RETRY], S.SENDING],
  [E.SENT, [S.SENDING], S.SENT],
  [E.SEND_FAILED, [S.SENDING], S.RETRY],
  [E.FORM_REFUSED, [S.SENDING], S.FORM],
  [E.SETTLE, ALL_BUT_SETTLED, S.SETTLED],
]

test('every state and event pair moves as listed, or is ignored', () => {
  assert.deepEqual(new Set(EXPECTED.map(([event]) => event)), new Set(Object.values(E)))
  for (const [event, from, to] of EXPECTED) {
    for (const state of Object.values(S)) {
      const want = from.includes(state) ? to : null
      assert.equal(transition(state, event), want, `${state} --${event}-->`)
    }
  }
})

test('a handler that runs here is never started again by a replayed or new dispatch', () => {
  for (const state of [S.RUNNING, S.RERUNNING, S.SENDING, S.SENT, S.RETRY, S.SETTLED]) {
    for (const event of [E.HERE, E.HERE_AGAIN, E.ELSEWHERE, E.TO_FORM]) {
      assert.equal(transition(state, event), null, `${state} on ${event}`)
    }
  }
})

test('a settled call stays settled', () => {
  for (const event of Object.values(E)) assert.equal(transition(S.SETTLED, event), null)
})

test('an unknown event or state is ignored, not thrown', () => {
  assert.equal(transition(S.RUNNING, 'nonsense'), null)
  assert.equal(transition('nonsense', E.SETTLE), null)
})

test('the person has something to do only in the card and the form', () => {
  assert.deepEqual([...PERSON].sort(), [S.CONFIRM, S.EDIT, S.FORM, S.REJECT].sort())
})

test('placement: this surface runs it, another does, or the form', () => {
  const mine = 's_mine_0000'
  assert.equal(placement({ surfaceId: mine, route: 'handler', assignment: 1 }, mine), E.HERE)
  assert.equal(placement({ surfaceId: mine, route: 'handler', assignment: 2 }, mine), E.HERE_AGAIN)
  assert.equal(placement({ surfaceId: mine, route: 'handler', assignment: 1 }, mine, true), E.HERE_AGAIN)
  assert.equal(placement({ surfaceId: 's_other_000', route: 'handler', assignment: 1 }, mine), E.ELSEWHERE)
  assert.equal(placement({ surfaceId: null, route: 'form' }, mine), E.TO_FORM)
  assert.equal(placement({ route: 'handler' }, mine), E.TO_FORM) // no surface named: nobody's
})
