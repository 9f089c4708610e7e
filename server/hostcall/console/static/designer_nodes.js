// Hostcall console: installed nodes in the designer. Choose a block from what this server's
// packages provide (`hostcall blocks`), start its config from the block's JSON Schema
// (defaults, and an empty value of the right type for each required field), and read the
// fields it takes beside the config. The server checks the config against the same schema,
// and its lines land beside the config field like any other.

import { page, tr, h } from './console.js'

/** @typedef {{name: string, package: string, version: string, description: string, configSchema: any}} Block */
/** @typedef {(obj: any, key: string, label: string, o?: any) => HTMLElement} Field */

/** The installed blocks the server offered. @returns {Block[]} */
export const installedBlocks = () => page.data.blocks || []

/** @param {string} name @returns {Block | undefined} */
const blockNamed = name => installedBlocks().find(b => b.name === name)

const EMPTY = /** @type {Record<string, unknown>} */ ({ string: '', number: 0, integer: 0, boolean: false, array: [], object: {} })

/**
 * A first config for a block: each property's default, and for a required one without a
 * default the first of its `enum`, else an empty value of its type.
 * @param {any} schema
 */
export function configSkeleton(schema) {
  /** @type {Record<string, unknown>} */
  const config = {}
  const required = new Set(Array.isArray(schema?.required) ? schema.required : [])
  for (const [key, prop] of Object.entries(schema?.properties || {})) {
    const p = /** @type {any} */ (prop)
    if ('default' in p) config[key] = structuredClone(p.default)
    else if (required.has(key)) {
      const type = Array.isArray(p.type) ? p.type[0] : p.type
      config[key] = Array.isArray(p.enum) ? p.enum[0] : structuredClone(EMPTY[type] ?? '')
    }
  }
  return config
}

/** What a property takes, in a few words: its type, or the values of its enum. @param {any} p */
const takes = p => Array.isArray(p.enum) ? p.enum.map((/** @type {unknown} */ v) => JSON.stringify(v)).join(' | ')
  : [].concat(p.type || (p.items ? 'array' : 'any')).join(' | ')

/** The fields a block's config takes, as a list read beside the config (text only). @param {Block} block */
export function configFields(block) {
  const schema = block.configSchema || {}
  const required = new Set(Array.isArray(schema.required) ? schema.required : [])
  const rows = Object.entries(schema.properties || {}).map(([key, prop]) => {
    const p = /** @type {any} */ (prop)
    return h('li', { 'data-part': 'config-field', 'data-key': key },
      h('code', { text: key }), ` (${takes(p)}${required.has(key) ? `, ${tr('field_required')}` : ''})`,
      p.description ? ` — ${p.description}` : '')
  })
  return h('div', { 'data-part': 'config-fields' },
    h('p', { 'data-part': 'help', text: `${block.package} ${block.version}: ${block.description}` }),
    rows.length ? [h('p', { text: tr('config_fields') }), h('ul', null, rows)] : h('p', { text: tr('config_any') }),
    h('p', { 'data-part': 'help', text: tr('config_from_ai') }))
}

/**
 * The "Add tool" fields of the node category: which block. `choice.block` holds the name.
 * @param {{block: string}} choice @param {Field} field
 */
export function addNodeFields(choice, field) {
  const blocks = installedBlocks()
  if (!blocks.length) return [h('p', { 'data-part': 'no-blocks', role: 'status', text: tr('no_blocks') })]
  if (!blockNamed(choice.block)) choice.block = blocks[0].name
  const about = h('div', null, configFields(/** @type {Block} */ (blockNamed(choice.block))))
  const select = field(choice, 'block', tr('block'), {
    kind: 'select',
    options: blocks.map(b => [b.name, `${b.name} — ${b.description}`]),
    onChange: () => about.replaceChildren(configFields(/** @type {Block} */ (blockNamed(choice.block)))),
  })
  return [select, about]
}

/**
 * The tool the "Add tool" form creates for a block: its config started from the schema; no
 * description of its own (the block's is used) unless one was written.
 * @param {{name: string, description: string}} fresh @param {{block: string}} choice
 * @returns {any}
 */
export function newNodeTool(fresh, choice) {
  const block = blockNamed(choice.block)
  const tool = { name: fresh.name, kind: 'block', block: choice.block, config: configSkeleton(block?.configSchema), ai_params: [] }
  return fresh.description.trim() ? { ...tool, description: fresh.description } : tool
}

/** The description a node tool has when it gives none: its block's. @param {any} tool */
export const blockDescription = tool => blockNamed(tool.block)?.description ?? ''

/**
 * The properties panel's part for a node tool: its block, config and AI parameters.
 * @param {any} tool @param {Field} field @param {{tool: string}} opts
 */
export function nodeProperties(tool, field, opts) {
  const block = blockNamed(tool.block)
  // Not editable: another block takes another config; add a new tool for it.
  const name = h('div', { 'data-part': 'prop', 'data-key': 'block' },
    h('p', null, `${tr('block')}: `, h('code', { text: String(tool.block ?? '?') })),
    h('p', { 'data-part': 'field-problem', hidden: true }))
  return [
    name,
    block ? configFields(block) : h('p', { 'data-part': 'no-blocks', text: tr('block_missing') }),
    field(tool, 'config', tr('config'), { ...opts, kind: 'json' }),
    field(tool, 'ai_params', tr('ai_params'), { ...opts, kind: 'json', optional: true }),
  ]
}
