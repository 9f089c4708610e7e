// Hostcall widget: the page's WebMCP tools (docs/embedding.md "Page tools"), as this surface
// offers them to the server with its capabilities, and the server's refusals, told to the
// page. Loaded with a conversation's first capabilities, for an agent whose file admits page
// tools only: other pages never fetch it.
//
// The server checks every tool (name, schema, sizes, the agent file's allow list) and says
// which it refused; this module only gives the list the shape the server reads, so that one
// odd registration (a polyfill's) cannot make the whole capabilities request a 400.

/** @typedef {{readOnlyHint?: boolean, untrustedContentHint?: boolean}} Hints */
/** @typedef {{name: string, title?: string, description: string, inputSchema: object, annotations: Hints}} PageTool */
/** @typedef {{name: string, reason: string}} Refusal */

/** What each refusal reason means, for the page's console. @type {Record<string, string>} */
const WHY = {
  not_admitted: "this agent admits no page tools (its file has no page_tools block)",
  not_allowed: "its name is not in the agent file's page_tools.allow",
  shadowed: "the agent file has a tool of that name, which wins",
  bad_name: "a tool name is 1 to 64 letters, digits, '_', '-' or '.'",
  bad_schema: "its inputSchema is not an object schema the server takes (depth, remote $ref, patterns)",
  too_large: "its inputSchema is larger than the agent file's max_schema_bytes",
  description_too_long: "its description is longer than the agent file's max_description_chars",
  too_many: "the page has more tools than the agent file's max_tools",
}

/** Tools refused here, before the server saw them: refuse() tells of them with its own. @type {Refusal[]} */
let local = []

/**
 * The page's tools as the server reads them, from bridge.js's JSON text: a tool without a
 * string name is left out (no refusal could name it), one whose inputSchema is not an object
 * is refused here (`bad_schema`); a missing description or schema is the empty one.
 * @param {string | undefined} json @returns {PageTool[]}
 */
export function offer(json) {
  let list
  try { list = JSON.parse(String(json)) } catch { /* nothing the page could send */ }
  local = []
  /** @type {PageTool[]} */
  const tools = []
  const hint = (/** @type {unknown} */ v) => (typeof v === 'boolean' ? v : undefined)
  for (const t of Array.isArray(list) ? list : []) {
    if (typeof t?.name !== 'string' || tools.some(o => o.name === t.name)) continue
    const schema = t.inputSchema ?? { type: 'object' }
    if (typeof schema !== 'object' || Array.isArray(schema)) { local.push({ name: t.name, reason: 'bad_schema' }); continue }
    tools.push({
      name: t.name,
      ...(typeof t.title === 'string' && t.title && { title: t.title }),
      description: typeof t.description === 'string' ? t.description : '',
      inputSchema: schema,
      annotations: { readOnlyHint: hint(t.annotations?.readOnlyHint), untrustedContentHint: hint(t.annotations?.untrustedContentHint) },
    })
  }
  return tools
}

/** name → reason, told to the page already: a refusal is said once, not on every change. */
const told = new Map()

/**
 * Tell the page, on its console and as an `error` event, of each refusal it has not heard;
 * a tool no longer refused may be told again later.
 * @param {unknown} refused the server's `refused` @param {(event: string, detail: object) => void} emit
 */
export function refuse(refused, emit) {
  const now = new Map([...local, ...(Array.isArray(refused) ? refused : [])].map(r => [String(r?.name), String(r?.reason)]))
  for (const name of [...told.keys()]) if (!now.has(name)) told.delete(name)
  for (const [name, reason] of now) {
    if (told.get(name) === reason) continue
    told.set(name, reason)
    const message = `page tool "${name}" refused (${reason}): ${WHY[reason] || 'see the server\'s log'}`
    console.error(`Hostcall: ${message}`)
    emit('error', { code: 'page_tool_refused', name, reason, message })
  }
}
