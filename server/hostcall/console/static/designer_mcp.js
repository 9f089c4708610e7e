// Hostcall console: the designer's MCP servers. An agent uses a server the platform file
// declares and its environment allows; the designer picks the server, asks it for its tools
// (GET /console/api/mcp/{server}/tools: a server the environment does not allow is said so,
// never contacted), and chooses some or all of them. The binding is one entry of the agent's
// tools: {"kind": "mcp", "server", "tools": [...] | "all", policies, "overrides"}.

import { page, tr, h, api } from './console.js'

/** Fired by a tool picker when a listing ends; `detail.problem` is null when it drew tools. */
export const LISTED = 'hostcall:mcp-listed'

/** The servers the draft's environment allows. @param {any} draft @returns {string[]} */
export function allowedServers(draft) {
  return page.data.mcpServers[draft.environment || 'default'] || []
}

/**
 * The server's tools, to choose from: "all", or a checkbox per tool. `binding.tools` follows
 * the choice. @param {any} binding @param {any} draft @param {() => void} onChange
 */
export function toolPicker(binding, draft, onChange) {
  const status = h('p', { 'data-part': 'mcp-status', role: 'status', 'aria-live': 'polite' })
  const list = h('div', { 'data-part': 'mcp-tools' })
  const show = h('button', { type: 'button', 'data-part': 'mcp-show-tools', onclick: () => load() }, tr('mcp_show_tools'))
  const el = h('div', { 'data-part': 'mcp-picker' }, show, status, list)

  async function load() {
    el.setAttribute('aria-busy', 'true')
    const problem = await listing()
    el.removeAttribute('aria-busy')
    el.dispatchEvent(new CustomEvent(LISTED, { bubbles: true, detail: { problem } }))
  }

  /** @returns {Promise<string | null>} what went wrong, or null when the tools are drawn */
  async function listing() {
    list.replaceChildren()
    delete status.dataset.kind
    if (!binding.server) { status.textContent = tr('mcp_pick_server'); return status.textContent }
    status.textContent = tr('mcp_reading')
    const env = draft.environment || 'default'
    const result = await api(`/console/api/mcp/${encodeURIComponent(binding.server)}/tools?environment=${encodeURIComponent(env)}`)
    const problem = result.ok ? result.body.problem : (result.body.error?.message || `HTTP ${result.status}`)
    if (problem) {
      status.textContent = problem
      status.dataset.kind = 'error'
      return problem
    }
    status.textContent = tr('mcp_listed', { n: result.body.tools.length, server: binding.server })
    draw(result.body.tools)
    return result.body.tools.length ? null : status.textContent
  }

  /** @param {{name: string, title: string, description: string, readOnly: boolean}[]} tools */
  function draw(tools) {
    const chosen = new Set(Array.isArray(binding.tools) ? binding.tools : [])
    const all = h('input', { type: 'checkbox', id: `mcp-all-${binding.server}`, 'data-part': 'mcp-all' })
    all.checked = binding.tools === 'all'
    const boxes = tools.map(t => {
      const id = `mcp-${binding.server}-${t.name}`
      const box = h('input', { type: 'checkbox', id, 'data-part': 'mcp-tool', 'data-tool-name': t.name, 'aria-describedby': `${id}-help` })
      box.checked = chosen.has(t.name)
      box.disabled = all.checked
      const effect = tr(t.readOnly ? 'effect_read' : 'effect_write')
      return h('li', null, h('label', { for: id }, box, ' ', h('code', { text: t.name }), ` — ${t.title || t.name} (${effect})`),
        h('p', { id: `${id}-help`, 'data-part': 'help', text: t.description }))
    })
    const update = () => {
      for (const li of boxes) /** @type {HTMLInputElement} */ (li.querySelector('input')).disabled = all.checked
      const picked = boxes.map(li => /** @type {HTMLInputElement} */ (li.querySelector('input'))).filter(b => b.checked).map(b => b.dataset.toolName)
      binding.tools = all.checked ? 'all' : picked
      onChange()
    }
    all.addEventListener('change', update)
    for (const li of boxes) li.querySelector('input')?.addEventListener('change', update)
    list.replaceChildren(h('fieldset', { 'data-part': 'mcp-choice' },
      h('legend', { text: tr('mcp_tools_of', { server: binding.server }) }),
      h('p', null, h('label', { for: all.id }, all, ' ', tr('mcp_all_tools'))),
      h('ul', { 'aria-label': tr('mcp_tools_of', { server: binding.server }) }, boxes)))
  }

  return { el, load }
}

/**
 * The add form's part for an MCP server: the server, then its tools.
 * @param {any} fresh @param {any} draft @param {(obj: any, key: string, label: string, o?: any) => HTMLElement} field
 */
export function addFields(fresh, draft, field) {
  const servers = allowedServers(draft)
  if (!fresh.server && servers.length) fresh.server = servers[0]
  if (!('tools' in fresh)) fresh.tools = []
  const picker = toolPicker(fresh, draft, () => {})
  if (!servers.length) {
    return [h('p', { 'data-part': 'mcp-none', text: tr('mcp_no_servers', { env: draft.environment || 'default' }) })]
  }
  return [field(fresh, 'server', tr('mcp_server'), { kind: 'select', options: servers.map(s => [s, s]), onChange: () => { fresh.tools = []; picker.load() } }), picker.el]
}

/**
 * The Help tab's example for the add form in `root`: the first server the environment allows,
 * chosen as a person would (its input event lists its tools), then, once listed, its first
 * tool ticked. Resolves to what stopped it, or null. @param {HTMLElement} root @param {any} draft
 * @returns {Promise<string | null>}
 */
export function useExample(root, draft) {
  const [server] = allowedServers(draft)
  const select = /** @type {HTMLSelectElement | null} */ (root.querySelector('[data-part="prop"] select[data-key="server"]'))
  if (!server || !select) return Promise.resolve(tr('mcp_no_servers', { env: draft.environment || 'default' }))
  return new Promise(resolve => {
    root.addEventListener(LISTED, e => {
      const problem = /** @type {CustomEvent} */ (e).detail.problem
      const first = /** @type {HTMLInputElement | null} */ (root.querySelector('[data-part="mcp-tool"]'))
      if (!problem && first && !first.checked) first.click()
      resolve(problem)
    }, { once: true })
    select.value = server
    select.dispatchEvent(new Event('input', { bubbles: true }))
  })
}

/** The entry an add form makes. @param {any} fresh */
export function binding(fresh) {
  return { kind: 'mcp', server: fresh.server, tools: fresh.tools }
}

/**
 * The properties of a binding that other tools lack: its server, its tools, per-tool overrides.
 * @param {any} tool @param {any} draft @param {any} opts
 * @param {(obj: any, key: string, label: string, o?: any) => HTMLElement} field @param {() => void} changed
 */
export function bindingFields(tool, draft, opts, field, changed) {
  const servers = allowedServers(draft)
  const options = [...new Set([...servers, tool.server].filter(Boolean))].map(s => [s, s])
  const names = h('code')
  const chosen = h('p', { 'data-part': 'mcp-chosen' }, `${tr('mcp_chosen')}: `, names)
  const showChosen = () => { names.textContent = tool.tools === 'all' ? tr('mcp_all_tools') : (tool.tools || []).join(', ') || tr('none') }
  showChosen()
  const picker = toolPicker(tool, draft, () => { showChosen(); changed() })
  return [
    field(tool, 'server', tr('mcp_server'), { ...opts, kind: 'select', options, onChange: () => { tool.tools = []; picker.load() } }),
    chosen, picker.el,
    field(tool, 'overrides', tr('mcp_overrides'), { ...opts, kind: 'json', optional: true, help: tr('mcp_overrides_help') }),
    field(tool, 'max_response_kb', tr('max_response'), { ...opts, kind: 'number', optional: true }),
  ]
}
