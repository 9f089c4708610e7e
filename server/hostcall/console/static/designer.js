// Hostcall console: the agent designer. Edits a draft of the agent file; every change is
// checked live by the server with the validator `hostcall check` runs (one validator, the
// same messages), shown verbatim in the problems list and beside the field they name. The
// tool's schemas get a live preview of the form they generate (the widget's form.js).

import { page, tr, h, api, ready, errorText } from './console.js'
import { schemaForm } from '/static/form.js'
import * as mcp from './designer_mcp.js'
import { fillForm, helpTabs } from './designer_help.js'
import { addNodeFields, blockDescription, installedBlocks, newNodeTool, nodeProperties } from './designer_nodes.js'

const agentId = page.data.agent.id
/** @type {any} */
const draft = structuredClone(page.data.agent)
if (!Array.isArray(draft.tools)) draft.tools = []
let selected = draft.tools.length ? 0 : -1
let adding = false
/** @type {string[]} */
let problems = []
let dirty = false

const editor = /** @type {HTMLElement} */ (document.querySelector('[data-part="editor"]'))
const side = /** @type {HTMLElement} */ (document.querySelector('[data-part="side"]'))
const problemList = h('ul', { 'data-part': 'problems', 'aria-labelledby': 'problems-title' })
const saveStatus = h('p', { 'data-part': 'save-status', role: 'status', 'aria-live': 'polite' })
const CLIENT_NAME = /^[\p{L}_][\p{L}\p{N} _]{0,63}$/u
const HTTP_NAME = /^[\p{L}_][\p{L}\p{N}_-]{0,63}$/u
const EMPTY_SCHEMA = { type: 'object', properties: {} }

// ============================================================================
// Fields: each edits one key of an object, and shows the problems that name it.
// ============================================================================

let fieldCount = 0

/**
 * A labelled control bound to `obj[key]`. kind: text, area, json, number, select, check.
 * @param {any} obj @param {string} key @param {string} label
 * @param {{kind?: string, options?: [string, string][], help?: string, tool?: string, optional?: boolean, onChange?: () => void}} [o]
 */
function field(obj, key, label, o = {}) {
  const kind = o.kind || 'text'
  const id = `f-${++fieldCount}`
  const err = h('p', { id: `${id}-err`, 'data-part': 'field-problem', hidden: true })
  const help = o.help ? h('p', { id: `${id}-help`, 'data-part': 'help', text: o.help }) : null
  const described = [help && `${id}-help`, `${id}-err`].filter(Boolean).join(' ')
  /** @type {any} */
  let control
  const value = obj[key]
  if (kind === 'area' || kind === 'json') {
    control = h('textarea', { id, rows: kind === 'json' ? 8 : 3, spellcheck: kind === 'json' ? 'false' : null, 'data-key': key })
    control.value = kind === 'json' ? (value === undefined ? '' : (typeof value === 'string' ? value : JSON.stringify(value, null, 2))) : (value ?? '')
  } else if (kind === 'select') {
    control = h('select', { id, 'data-key': key }, (o.options || []).map(([v, text]) => h('option', { value: v, text })))
    control.value = value ?? ''
  } else if (kind === 'check') {
    control = h('input', { id, type: 'checkbox', 'data-key': key })
    control.checked = Boolean(value)
  } else {
    control = h('input', { id, type: kind === 'number' ? 'number' : 'text', 'data-key': key, step: kind === 'number' ? 'any' : null })
    control.value = value ?? ''
  }
  control.setAttribute('aria-describedby', described)
  const wrap = h('div', { 'data-part': 'prop', 'data-key': key, 'data-tool': o.tool ?? null },
    kind === 'check' ? h('label', { for: id }, control, ' ', label) : [h('label', { for: id, text: label }), control], help, err)
  control.addEventListener('input', () => {
    err.hidden = true
    control.removeAttribute('aria-invalid')
    const raw = kind === 'check' ? control.checked : control.value
    if (kind === 'json') {
      if (!raw.trim() && o.optional) delete obj[key]
      else {
        try { obj[key] = JSON.parse(raw) } catch (e) {
          // Kept as text: the server's check then names the field, as `hostcall check` would.
          obj[key] = raw
          showError(wrap, tr('json_invalid', { message: /** @type {Error} */ (e).message }))
        }
      }
    } else if (kind === 'number') {
      if (raw === '' && o.optional) delete obj[key]
      else obj[key] = raw === '' ? raw : Number(raw)
    } else if (kind === 'check') obj[key] = raw
    else if (raw === '' && o.optional) delete obj[key]
    else obj[key] = raw
    o.onChange?.()
    changed()
  })
  return wrap
}

/**
 * Show `message` under the field; `alert`: also announce it at once (a refused action),
 * not only when the field is next read. `fromCheck`: the server's check said it, and its
 * next answer takes it back; anything else stays until the field is edited.
 * @param {HTMLElement} wrap @param {string} message
 */
function showError(wrap, message, alert = false, fromCheck = false) {
  const err = /** @type {HTMLElement} */ (wrap.querySelector('[data-part="field-problem"]'))
  if (alert) err.setAttribute('role', 'alert')
  else err.removeAttribute('role')
  if (fromCheck) err.dataset.from = 'check'
  else delete err.dataset.from
  err.hidden = false
  err.textContent = message
  wrap.querySelector('[data-key]')?.setAttribute('aria-invalid', 'true')
}

/** Why `name` cannot name a tool of this kind, or '' if it can. @param {string} name @param {boolean} serverSide */
function nameProblem(name, serverSide) {
  if (!name.trim()) return tr('name_missing')
  return (serverSide ? HTTP_NAME : CLIENT_NAME).test(name) ? '' : tr(serverSide ? 'name_invalid_http' : 'name_invalid_client', { name })
}

// ============================================================================
// The agent's own fields, the tool list, "Add tool" and the properties panel.
// ============================================================================

function agentFields() {
  const origins = { lines: (draft.allowed_origins || []).join('\n') }
  const originField = field(origins, 'lines', tr('origins'), { kind: 'area', onChange: () => {
    draft.allowed_origins = origins.lines.split('\n').map(s => s.trim()).filter(Boolean)
  } })
  originField.querySelector('textarea')?.setAttribute('data-key', 'allowed_origins')
  originField.dataset.key = 'allowed_origins'
  return h('fieldset', { 'data-part': 'agent-fields' }, h('legend', { text: tr('agent_settings') }),
    field(draft, 'name', tr('agent_name')),
    field(draft, 'greeting', tr('greeting'), { kind: 'area', optional: true }),
    field(draft, 'instructions', tr('instructions'), { kind: 'area', optional: true }),
    originField,
    field(draft, 'environment', tr('environment'), { kind: 'select', optional: true, options: [['', tr('none')], ...page.data.environments.map((/** @type {string} */ e) => [e, e])] }),
    field(draft, 'max_steps', tr('max_steps'), { kind: 'number', optional: true }),
    field(draft, 'model', tr('model'), { kind: 'json', optional: true }))
}

/** @param {any} tool */
const kindLabel = tool => tool.kind === 'block' || typeof tool.block === 'string' ? tr('node_tool')
  : tool.kind === 'person' ? tr('person_tool')
    : tool.kind === 'http' || tool.toolName ? tr('http_tool') : tr('client_tool')

function toolList() {
  return h('fieldset', { 'data-part': 'tools' }, h('legend', { text: tr('tools') }),
    draft.tools.length ? h('ul', { 'data-part': 'tool-list', 'aria-label': tr('tool_list') }, draft.tools.map((/** @type {any} */ tool, /** @type {number} */ i) =>
      h('li', null, h('button', { type: 'button', 'data-part': 'tool-tab', 'aria-pressed': String(i === selected && !adding), onclick: () => { selected = i; adding = false; render('[data-part="properties"] input') } },
        tool.kind === 'mcp' ? `${tool.server ?? '?'} (${tr('mcp_tool')})` : `${tool.name ?? tool.toolName ?? '?'} (${kindLabel(tool)})`)))) : h('p', { text: tr('no_tools') }),
    h('button', { type: 'button', 'data-part': 'add-tool', onclick: () => { adding = true; render('[data-part="add-tool"] input') } }, tr('add_tool')))
}

/** The "Add tool" form: category, then the fields that category needs; Create adds it. */
function addToolForm() {
  const fresh = { kind: 'client', name: '', description: '', input_schema: structuredClone(EMPTY_SCHEMA), output_schema: structuredClone(EMPTY_SCHEMA) }
  /** @type {any} */
  const http = { method: 'GET', url: 'https://' }
  const choice = { block: '' }
  const body = h('div')
  /** @type {any} */
  const server = {}
  const name = field(fresh, 'name', tr('tool_name'), { help: tr('name_rule') })
  const description = field(fresh, 'description', tr('description'), { kind: 'area' })
  const panes = h('div', { 'data-part': 'add-panes' })
  const fill = () => {
    // A server's tools bring their own names and descriptions.
    name.hidden = description.hidden = fresh.kind === 'mcp'
    body.replaceChildren(...(fresh.kind === 'client'
      ? [field(fresh, 'input_schema', tr('input_schema'), { kind: 'json' }), field(fresh, 'output_schema', tr('output_schema'), { kind: 'json' })]
      : fresh.kind === 'mcp' ? mcp.addFields(server, draft, field)
        : fresh.kind === 'block' ? addNodeFields(choice, field)
          : [field(http, 'method', tr('method'), { kind: 'select', options: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map(m => [m, m]) }), field(http, 'url', tr('url')),
            field(http, 'ai_params', tr('ai_params'), { kind: 'json', optional: true })]))
    panes.replaceChildren(...helpTabs(fresh.kind, [name, description, body], example => fresh.kind === 'mcp' ? mcp.useExample(panes, draft) : fillForm(panes, example)))
  }
  const category = field(fresh, 'kind', tr('category'), { kind: 'select', options: [['client', tr('client_tool')], ['http', tr('http_tool')], ['mcp', tr('mcp_tool')], ['block', tr('node_tool')]], onChange: fill })
  fill()
  return h('form', { 'data-part': 'add-tool', 'aria-labelledby': 'add-tool-title', novalidate: true, onsubmit: (/** @type {Event} */ e) => {
    e.preventDefault()
    if (fresh.kind === 'mcp') {
      const status = /** @type {HTMLElement | null} */ (body.querySelector('[data-part="mcp-status"]'))
      if (!server.server || !(server.tools === 'all' || server.tools?.length)) {
        if (status) { status.textContent = tr('mcp_choose_tools'); status.dataset.kind = 'error' }
        /** @type {HTMLElement | null} */ (body.querySelector('[data-part="mcp-show-tools"], select'))?.focus()
        return
      }
      draft.tools.push(mcp.binding(server))
      selected = draft.tools.length - 1
      adding = false
      changed()
      render('[data-part="properties"] select')
      return
    }
    const problem = nameProblem(fresh.name, fresh.kind !== 'client')
    if (problem) {
      if (name.closest('[hidden]')) /** @type {HTMLElement | null} */ (panes.querySelector('[data-part="fields-tab"]'))?.click()
      showError(name, problem, true)
      name.querySelector('input')?.focus()
      return
    }
    if (fresh.kind === 'block' && !installedBlocks().length) { body.querySelector('[data-part="no-blocks"]')?.scrollIntoView({ block: 'nearest' }); return }
    const tool = fresh.kind === 'client' ? { ...fresh }
      : fresh.kind === 'block' ? newNodeTool(fresh, choice)
        : { name: fresh.name, kind: 'http', description: fresh.description, request: { method: http.method, url: http.url }, ai_params: http.ai_params ?? [] }
    if (fresh.kind === 'client') delete tool.kind
    draft.tools.push(tool)
    selected = draft.tools.length - 1
    adding = false
    changed()
    render('[data-part="properties"] input')
  } },
  h('h2', { id: 'add-tool-title', text: tr('add_tool_title') }),
  category, panes,
  h('div', { 'data-part': 'actions' },
    h('button', { type: 'submit', 'data-kind': 'primary', 'data-part': 'create-tool' }, tr('create_tool')),
    h('button', { type: 'button', 'data-part': 'cancel-tool', onclick: () => { adding = false; render() } }, tr('cancel'))))
}

/** A live preview of the form a schema generates (nothing is sent). @param {any} tool @param {string} key */
function preview(tool, key) {
  const box = h('div', { 'data-part': 'preview', 'data-schema': key, role: 'group', 'aria-label': `${tr('preview')}: ${tr(key)}` })
  const draw = () => {
    const schema = tool[key]
    if (!schema || typeof schema !== 'object' || schema.type !== 'object') {
      box.replaceChildren(h('p', { text: tr('preview_none') }))
      return
    }
    try {
      const form = schemaForm(schema, undefined, { purpose: 'preview', label: tr('preview'), submitLabel: tr('preview_submit'), onSubmit: async () => {} })
      box.replaceChildren(h('p', { 'data-part': 'help', text: tr('preview') }), form.el)
    } catch {
      box.replaceChildren(h('p', { text: tr('preview_none') }))
    }
  }
  draw()
  return { el: box, draw }
}

/** The properties panel of the selected tool: every field and policy the agent file has. */
function properties() {
  const tool = draft.tools[selected]
  if (tool.kind === 'mcp') return bindingProperties(tool)
  const name = tool.name ?? tool.toolName
  const http = tool.kind === 'http'
  const node = tool.kind === 'block'
  const serverSide = http || node
  const opts = { tool: name }
  const req = http ? (tool.request || (tool.request = {})) : {}
  const approval = field(tool, 'approval', tr('approval'), { ...opts, kind: 'select', optional: true, options: [['', tr('none')], ...page.data.approvals.map((/** @type {string} */ a) => [a, tr(`approval_${a}`)])], onChange: () => { delete tool.require_confirmation; confirmBox.checked = tool.approval === 'always' } })
  const confirmation = { on: tool.approval === 'always' || tool.require_confirmation === true }
  const confirmField = field(confirmation, 'on', tr('require_confirmation'), { ...opts, kind: 'check', onChange: () => {
    delete tool.require_confirmation
    if (confirmation.on) tool.approval = 'always'
    else if (tool.approval === 'always') delete tool.approval
    const select = /** @type {HTMLSelectElement} */ (approval.querySelector('select'))
    select.value = tool.approval ?? ''
  } })
  confirmField.dataset.key = 'require_confirmation'
  const confirmBox = /** @type {HTMLInputElement} */ (confirmField.querySelector('input'))
  const schemaField = (/** @type {string} */ key) => {
    const view = preview(tool, key)
    const f = field(tool, key, tr(key), { ...opts, kind: 'json', optional: serverSide, onChange: view.draw })
    return [f, view.el]
  }
  const nameField = field(tool, tool.toolName ? 'toolName' : 'name', tr('tool_name'), { ...opts, help: tr('name_rule'), onChange: () => {
    const problem = nameProblem(tool.name ?? tool.toolName ?? '', serverSide)
    if (problem) showError(nameField, problem)
  } })
  nameField.dataset.key = 'name'
  const titleField = field(tool, 'title', tr('display_title'), { ...opts, optional: true })
  const descriptionField = field(tool, 'description', tr('description'), { ...opts, kind: 'area', optional: node })
  // A node tool without a description of its own has its block's: shown, not copied.
  if (node) descriptionField.querySelector('textarea')?.setAttribute('placeholder', blockDescription(tool))
  return h('fieldset', { 'data-part': 'properties', 'data-tool': name },
    h('legend', { text: tr('properties', { name }) }),
    nameField, titleField,
    descriptionField,
    node ? [...nodeProperties(tool, field, opts), schemaField('output_schema')] : http ? [
      field(req, 'method', tr('method'), { ...opts, kind: 'select', options: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map(m => [m, m]) }),
      field(req, 'url', tr('url'), opts),
      field(req, 'query', tr('query'), { ...opts, kind: 'json', optional: true }),
      field(req, 'headers', tr('headers'), { ...opts, kind: 'json', optional: true }),
      field(req, 'body', tr('body'), { ...opts, kind: 'json', optional: true }),
      field(tool, 'ai_params', tr('ai_params'), { ...opts, kind: 'json', optional: true }),
      h('p', { 'data-part': 'allowed-targets' }, `${tr('allowed_targets')}: `,
        h('code', { text: (page.data.allowedTargets[draft.environment || 'default'] || []).join(', ') || tr('none') })),
      field(tool, 'connection', tr('connection'), { ...opts, kind: 'select', optional: true, options: [['', tr('no_connection')], ...page.data.connections.map((/** @type {string} */ c) => [c, c])] }),
      field(tool, 'max_response_kb', tr('max_response'), { ...opts, kind: 'number', optional: true }),
      schemaField('output_schema'),
    ] : tool.kind === 'person' ? [] : [schemaField('input_schema'), schemaField('output_schema')],
    confirmField, approval, policyFields(tool, opts),
    field(tool, 'simulation_result', tr('simulation'), { ...opts, kind: 'json', optional: true }),
    field(tool, 'guardrails', tr('guardrails'), { ...opts, kind: 'json', optional: true }),
    removeButton())
}

/** The policies every tool has, beside approval. @param {any} tool @param {any} opts */
function policyFields(tool, opts) {
  return [
    field(tool, 'effect', tr('effect'), { ...opts, kind: 'select', optional: true, options: [['', tr('none')], ...page.data.effects.map((/** @type {string} */ e) => [e, tr(`effect_${e}`)])] }),
    field(tool, 'deadline_seconds', tr('deadline'), { ...opts, kind: 'number', optional: true }),
    field(tool, 'approval_timeout_seconds', tr('approval_timeout'), { ...opts, kind: 'number', optional: true }),
    field(tool, 'max_calls_per_pass', tr('max_calls'), { ...opts, kind: 'number', optional: true }),
    field(tool, 'max_result_kb', tr('max_result'), { ...opts, kind: 'number', optional: true }),
  ]
}

function removeButton() {
  return h('button', { type: 'button', 'data-part': 'remove-tool', 'data-kind': 'danger', onclick: () => {
    draft.tools.splice(selected, 1)
    selected = draft.tools.length ? 0 : -1
    changed()
    render()
  } }, tr('remove_tool'))
}

/** An MCP server's tools: the server, the chosen tools, and the policies they all get. @param {any} tool */
function bindingProperties(tool) {
  const opts = { tool: `mcp:${tool.server}` }
  return h('fieldset', { 'data-part': 'properties', 'data-tool': opts.tool, 'data-mcp-server': tool.server ?? '' },
    h('legend', { text: tr('mcp_properties', { server: tool.server ?? '?' }) }),
    mcp.bindingFields(tool, draft, opts, field, changed),
    field(tool, 'approval', tr('approval'), { ...opts, kind: 'select', optional: true, options: [['', tr('none')], ...page.data.approvals.map((/** @type {string} */ a) => [a, tr(`approval_${a}`)])] }),
    policyFields(tool, opts),
    field(tool, 'guardrails', tr('guardrails'), { ...opts, kind: 'json', optional: true }),
    removeButton())
}

// ============================================================================
// Problems, saving, and the "try it" pane.
// ============================================================================

/**
 * Show the checker's lines, and each beside the field it names ("tool 'x': 'key' ..."). Only
 * the lines of its last answer are taken back: a check answers whenever the network lets it
 * (late, on a slow device), and what this page said itself (Create refused, JSON that does
 * not parse) stays true until the person edits the field.
 */
function showProblems() {
  // What this page found itself (JSON that does not parse, a refused name) counts too: the
  // server checked the field's text as it stands, and may see nothing wrong with a string.
  const own = [...editor.querySelectorAll('[data-part="prop"] > [data-part="field-problem"]:not([data-from="check"]):not([hidden])')]
    .map(err => `${err.parentElement?.querySelector('label')?.textContent?.trim() || ''}: ${err.textContent}`)
  const lines = [...own.map(text => h('li', { 'data-part': 'problem', 'data-from': 'page', text })),
    ...problems.map(p => h('li', { 'data-part': 'problem', text: p }))]
  problemList.replaceChildren(...(lines.length ? lines : [h('li', { 'data-part': 'no-problems', text: tr('no_problems') })]))
  for (const err of editor.querySelectorAll('[data-part="prop"] > [data-part="field-problem"][data-from="check"]')) {
    /** @type {HTMLElement} */ (err).hidden = true
    err.parentElement?.querySelector('[data-key]')?.removeAttribute('aria-invalid')
  }
  for (const p of problems) {
    const server = /MCP server '([^']+)'/.exec(p)
    if (server) {
      // "MCP server 'crm' is not allowed in …" is the server's; "MCP server 'crm': 'effect' …" a key's.
      const rest = p.slice(server.index + server[0].length).replace(/^: tool '[^']+'/, '')
      const key = rest.startsWith(' is not') ? 'server' : /'(\w+)'/.exec(rest)?.[1] || 'server'
      const scope = editor.querySelector(`[data-part="properties"][data-mcp-server="${CSS.escape(server[1])}"]`)
      const wrap = /** @type {HTMLElement | null | undefined} */ (scope?.querySelector(`[data-part="prop"][data-key="${CSS.escape(key)}"]`))
      if (wrap) showError(wrap, p, false, true)
      continue
    }
    const tool = /tool '([^']+)'/.exec(p)?.[1]
    const rest = tool ? p.slice(p.indexOf(`tool '${tool}'`) + tool.length + 7) : p.slice(p.indexOf(':') + 1)
    // A model's lines ("model: 'api_key_env' …") quote keys inside the model's JSON: its field.
    const key = !tool && /^\s*model:/.test(rest) ? 'model' : /'(\w+)'/.exec(rest)?.[1] || (tool ? 'name' : '')
    const scope = tool ? editor.querySelector(`[data-part="properties"][data-tool="${CSS.escape(tool)}"]`) : editor.querySelector('[data-part="agent-fields"]')
    const wrap = /** @type {HTMLElement | null | undefined} */ (scope?.querySelector(`[data-part="prop"][data-key="${CSS.escape(key)}"]`))
    if (wrap) showError(wrap, p, false, true)
  }
}

let timer = 0
/** Checks asked for; an answer to any but the last is stale (it checked an older draft). */
let checks = 0
function changed() {
  dirty = true
  delete saveStatus.dataset.kind
  saveStatus.textContent = tr('unsaved')
  clearTimeout(timer)
  timer = window.setTimeout(check, 350)
}

/** Ask the server's checker about the draft; the problems list is `aria-busy` meanwhile. */
async function check() {
  const n = ++checks
  problemList.setAttribute('aria-busy', 'true')
  const result = await api(`/console/api/agents/${encodeURIComponent(agentId)}/check`, { agent: draft })
  if (n !== checks) return
  problemList.removeAttribute('aria-busy')
  if (result.ok) {
    problems = result.body.problems
    showProblems()
  }
}

async function save() {
  saveStatus.textContent = tr('saving')
  delete saveStatus.dataset.kind
  const result = await api(`/console/api/agents/${encodeURIComponent(agentId)}`, { agent: draft })
  if (result.ok) {
    dirty = false
    problems = []
    showProblems()
    saveStatus.textContent = tr('saved', { n: result.body.version })
    reloadTry()
  } else {
    problems = result.body.error?.details?.problems || [errorText(result)]
    showProblems()
    saveStatus.textContent = problems[0]
    saveStatus.dataset.kind = 'error'
    problemList.querySelector('li')?.scrollIntoView({ block: 'nearest' })
  }
}

const simulate = h('input', { type: 'checkbox', id: 'try-simulate', 'data-part': 'simulate', onchange: () => reloadTry() })
const frame = h('iframe', { 'data-part': 'try-frame', title: `${tr('try_it')}: ${agentId}` })
function reloadTry() {
  const query = new URLSearchParams({ locale: page.lang })
  if (/** @type {HTMLInputElement} */ (simulate).checked) query.set('simulate', '1')
  frame.setAttribute('src', `/widget/${encodeURIComponent(agentId)}?${query}`)
}

/** Draw the editor; `focus` (a selector) gets the focus after, for keyboard users. @param {string} [focus] */
function render(focus) {
  editor.replaceChildren(agentFields(), toolList(), adding ? addToolForm() : (selected >= 0 ? properties() : ''),
    h('div', { 'data-part': 'save-bar' },
      h('button', { type: 'button', 'data-part': 'save', 'data-kind': 'primary', onclick: save }, tr('save')), saveStatus))
  showProblems()
  if (focus) /** @type {HTMLElement | null} */ (editor.querySelector(focus))?.focus()
}

await ready
side.replaceChildren(
  h('section', { 'aria-labelledby': 'problems-title' }, h('h2', { id: 'problems-title', text: tr('problems') }), problemList),
  h('section', { 'aria-labelledby': 'try-title', 'data-part': 'try' },
    h('h2', { id: 'try-title', text: tr('try_it') }), h('p', { 'data-part': 'help', text: tr('try_hint') }),
    h('p', null, h('label', { for: 'try-simulate' }, simulate, ' ', tr('simulate'))), frame))
render()
reloadTry()
check()
window.addEventListener('beforeunload', e => { if (dirty) e.preventDefault() })
