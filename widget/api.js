// Hostcall widget: the server's HTTP API (docs/protocol.md), retry with backoff, and a storage
// probe. The event stream is events.js's, loaded with a conversation.
// Same-origin only (CSP connect-src 'self'). Server errors, `{"error": {code, message,
// details}}`, are thrown as ApiError; a network failure is an ApiError with status 0.

/** Statuses that say the session or conversation no longer exists. */
export const GONE = [401, 403, 404]

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message)
    this.status = status
    this.code = code
    this.details = details || {}
  }
}

// ============================================================================
// HTTP
// ============================================================================

/** Pauses (ms) before asking again for a superseded session cookie (`resume`). */
const RESUME_PAUSES = [150, 500]

/**
 * The API under path prefix `base` (usually "") for agent `agentId`, embedded in
 * `parentOrigin` ("" standalone).
 *
 * Sessions: the session token lives in this closure only, never in storage a
 * neighbour could read. To survive a reload the server keeps it in an HttpOnly cookie that
 * no script can read, sent only to `/api/agents/{id}/…` (`resume` hands it back rotated,
 * with `key` only; `create` joins this browser's history with it). A request refused
 * with `session_replaced` (another tab resumed) resumes once and is retried; that resume
 * also sends the token this tab held, so the server hands it the current session without
 * rotating again (which would replace the other tab in turn).
 * @param {string} base @param {string} agentId @param {string} parentOrigin @param {string} key
 */
export function createApi(base, agentId, parentOrigin, key) {
  let session = ''
  let conversationId = ''
  let identity = ''
  const enc = encodeURIComponent
  const agentPath = `/api/agents/${enc(agentId)}`

  /**
   * @param {string} method @param {string} path @param {any} [body]
   * @param {{cookies?: boolean, held?: boolean, retried?: boolean, keepalive?: boolean}} [o]
   * `cookies`: a request that reads or sets the session cookie; `held`: send the session
   * token with it anyway (resuming: the proof that this tab was in the conversation).
   */
  async function call(method, path, body, { cookies = false, held = false, retried = false, keepalive = false } = {}) {
    const headers = new Headers(session && (!cookies || held) ? { authorization: `Bearer ${session}` } : {})
    const raw = body instanceof Blob // a file, as it is
    if (body !== undefined && !raw) headers.set('content-type', 'application/json')
    if (identity) headers.set('hostcall-identity', identity)
    let res
    try {
      // Cookies only where the server sets or reads the session cookie.
      const credentials = cookies ? 'same-origin' : 'omit'
      res = await fetch(base + path, { method, headers, credentials, cache: 'no-store', keepalive, body: raw ? body : JSON.stringify(body) })
    } catch (err) {
      throw new ApiError(0, 'network', String(err))
    }
    const data = await res.json().catch(() => null)
    const e = data?.error || {}
    if (!res.ok && e.code === 'session_replaced' && !retried && conversationId) {
      const again = await resume().catch(() => null)
      if (again?.conversationId === conversationId) return call(method, path, body, { cookies, held, retried: true, keepalive })
    }
    if (!res.ok) throw new ApiError(res.status, e.code || `http_${res.status}`, e.message || res.statusText, e.details)
    return data
  }

  /** @param {{conversationId: string, sessionToken: string, streamToken: string}} opened */
  function adopt(opened) {
    conversationId = opened.conversationId
    session = opened.sessionToken
    return opened
  }

  /**
   * This browser's conversation with the agent, if it has one (a 204, null, if not).
   * A 404 that says `superseded` met a cookie another tab's resume had just replaced (both
   * sent it at one instant): asked again once that tab's new cookie has had time to land.
   */
  const resume = () => retry(
    () => call('POST', `${agentPath}/session`, { parentOrigin, resumeKey: key }, { cookies: true, held: true }).then(o => o && adopt(o)),
    (n, err) => (err instanceof ApiError && err.details.superseded ? RESUME_PAUSES[n] : undefined))

  const conv = (id, tail) => `/api/conversations/${enc(id)}${tail}`
  return {
    resume,
    create: locale => call('POST', `${agentPath}/conversations`, { locale, parentOrigin, resumeKey: key }, { cookies: true }).then(adopt),
    forget() { session = ''; conversationId = '' },
    setIdentity(/** @type {string} */ token) { identity = token },
    call,
    adopt,
    key,
    /** For tests in the widget's own origin (Playwright inside the frame); never stored. */
    current: () => ({ conversationId, sessionToken: session }),
    snapshot: (id, surface) => call('GET', conv(id, `?surface=${enc(surface)}`)),
    streamToken: id => call('POST', conv(id, '/stream-token'), {}),
    capabilities: (id, surfaceId, tools, pageTools) => call('POST', conv(id, '/capabilities'), { surfaceId, tools, ...(pageTools && { pageTools }) }),
    activity: (id, surface) => call('POST', conv(id, `/surfaces/${enc(surface)}/activity`), {}),
    // keepalive: sent while the page unloads (pagehide), and it outlives the page.
    leave: (id, surface) => call('POST', conv(id, `/surfaces/${enc(surface)}/leave`), {}, { keepalive: true }).catch(() => {}),
    // `context`: the page's (app.js), absent when it has none.
    message: (id, text, simulate, context, attachments) => call('POST', conv(id, '/messages'), { text, ...(simulate && { simulate }), ...(context && { context }), ...(attachments && { attachments }) }),
    // The endpoints of what loads on demand are with it: `call` and `conv` from there
    // (control.js: retry, stop; toolcalls.js: result, decision; people.js: feedback).
    conv,
    eventsUrl: (id, token, after, surface) => base + conv(id, `/events?token=${enc(token)}&surface=${enc(surface)}${after ? `&after=${enc(after)}` : ''}`),
  }
}

/** n random bytes, in hex. @param {number} n */
export const randomHex = n => [...crypto.getRandomValues(new Uint8Array(n))].map(b => b.toString(16).padStart(2, '0')).join('')

/** The resume key (docs/protocol.md "Tokens"): the loader's, in the fragment; standalone, in
 * this origin's storage (origins count ports, cookies do not); else new. @param {string} agent */
export function resumeKey(agent) {
  const ok = (/** @type {string} */ k) => /^[\w-]{32,128}$/.test(k) && k
  const name = `hostcall:key:${agent}`
  const made = randomHex(24)
  try { return ok(new URLSearchParams(location.hash.slice(1)).get('key') || '') || ok(localStorage[name] || '') || (localStorage[name] = made) } catch { return made }
}

// ============================================================================
// Event ids (the stream itself: events.js)
// ============================================================================

/** An event id's number in its conversation: "c_…:42" → 42. */
export const seqOf = (id = '') => Number(id.slice(id.lastIndexOf(':') + 1)) || 0

// ============================================================================
// Retry with backoff
// ============================================================================

/**
 * `attempt(n, reset)` until it resolves, n failures so far. After a failure, waits
 * `pause(n, err)` ms, or throws if that is not a number. `reset()`: count from 0 again.
 * @template T
 * @param {(n: number, reset: () => void) => Promise<T>} attempt
 * @param {(n: number, err: any) => number | undefined} pause
 * @returns {Promise<T>}
 */
export async function retry(attempt, pause) {
  for (let n = 0; ;) {
    try { return await attempt(n, () => { n = 0 }) } catch (err) {
      const ms = pause(n++, err)
      if (!(ms >= 0)) throw err
      await new Promise(resolve => setTimeout(resolve, ms))
    }
  }
}

/** Fetch a module and those it imports before importing it (they are cached): a failed
 * import stays failed, with all it imports; a failed fetch does not. @param {string[]} files */
export async function prefetch(files) {
  for (const r of await Promise.all(files.map(f => fetch(new URL(f, import.meta.url))))) if (!r.ok) throw new Error(`${r.url}: ${r.status}`)
}

// ============================================================================
// Storage: where this frame could keep small values across a reload (the root's
// data-storage, docs/testing.md): localStorage if allowed, else a partitioned cookie (CHIPS:
// Chromium denies cross-site frames localStorage, IndexedDB and Web Locks, but not these).
// ============================================================================

const COOKIE = '; Path=/; Secure; SameSite=None; Partitioned'

/** A probe, removed at once. @returns {'local' | 'cookie' | 'memory'} */
export function storageKind() {
  try {
    localStorage.setItem('hostcall:probe', '1')
    const kept = localStorage.getItem('hostcall:probe') === '1'
    localStorage.removeItem('hostcall:probe')
    if (kept) return 'local'
  } catch { /* denied here */ }
  try {
    document.cookie = `hostcall%3Aprobe=1${COOKIE}`
    const kept = document.cookie.split('; ').includes('hostcall%3Aprobe=1')
    document.cookie = `hostcall%3Aprobe=; Max-Age=0${COOKIE}`
    if (kept) return 'cookie'
  } catch { /* denied here */ }
  return 'memory'
}
