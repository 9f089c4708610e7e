// Hostcall widget: when changes to the page are made (bench/README.md says why).
// No DOM here: chat.js makes the changes, and node's tests drive this module alone.

/** Changes waiting to be made, in order. @type {(() => void)[]} */
const writes = []
let batching = 0
let holds = 0
let flushQueued = false
/** The longest a change waits for a frame (ms). */
export const FLUSH_MS = 50
/** A burst of stream events (text, then a call) is drawn once none came for this long (ms),
 * or FLUSH_MS after its first: a frame drawn mid-burst held the call up on its way. */
export const QUIET_MS = 12
let quietTimer = 0
let burstStart = 0
let lastWrite = 0
let flushTimer = 0
let afterFlush = () => {}

/** What to run in the frame of every flush (chat.js scrolls). @param {() => void} fn */
export function setAfterFlush(fn) { afterFlush = fn }

/** Make a change now, or after those waiting (a burst, or a hold), in order. @param {() => void} change */
export function write(change) {
  if (!batching && !holds && !writes.length) return change()
  writes.push(change)
  if (batching) waitForQuiet()
  else if (!quietTimer) queueFlush() // else drawn with the burst under way
}

// One timer a burst, not one an event: when it fires early, it waits for what is left.
function waitForQuiet() {
  lastWrite = Date.now()
  if (!quietTimer) burstStart = lastWrite, quiet(QUIET_MS)
}

/** @param {number} ms */
function quiet(ms) {
  quietTimer = setTimeout(() => {
    const left = Math.min(lastWrite + QUIET_MS, burstStart + FLUSH_MS) - Date.now()
    if (left > 0) return quiet(left)
    quietTimer = 0
    queueFlush()
  }, ms)
}

function queueFlush() {
  if (flushQueued || holds || !writes.length) return
  flushQueued = true
  // At the next frame; a hidden page has none: there, within FLUSH_MS.
  const flush = () => {
    if (!flushQueued) return // the other of the two came first
    flushQueued = false
    clearTimeout(flushTimer)
    if (holds) return // the release queues it again
    flushWrites()
    afterFlush() // this frame lays the changes out anyway
  }
  requestAnimationFrame(flush)
  flushTimer = setTimeout(flush, FLUSH_MS)
}

/** The burst is over (its run ended): drawn at the next frame, without waiting for quiet. */
export function burstEnd() {
  clearTimeout(quietTimer)
  quietTimer = 0
  queueFlush()
}

/** Make every waiting change now, held or not (before focusing what they show). */
export function flushWrites() {
  flushQueued = false
  for (const change of writes.splice(0)) change()
}

/** Run `fn`, one stream event's changes: they are made with the rest of its burst. @param {() => void} fn */
export function batch(fn) {
  batching++
  try { fn() } finally { batching-- }
}

/**
 * Draw nothing until `release()` or `ms` pass: while a call is with the page's handler and
 * its answer on its way, a frame (3-6 ms of this thread on a loaded 2-core machine) would
 * hold the answer up. Only drawing waits, not the conversation's state. @param {number} ms
 */
export function hold(ms) {
  holds++
  let timer = setTimeout(() => release(), ms)
  const release = () => {
    if (!timer) return
    clearTimeout(timer)
    timer = 0
    holds--
    queueFlush()
  }
  return release
}
