// Hostcall widget: what the host side of an MCP Apps view (apps.js) says and accepts on the
// wire — the JSON-RPC methods of the MCP Apps specification (SEP-1865, 2026-01-26) and the
// checks made on what a view asks. No DOM here: node's test runner reads it as it is
// (tests/widget/apps.test.mjs).

/** The methods, as the specification names them. */
export const METHOD = Object.freeze({
  PROXY_READY: 'ui/notifications/sandbox-proxy-ready',
  RESOURCE_READY: 'ui/notifications/sandbox-resource-ready',
  INITIALIZE: 'ui/initialize',
  INITIALIZED: 'ui/notifications/initialized',
  TOOL_INPUT: 'ui/notifications/tool-input',
  TOOL_RESULT: 'ui/notifications/tool-result',
  TOOL_CANCELLED: 'ui/notifications/tool-cancelled',
  SIZE_CHANGED: 'ui/notifications/size-changed',
  CONTEXT_CHANGED: 'ui/notifications/host-context-changed',
  TEARDOWN: 'ui/resource-teardown',
  MESSAGE: 'ui/message',
  OPEN_LINK: 'ui/open-link',
  UPDATE_CONTEXT: 'ui/update-model-context',
  DISPLAY_MODE: 'ui/request-display-mode',
  TOOLS_CALL: 'tools/call',
  PING: 'ping',
})

/** The protocol versions this host speaks; the newest first (what a view asking for
 * another one is answered with, as the specification's negotiation says). */
export const VERSIONS = ['2026-01-26', '2025-11-21']

/** JSON-RPC error codes. */
export const ERROR = Object.freeze({ INVALID: -32600, NO_METHOD: -32601, PARAMS: -32602, REFUSED: -32000 })

/** The view's height is its own (size-changed), within these bounds (px): never a sliver,
 * never taller than the chat can show beside the conversation. */
export const HEIGHT = Object.freeze({ MIN: 80, MAX: 600, FIRST: 160 })

/** How long a view has to say it is initialized (ms), from its frame's creation. */
export const INIT_WITHIN_MS = 10000

/** How long a view's teardown answer is waited for before its frame goes anyway (ms). */
export const TEARDOWN_WITHIN_MS = 500

/**
 * What one message from the view is: a request (with an id to answer), a notification, a
 * response to the host's own request, or nothing (not JSON-RPC 2.0: dropped).
 * @param {unknown} m
 * @returns {{kind: 'request', id: string | number, method: string, params: any}
 *   | {kind: 'notification', method: string, params: any}
 *   | {kind: 'response', id: string | number, result?: any, error?: any} | null}
 */
export function classify(m) {
  if (!m || typeof m !== 'object' || /** @type {any} */ (m).jsonrpc !== '2.0') return null
  const { id, method, params } = /** @type {any} */ (m)
  const hasId = typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id))
  const p = params && typeof params === 'object' ? params : {}
  if (typeof method === 'string') return hasId ? { kind: 'request', id, method, params: p } : { kind: 'notification', method, params: p }
  if (hasId && ('result' in m || 'error' in m)) return { kind: 'response', id, result: /** @type {any} */ (m).result, error: /** @type {any} */ (m).error }
  return null
}

/** Before the view says it is initialized it is answered only these (the specification's
 * handshake): anything else it asks is refused, and nothing is sent to it unasked. */
export const BEFORE_INITIALIZED = /** @type {Set<string>} */ (new Set([METHOD.INITIALIZE, METHOD.PING]))

/** A view's height, clamped; null for what is not a number of pixels. @param {unknown} h */
export function clampHeight(h) {
  if (typeof h !== 'number' || !Number.isFinite(h)) return null
  return Math.round(Math.min(HEIGHT.MAX, Math.max(HEIGHT.MIN, h)))
}

/** The address a view asks to open, if it is one a visitor may be asked about: http(s)
 * only, never `javascript:`, `data:` or a relative address. @param {unknown} raw */
export function linkTarget(raw) {
  if (typeof raw !== 'string' || raw.length > 2048) return null
  try {
    const url = new URL(raw)
    return url.protocol === 'https:' || url.protocol === 'http:' ? url : null
  } catch { return null }
}

/** The text of a `ui/message` (its text blocks; the role is the visitor's, the only one the
 * specification has), bounded as a visitor's message is; '' when it carries none.
 * @param {any} params */
export function messageText(params) {
  if (params?.role !== undefined && params.role !== 'user') return ''
  const blocks = Array.isArray(params?.content) ? params.content : []
  return blocks.filter(b => b?.type === 'text' && typeof b.text === 'string').map(b => b.text).join('\n').trim().slice(0, 8000)
}

/**
 * What a view is told of its call's end: a `tool-result` (an MCP CallToolResult: the MCP
 * tool's own output when it is one, else its value as JSON text and structured content), or a
 * `tool-cancelled` when the call was stopped. @param {any} outcome the call's
 * @returns {{method: string, params: object} | null} null while it has none
 */
export function resultMessage(outcome) {
  if (!outcome || typeof outcome !== 'object') return null
  const err = outcome.error
  if (err) {
    if (['cancelled', 'operator_cancelled', 'operator_ended'].includes(err.code)) return { method: METHOD.TOOL_CANCELLED, params: { reason: String(err.code) } }
    return { method: METHOD.TOOL_RESULT, params: { isError: true, content: [{ type: 'text', text: String(err.message ?? err.code ?? '') }] } }
  }
  if (!('output' in outcome)) return null
  const out = outcome.output
  if (out && typeof out === 'object' && Array.isArray(out.content)) {
    const { truncated, ...result } = out // Hostcall's own mark of a cut result, not MCP's
    return { method: METHOD.TOOL_RESULT, params: result }
  }
  const text = JSON.stringify(out ?? null)
  const structured = out && typeof out === 'object' && !Array.isArray(out) ? { structuredContent: out } : {}
  return { method: METHOD.TOOL_RESULT, params: { content: [{ type: 'text', text }], ...structured } }
}

/** The protocol version a view is answered with. @param {unknown} asked */
export const version = asked => (typeof asked === 'string' && VERSIONS.includes(asked) ? asked : VERSIONS[0])

/** A JSON-RPC response. @param {string | number} id @param {object} result */
export const reply = (id, result) => ({ jsonrpc: '2.0', id, result })
/** A JSON-RPC error response. @param {string | number} id @param {number} code @param {string} message */
export const refuse = (id, code, message) => ({ jsonrpc: '2.0', id, error: { code, message } })
/** A JSON-RPC notification. @param {string} method @param {object} [params] */
export const notify = (method, params = {}) => ({ jsonrpc: '2.0', method, params })
