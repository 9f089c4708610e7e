// widget/drawing.js: when the widget's changes to the page are made. A burst of stream events
// is drawn once it is over (QUIET_MS without an event, FLUSH_MS at most), at a frame; a call
// with the page's handler holds all drawing. node's mock timers stand in for time,
// and a list of callbacks for the browser's frames: no browser.
import { test, mock, beforeEach, afterEach } from 'node:test'
import assert from 'node:assert/strict'

/** requestAnimationFrame's callbacks, run when the test draws a frame. */
let frames = []
globalThis.requestAnimationFrame = cb => { frames.push(cb) }
const frame = () => { const due = frames; frames = []; due.forEach(cb => cb(0)) }

const { write, batch, burstEnd, hold, flushWrites, setAfterFlush, QUIET_MS, FLUSH_MS } = await import('../../widget/drawing.js')

let made, flushes
beforeEach(() => {
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 })
  made = []
  flushes = 0
  frames = []
  setAfterFlush(() => { flushes++ })
})
afterEach(() => {
  // Nothing may wait into the next test: the module's queue is shared.
  mock.timers.tick(10 * FLUSH_MS)
  frame()
  flushWrites()
  mock.timers.reset()
})

/** A stream event's change, as app.js makes it (inside `batch`). */
const streamed = name => batch(() => write(() => made.push(name)))

test('a change outside a burst, with nothing waiting, is made at once', () => {
  write(() => made.push('now'))
  assert.deepEqual(made, ['now'])
  assert.equal(frames.length, 0)
})

test("a burst's changes wait until no event came for QUIET_MS, then go in the next frame, in order", () => {
  streamed('text')
  mock.timers.tick(5)
  frame() // a frame mid-burst draws nothing: the call that follows the text would wait behind it
  streamed('call start')
  streamed('dispatch')
  mock.timers.tick(QUIET_MS - 1)
  frame()
  assert.deepEqual(made, [])
  mock.timers.tick(1) // quiet now: the next frame draws the burst
  assert.deepEqual(made, [])
  frame()
  assert.deepEqual(made, ['text', 'call start', 'dispatch'])
  assert.equal(flushes, 1)
})

test('a stream that never pauses is still drawn FLUSH_MS after its first event', () => {
  for (let at = 0; at < FLUSH_MS; at += 5) {
    streamed(`chunk ${at}`)
    mock.timers.tick(5)
    frame()
  }
  assert.equal(made.length, FLUSH_MS / 5, 'every chunk of the first FLUSH_MS drawn')
  streamed('next')
  mock.timers.tick(5)
  frame()
  assert.equal(made.at(-1), `chunk ${FLUSH_MS - 5}`, 'a new burst starts after the flush')
})

test('a change made outside a burst under way waits for its quiet, in order, and asks no frame of its own', () => {
  // As a reply's rating bar, drawn once its module has loaded, while the call that came
  // with the reply's end is on its way: a frame then would hold the call up.
  streamed('text')
  write(() => made.push('rating'))
  assert.deepEqual(made, [])
  assert.equal(frames.length, 0)
  mock.timers.tick(QUIET_MS - 1)
  streamed('call')
  mock.timers.tick(QUIET_MS - 1)
  frame()
  assert.deepEqual(made, [])
  mock.timers.tick(1)
  frame()
  assert.deepEqual(made, ['text', 'rating', 'call'])
  assert.equal(flushes, 1)
  write(() => made.push('later'))
  frame()
  assert.deepEqual(made.at(-1), 'later')
})

test('a burst has one timer, however many events it has', () => {
  const setTimeout = mock.fn(globalThis.setTimeout)
  const real = globalThis.setTimeout
  globalThis.setTimeout = setTimeout
  try {
    for (let i = 0; i < 20; i++) streamed(`chunk ${i}`)
  } finally { globalThis.setTimeout = real }
  assert.equal(setTimeout.mock.callCount(), 1)
})

test('a hold keeps everything undrawn until it is released, then the next frame draws it', () => {
  streamed('text')
  const release = hold(100)
  mock.timers.tick(QUIET_MS + FLUSH_MS)
  frame()
  write(() => made.push('answer sent'))
  frame()
  assert.deepEqual(made, [])
  release()
  frame()
  assert.deepEqual(made, ['text', 'answer sent'])
  release() // a second release changes nothing
  streamed('later')
  mock.timers.tick(QUIET_MS)
  frame()
  assert.deepEqual(made, ['text', 'answer sent', 'later'])
})

test("a burst that ended (its run finished) goes in the next frame, without waiting for quiet", () => {
  streamed('last words')
  streamed('run finished')
  burstEnd()
  frame()
  assert.deepEqual(made, ['last words', 'run finished'])
  assert.equal(flushes, 1)
  mock.timers.tick(QUIET_MS + FLUSH_MS) // no timer left to draw it again
  frame()
  assert.equal(flushes, 1)
  // Held (a call with the page's handler): the end of a burst draws nothing until released.
  streamed('text')
  const release = hold(100)
  burstEnd()
  frame()
  assert.deepEqual(made, ['last words', 'run finished'])
  release()
  frame()
  assert.deepEqual(made, ['last words', 'run finished', 'text'])
})

test('a hold ends by itself after its time', () => {
  const release = hold(100)
  write(() => made.push('held'))
  mock.timers.tick(99)
  frame()
  assert.deepEqual(made, [])
  mock.timers.tick(1)
  frame()
  assert.deepEqual(made, ['held'])
  release()
})

test('a page without frames (hidden) is drawn by the timer, FLUSH_MS after the burst is quiet', () => {
  streamed('text')
  mock.timers.tick(QUIET_MS) // quiet: a frame is asked for, which a hidden page never draws
  mock.timers.tick(FLUSH_MS - 1)
  assert.deepEqual(made, [])
  mock.timers.tick(1)
  assert.deepEqual(made, ['text'])
  assert.equal(flushes, 1)
  frame() // the frame that comes later finds nothing to do
  assert.equal(flushes, 1)
})

test('flushWrites makes every waiting change now (before focusing what they show)', () => {
  streamed('form')
  flushWrites()
  assert.deepEqual(made, ['form'])
})
