// widget/pagetools.js: the page's WebMCP tools given the shape the server reads, and the
// server's refusals told to the page once each.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { offer, refuse } from '../../widget/pagetools.js'

/** What refuse() told the page (its console errors are the same, silenced here). */
function told(refused) {
  const events = []
  const error = console.error
  console.error = () => {}
  try { refuse(refused, (name, detail) => events.push([name, detail])) } finally { console.error = error }
  return events.map(([name, d]) => `${name} ${d.code} ${d.name} ${d.reason}`)
}

test('the page tools are sent with the keys the server reads, and nothing else', () => {
  const json = JSON.stringify([
    { name: 'add_note', title: 'Add', description: 'Adds.', origin: 'http://localhost',
      inputSchema: { type: 'object' }, annotations: { readOnlyHint: true, consequentialHint: false } },
    { name: 'bare' },
  ])
  assert.deepEqual(JSON.parse(JSON.stringify(offer(json))), [
    { name: 'add_note', title: 'Add', description: 'Adds.', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } },
    { name: 'bare', description: '', inputSchema: { type: 'object' }, annotations: {} },
  ])
})

test('what the server would refuse as a whole request is left out or refused here', () => {
  const json = JSON.stringify([
    { description: 'no name' }, { name: 7 }, { name: 'odd', inputSchema: 'text' },
    { name: 'listy', inputSchema: [] }, { name: 'twice' }, { name: 'twice', description: 'again' },
  ])
  assert.deepEqual(offer(json).map(t => t.name), ['twice'])
  assert.deepEqual(told([]), ['error page_tool_refused odd bad_schema', 'error page_tool_refused listy bad_schema'])
  assert.deepEqual(offer('not json'), [])
  assert.deepEqual(offer(undefined), [])
})

test('a refusal is told once per reason, and again once it has gone and come back', () => {
  offer('[]')
  assert.deepEqual(told([{ name: 'wipe', reason: 'not_allowed' }]), ['error page_tool_refused wipe not_allowed'])
  assert.deepEqual(told([{ name: 'wipe', reason: 'not_allowed' }]), [])
  assert.deepEqual(told([{ name: 'wipe', reason: 'too_many' }]), ['error page_tool_refused wipe too_many'])
  assert.deepEqual(told([]), [])
  assert.deepEqual(told([{ name: 'wipe', reason: 'too_many' }]), ['error page_tool_refused wipe too_many'])
  assert.deepEqual(told(null), [])
})
