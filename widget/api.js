// Hostcall widget: talking to the Hostcall server (docs/protocol.md) and to localStorage.
//
// Everything here is same-origin with the widget page (CSP `connect-src 'self'`). Errors
// from the server arrive as one JSON shape, `{"error": {code, message, details}}`, and are
// thrown as ApiError; a network failure is an ApiError with status 0.

/**
 * @typedef {{conversationId: string, sessionToken: string, streamToken: string, agent?: any}} Created
 * @typedef {(type: string, event: MessageEvent) => void} EventHandler
 * @typedef {'connecting' | 'open' | 'down'} StreamState
 */

// ============================================================================
// HTTP
// ============================================================================

export class ApiError extends Error {
  /** @param {number} status @param {string} code @param {string} message @param {any} [details] */
  constructor(status, code, message, details) {
    super(message)
    this.status = status
    this.code = code
    this.details = details || {}
  }
}

/** @param {string} s */
const enc = s => encodeURIComponent(s)

/**
 * The JSON API of one Hostcall server (`base` is its path prefix, usually "").
 * @param {string} base
 */
export function createApi(base) {
  let session = ''

  /**
   * @param {string} method @param {string} path @param {unknown} [body]
   * @returns {Promise<any>}
   */
  async function call(method, path, body) {
    /** @type {Record<string, string>} */
    const headers = {}
    if (body !== undefined) headers['content-type'] = 'application/json'
    if (session) headers.authorization = `Bearer ${session}`
    let res
    try {
      res = await fetch(base + path, {
        method, headers, credentials: 'omit', cache: 'no-store',
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    } catch (err) {
      throw new ApiError(0, 'network', String(/** @type {Error} */ (err)?.message || err))
    }
    let data = null
    try { data = await res.json() } catch { /* empty or non-JSON body */ }
    if (!res.ok) {
      const e = data?.error || {}
      throw new ApiError(res.status, e.code || `http_${res.status}`, e.message || res.statusText, e.details)
    }
    return data
  }

  return {
    /** @param {string} token */
    setSession(token) { session = token },
    /** @param {string} agentId @param {string} locale @returns {Promise<Created>} */
    create: (agentId, locale) => call('POST', `/api/agents/${enc(agentId)}/conversations`, { locale }),
    /** @param {string} id */
    snapshot: id => call('GET', `/api/conversations/${enc(id)}`),
    /** @param {string} id @returns {Promise<{streamToken: string}>} */
    streamToken: id => call('POST', `/api/conversations/${enc(id)}/stream-token`, {}),
    /** @param {string} id @param {string[]} tools */
    capabilities: (id, tools) => call('POST', `/api/conversations/${enc(id)}/capabilities`, { tools }),
    /** @param {string} id @param {string} text */
    message: (id, text) => call('POST', `/api/conversations/${enc(id)}/messages`, { text }),
    /** @param {string} callId @param {string} token */
    delivered: (callId, token) => call('POST', `/api/calls/${enc(callId)}/delivered`, { token }),
    /** @param {string} callId @param {Record<string, unknown>} body */
    result: (callId, body) => call('POST', `/api/calls/${enc(callId)}/result`, body),
    /** @param {string} callId @param {Record<string, unknown>} body */
    decision: (callId, body) => call('POST', `/api/calls/${enc(callId)}/decision`, body),
    /** @param {string} id @param {string} token @param {string} after */
    eventsUrl: (id, token, after) =>
      `${base}/api/conversations/${enc(id)}/events?token=${enc(token)}${after ? `&after=${enc(after)}` : ''}`,
  }
}

// ============================================================================
// Event stream with reconnection
// ============================================================================

/**
 * Keep one EventSource open. On any error the source is closed and reopened with a fresh
 * URL from `url(failures)` — a new stream token and `after=<last event id>` — with backoff.
 * Do not rely on EventSource's own retry: it reuses the first URL, whose stream token
 * expires after minutes, and gives up for good on a non-200 answer.
 * @param {{url: (failures: number) => Promise<string>, types: readonly string[],
 *   onEvent: EventHandler, onState: (state: StreamState, failures: number, err?: any) => boolean | void}} o
 */
export function openStream(o) {
  /** @type {EventSource | null} */
  let es = null
  let timer = 0
  let failures = 0
  let closed = false

  async function start() {
    if (closed) return
    o.onState('connecting', failures)
    let url
    try { url = await o.url(failures) } catch (err) { return retry(err) }
    if (closed) return
    const source = (es = new EventSource(url))
    source.onopen = () => { failures = 0; o.onState('open', 0) }
    source.onerror = () => { source.close(); if (es === source) { es = null; retry() } }
    for (const type of o.types) source.addEventListener(type, e => { if (es === source) o.onEvent(type, /** @type {MessageEvent} */ (e)) })
  }

  /** @param {any} [err] */
  function retry(err) {
    if (closed) return
    failures++
    if (o.onState('down', failures, err) === false) { closed = true; return }
    timer = window.setTimeout(start, Math.min(8000, 200 * 2 ** failures) + Math.random() * 200)
  }

  start()
  return {
    close() { closed = true; clearTimeout(timer); es?.close(); es = null },
  }
}

// ============================================================================
// Storage for the widget's origin only (the parent page can read none of it):
// localStorage where the browser allows it; else a partitioned cookie (CHIPS), which
// browsers that block third-party storage in iframes still allow (Chromium does, when it
// denies localStorage, IndexedDB and Web Locks to a cross-site frame); else memory, and the
// conversation is not restored after a reload. Values are small: a session, a ledger.
// ============================================================================

/** @type {Map<string, any>} */
const memory = new Map()
const COOKIE = '; Path=/; Secure; SameSite=None; Partitioned'

const backends = {
  local: {
    /** @param {string} key */ get: key => JSON.parse(localStorage.getItem(key) || 'null'),
    /** @param {string} key @param {unknown} value */ set: (key, value) => localStorage.setItem(key, JSON.stringify(value)),
    /** @param {string} key */ del: key => localStorage.removeItem(key),
  },
  cookie: {
    /** @param {string} key */
    get(key) {
      const name = `${encodeURIComponent(key)}=`
      const hit = document.cookie.split('; ').find(c => c.startsWith(name))
      return hit ? JSON.parse(decodeURIComponent(hit.slice(name.length))) : null
    },
    /** @param {string} key @param {unknown} value */
    set: (key, value) => { document.cookie = `${encodeURIComponent(key)}=${encodeURIComponent(JSON.stringify(value))}; Max-Age=2592000${COOKIE}` },
    /** @param {string} key */
    del: key => { document.cookie = `${encodeURIComponent(key)}=; Max-Age=0${COOKIE}` },
  },
  memory: {
    /** @param {string} key */ get: key => memory.get(key) ?? null,
    /** @param {string} key @param {unknown} value */ set: (key, value) => memory.set(key, value),
    /** @param {string} key */ del: key => memory.delete(key),
  },
}

/** The first backend that keeps what it is given. */
function usable() {
  for (const kind of /** @type {const} */ (['local', 'cookie'])) {
    try {
      backends[kind].set('hostcall:probe', 1)
      const ok = backends[kind].get('hostcall:probe') === 1
      backends[kind].del('hostcall:probe')
      if (ok) return kind
    } catch { /* denied in this context */ }
  }
  return 'memory'
}

const kind = usable()
const backend = backends[kind]

export const store = {
  kind,
  /** @param {string} key */
  get(key) { try { return backend.get(key) } catch { return null } },
  /** @param {string} key @param {unknown} value */
  set(key, value) { try { backend.set(key, value) } catch { /* full or denied: best effort */ } },
  /** @param {string} key */
  del(key) { try { backend.del(key) } catch { /* best effort */ } },
}
