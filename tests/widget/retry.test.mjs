// widget/api.js's retry: the one backoff loop of the widget (the stream's reconnects, the
// session's resume, the lazy modules' imports, the answers and decisions sent again). node's
// mock timers stand in for time; a small fake EventSource for the browser's: no browser.
import { test, beforeEach, afterEach, mock } from 'node:test'
import assert from 'node:assert/strict'
import { retry } from '../../widget/api.js'
import { openStream } from '../../widget/events.js'

beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }))
afterEach(() => mock.timers.reset())

/** Let every promise continuation run (setImmediate is not mocked). */
const settled = () => new Promise(resolve => setImmediate(resolve))

/** An attempt that fails with these errors in turn, then resolves to 'done'. */
function failing(...errors) {
  const seen = []
  const attempt = async n => {
    seen.push(n)
    if (errors.length) throw errors.shift()
    return 'done'
  }
  return { attempt, seen }
}

test('an attempt that resolves is not repeated, and nothing pauses', async () => {
  const { attempt, seen } = failing()
  const pauses = []
  assert.equal(await retry(attempt, n => { pauses.push(n); return 0 }), 'done')
  assert.deepEqual(seen, [0])
  assert.deepEqual(pauses, [])
})

test('a failed attempt is made again after the pause asked for, with the count of failures', async () => {
  const first = new Error('first')
  const second = new Error('second')
  const { attempt, seen } = failing(first, second)
  const asked = []
  const result = retry(attempt, (n, err) => { asked.push([n, err]); return [100, 300][n] })
  await settled()
  assert.deepEqual(asked, [[0, first]])
  mock.timers.tick(99)
  await settled()
  assert.deepEqual(seen, [0], 'not before its pause is over')
  mock.timers.tick(1)
  await settled()
  assert.deepEqual(seen, [0, 1])
  assert.deepEqual(asked, [[0, first], [1, second]])
  mock.timers.tick(299)
  await settled()
  assert.deepEqual(seen, [0, 1])
  mock.timers.tick(1)
  assert.equal(await result, 'done')
  assert.deepEqual(seen, [0, 1, 2])
})

test('a pause that is not a number gives up, with the error of the last attempt', async () => {
  const errors = [new Error('a'), new Error('b'), new Error('c')]
  const { attempt, seen } = failing(...errors)
  const gaveUp = assert.rejects(retry(attempt, n => (n < 2 ? 0 : undefined)), errors[2])
  for (let i = 0; i < 3; i++) { await settled(); mock.timers.tick(0) }
  await gaveUp
  assert.deepEqual(seen, [0, 1, 2])
})

test('reset counts the failures from zero again', async () => {
  const asked = []
  let calls = 0
  const result = retry(async (n, reset) => {
    calls++
    if (calls === 2) reset() // the attempt got somewhere (a stream opened), then failed
    if (calls < 4) throw new Error(`failure ${calls}`)
    return n
  }, n => { asked.push(n); return 0 })
  for (let i = 0; i < 4; i++) { await settled(); mock.timers.tick(0) }
  assert.equal(await result, 2)
  assert.deepEqual(asked, [0, 0, 1])
})

// ---- the stream's reconnects through it ----------------------------------------------------

/** The EventSources the stream opened, newest last. */
let sources = []
class FakeEventSource {
  constructor(url) { this.url = url; this.closed = false; sources.push(this) }
  addEventListener() {}
  close() { this.closed = true }
}

test('a stream reconnects after 400-600 ms, longer each time, and from the start once it opened', async t => {
  sources = []
  globalThis.EventSource = FakeEventSource
  t.after(() => { delete globalThis.EventSource })
  t.mock.method(Math, 'random', () => 0.5) // the jitter: 100 ms of 200
  const states = []
  const stream = openStream({
    url: async failures => `/events?f=${failures}`,
    types: [],
    onEvent() {},
    onState: (state, failures) => { states.push(`${state} ${failures}`) },
  })
  await settled()
  assert.deepEqual(sources.map(s => s.url), ['/events?f=0'])
  sources[0].onerror()
  await settled()
  mock.timers.tick(499) // 200 * 2 + 100
  await settled()
  assert.equal(sources.length, 1, 'no reconnect before the pause is over')
  mock.timers.tick(1)
  await settled()
  assert.deepEqual(sources.map(s => s.url), ['/events?f=0', '/events?f=1'])
  sources[1].onerror()
  await settled()
  mock.timers.tick(900) // 200 * 4 + 100
  await settled()
  assert.equal(sources.length, 3)
  sources[2].onopen()
  sources[2].onerror()
  await settled()
  mock.timers.tick(500) // opened: the first pause again
  await settled()
  assert.equal(sources.length, 4)
  stream.close()
  assert.ok(sources[3].closed)
  assert.deepEqual(states, ['connecting 0', 'down 1', 'connecting 1', 'down 2', 'connecting 2', 'open 0',
    'down 1', 'connecting 1'])
})

test('a stream whose onState says false stops for good', async t => {
  sources = []
  globalThis.EventSource = FakeEventSource
  t.after(() => { delete globalThis.EventSource })
  openStream({ url: async () => '/events', types: [], onEvent() {}, onState: state => state !== 'down' })
  await settled()
  sources[0].onerror()
  await settled()
  mock.timers.tick(60_000)
  await settled()
  assert.equal(sources.length, 1)
})
