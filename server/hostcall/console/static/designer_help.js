// Hostcall console: the designer's Help tab, one for each kind of tool the "Add tool" form
// makes. It says what the kind is for and shows one worked example; "Use this example" fills
// the form with it as typing would (each field's own input handler runs, so the draft and the
// live check follow), and Create then adds it like any other tool.

import { tr, h } from './console.js'

/**
 * Each kind's example: the add form's fields by their data-key. The HTTP one is the seed's
 * `meteo`, whose city the model provides (`{{ $fromAI.ville }}`, checked against its schema
 * before the request is made). The MCP one is null: what it can choose is the environment's
 * servers and the tools the first one lists, known only once listed (help_mcp_example says so).
 * @type {Record<string, Record<string, unknown> | null>}
 */
export const EXAMPLES = {
  client: {
    name: 'create_task',
    description: 'Creates a task on the visitor’s board; the page adds it and answers with the task.',
    input_schema: { type: 'object', properties: { title: { type: 'string', minLength: 1 } }, required: ['title'] },
    output_schema: { type: 'object', properties: { id: { type: 'string' }, title: { type: 'string' } }, required: ['id'] },
  },
  http: {
    name: 'meteo',
    description: 'Température d’une ville',
    method: 'GET',
    url: 'https://wttr.in/{{ $fromAI.ville }}?format=j1',
    ai_params: [{ key: 'ville', type: 'string', description: 'Ville', required: true }],
  },
  block: {
    name: 'lookup',
    description: 'Looks the visitor’s question up with the installed block chosen below.',
  },
  mcp: null,
}

/**
 * The add form's body for `kind` under two tabs, "Fields" and "Help". `apply` fills the form
 * with the example; when it answers (at once or once a server has listed) with what stopped
 * it, the Help tab comes back and says so. @param {string} kind @param {HTMLElement[]} fields
 * @param {(example: Record<string, unknown>) => void | Promise<string | null>} apply
 */
export function helpTabs(kind, fields, apply) {
  const example = EXAMPLES[kind] ?? {}
  const fieldsPanel = h('div', { id: 'add-fields-panel', role: 'tabpanel', 'aria-labelledby': 'add-fields-tab', 'data-part': 'fields-panel' }, fields)
  const hasExample = kind in EXAMPLES
  const stopped = h('p', { 'data-part': 'example-problem', role: 'alert', hidden: true })
  const helpPanel = h('div', { id: 'add-help-panel', role: 'tabpanel', 'aria-labelledby': 'add-help-tab', 'data-part': 'help-panel', 'data-kind': kind, hidden: true },
    h('p', { 'data-part': 'kind-help', text: tr(`help_${kind}`) }),
    hasExample ? [
      EXAMPLES[kind] ? [h('p', { text: tr('help_example') }), h('pre', { 'data-part': 'example', text: JSON.stringify(example, null, 2) })]
        : h('p', { 'data-part': 'example', text: tr(`help_${kind}_example`) }),
      h('button', { type: 'button', 'data-part': 'use-example', 'data-kind': 'primary', onclick: async () => {
        stopped.hidden = true
        show(false)
        const problem = await apply(example)
        if (!problem) return
        stopped.textContent = problem
        stopped.hidden = false
        show(true)
      } }, tr('help_use_example')),
      stopped,
    ] : '')
  const fieldsTab = h('button', { type: 'button', role: 'tab', id: 'add-fields-tab', 'aria-controls': 'add-fields-panel', 'data-part': 'fields-tab', onclick: () => show(false) }, tr('help_fields_tab'))
  const helpTab = h('button', { type: 'button', role: 'tab', id: 'add-help-tab', 'aria-controls': 'add-help-panel', 'data-part': 'help-tab', onclick: () => show(true) }, tr('help_tab'))
  /** @param {boolean} help */
  function show(help) {
    helpPanel.hidden = !help
    fieldsPanel.hidden = help
    fieldsTab.setAttribute('aria-selected', String(!help))
    helpTab.setAttribute('aria-selected', String(help))
    fieldsTab.tabIndex = help ? -1 : 0
    helpTab.tabIndex = help ? 0 : -1
    ;(help ? helpTab : fieldsTab).focus()
  }
  fieldsTab.setAttribute('aria-selected', 'true')
  helpTab.setAttribute('aria-selected', 'false')
  helpTab.tabIndex = -1
  const list = h('div', { role: 'tablist', 'aria-label': tr('help_tabs'), 'data-part': 'add-tabs', onkeydown: (/** @type {KeyboardEvent} */ e) => {
    if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') show(helpPanel.hidden)
  } }, fieldsTab, helpTab)
  return [list, fieldsPanel, helpPanel]
}

/**
 * Fill `form`'s fields with `example`, each as a person typing it would: its value set, then
 * its input event. @param {HTMLElement} form @param {Record<string, unknown>} example
 */
export function fillForm(form, example) {
  for (const [key, value] of Object.entries(example)) {
    const control = /** @type {HTMLInputElement | null} */ (form.querySelector(`[data-part="prop"] [data-key="${CSS.escape(key)}"]`))
    if (!control) continue
    control.value = typeof value === 'string' ? value : JSON.stringify(value, null, 2)
    control.dispatchEvent(new Event('input', { bubbles: true }))
  }
}
