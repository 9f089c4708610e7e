// Hostcall console: one conversation — its call ledger with the operator's actions, the
// transcript, runs, console actions and the event timeline. Refreshes every two seconds; a
// call's card is rebuilt only when its state changes, so a half-filled form survives.
// Everything from the conversation enters the DOM as text (h() uses textContent).

import { page, tr, h, api, when, every, json, ready, errorText } from './console.js'
import { schemaForm, fromInput } from '/static/form.js'

const id = page.data.id
const status = /** @type {HTMLElement} */ (document.querySelector('[data-part="status"]'))
const callsBox = /** @type {HTMLElement} */ (document.querySelector('[data-part="calls"]'))
/** @type {Map<string, {key: string, el: HTMLElement}>} */
const cards = new Map()
let shown = ''

const say = (/** @type {string} */ text) => { status.textContent = text }

/** @param {{ok: boolean, status: number, body: any}} result */
function failed(result) {
  say(tr('action_failed', { message: errorText(result) }))
}

/** POST an action on a call or run; refresh after. @param {string} path @param {unknown} body */
async function act(path, body) {
  const result = await api(path, body)
  if (result.ok) say(tr('done'))
  else failed(result)
  await refresh(true)
  return result
}

/** A small definition list of a call's facts. @param {any} c */
function facts(c) {
  const settled = c.state === 'answered' || c.state === 'rejected' || c.state === 'failed'
  // A block (HTTP, MCP, the built-in person tool…) ran on the server: nobody answered it.
  const by = c.answeredBy ? `${c.answeredBy.actor} (${c.answeredBy.action})`
    : c.simulated ? tr('simulated')
      : c.route === 'server' ? (settled ? tr('by_server', { kind: c.kind }) : tr('none'))
        : c.state === 'answered' || c.state === 'rejected' ? tr('visitor') : tr('none')
  const rows = [
    [tr('col_state'), h('code', { 'data-part': 'call-state', text: c.state })],
    [tr('col_route'), [h('span', { 'data-part': 'route', text: c.route === 'server' ? tr('route_server') : c.route }), pageTool(c)]],
    [tr('col_surface'), h('code', { 'data-part': 'surface', text: c.surfaceId || (c.formReason ? `form (${c.formReason})` : tr('none')) })],
    [tr('col_deadline'), c.deadline],
    [tr('col_by'), h('span', { 'data-part': 'answered-by', text: by })],
    [tr('input'), h('pre', { text: json(c.input) })],
  ]
  // Focusable: a long outcome scrolls, and a keyboard must reach it to scroll it.
  if (c.outcome) rows.push([tr('col_outcome'), h('pre', { 'data-part': 'outcome', tabindex: 0, text: json(c.outcome) })])
  return h('dl', { 'data-part': 'facts' }, rows.map(([k, v]) => [h('dt', { text: k }), h('dd', null, v)]))
}

/**
 * Beside the route, for a page's own tool: a label, and its registration's digest shortened
 * (the whole one in the title) to match against the page's. Nothing for an agent file's tool.
 * @param {any} c
 */
function pageTool(c) {
  if (!c.pageDigest) return null
  return [' ', h('span', { 'data-part': 'page-tool', text: tr('page_tool') }), ' ',
    h('code', { 'data-part': 'page-digest', title: tr('page_digest', { digest: c.pageDigest }), text: c.pageDigest.slice(0, 12) })]
}

/** The operator's actions on an open call. @param {any} c */
function actions(c) {
  const base = `/console/api/calls/${encodeURIComponent(c.toolCallId)}`
  const out = []
  if ((c.state === 'dispatched' || c.state === 'delivered') && c.kind === 'client') {
    const form = schemaForm(c.outputSchema, fromInput(c), {
      purpose: 'answer',
      label: tr('answer_title', { name: c.toolCallName }),
      submitLabel: tr('send_answer'),
      onSubmit: async output => {
        const result = await act(`${base}/answer`, { output })
        return result.status === 422 ? result.body.error?.details?.errors : undefined
      },
    })
    out.push(h('h4', { text: tr('answer_title', { name: c.toolCallName }) }), form.el)
  }
  if (c.state === 'awaiting_confirmation') {
    const edit = h('div', { 'data-part': 'edit-slot' })
    const reason = h('textarea', { id: `reason-${c.toolCallId}`, 'data-part': 'reject-reason', rows: 2 })
    const scope = scopeChoice(c)
    out.push(h('h4', { text: tr('decide_title', { name: c.toolCallName }) }), scope.el,
      h('div', { 'data-part': 'decision' },
        h('button', { type: 'button', 'data-part': 'approve', 'data-kind': 'primary', onclick: () => act(`${base}/decision`, { decision: 'approve', scope: scope.value() }) }, tr('approve')),
        h('button', { type: 'button', 'data-part': 'edit', onclick: () => {
          const form = schemaForm(c.inputSchema, c.input, {
            purpose: 'edit', label: tr('approve_edits'), submitLabel: tr('approve_edits'),
            onSubmit: async input => {
              const result = await act(`${base}/decision`, { decision: 'approve', input, scope: scope.value() })
              return result.status === 422 ? result.body.error?.details?.errors : undefined
            },
          })
          edit.replaceChildren(form.el)
          form.focus()
        } }, tr('approve_edits'))),
      edit,
      h('div', { 'data-part': 'reject-box' },
        h('label', { for: `reason-${c.toolCallId}`, text: tr('reject_reason') }), reason,
        h('button', { type: 'button', 'data-part': 'reject', 'data-kind': 'danger', onclick: () => act(`${base}/decision`, { decision: 'reject', reason: /** @type {HTMLTextAreaElement} */ (reason).value }) }, tr('reject_send'))))
  }
  if (['proposed', 'awaiting_confirmation', 'dispatched', 'delivered'].includes(c.state)) {
    out.push(h('p', null, h('button', { type: 'button', 'data-part': 'expire', 'data-kind': 'danger', onclick: () => confirm(tr('confirm_expire')) && act(`${base}/expire`, {}) }, tr('expire'))))
  }
  return out
}

/**
 * The scopes the call offers, as the widget shows them: "Just this once" or "For this
 * conversation" (later calls of the tool then run without asking; the server checks the
 * scope is offered). Nothing to choose when only "once" is offered. @param {any} c
 */
function scopeChoice(c) {
  const offered = ['once', 'conversation'].filter(s => (c.approval?.scopes || ['once']).includes(s))
  if (offered.length < 2) return { el: null, value: () => 'once' }
  const name = `scope-${c.toolCallId}`
  const el = h('fieldset', { 'data-part': 'scope' }, h('legend', { text: tr('scope_legend') }),
    offered.map(s => h('div', { 'data-part': 'scope-option' },
      h('input', { type: 'radio', id: `${name}-${s}`, name, value: s, 'data-part': `scope-${s}`, checked: s === 'once' }),
      h('label', { for: `${name}-${s}`, text: tr(`scope_${s}`) }))))
  const value = () => /** @type {HTMLInputElement | null} */ (el.querySelector('input:checked'))?.value || 'once'
  return { el, value }
}

/** @param {any} c */
function card(c) {
  return h('article', { 'data-part': 'call', 'data-call-id': c.toolCallId, 'data-state': c.state, 'aria-labelledby': `call-${c.toolCallId}` },
    h('h3', { id: `call-${c.toolCallId}` }, h('span', { text: c.toolCallName }), ' ', h('code', { text: c.toolCallId }), c.simulated ? ` (${tr('simulated')})` : ''),
    facts(c), actions(c))
}

/** @param {any} d */
function renderCalls(d) {
  if (!d.calls.length) {
    callsBox.replaceChildren(h('p', { text: tr('no_calls') }))
    cards.clear()
    return
  }
  const els = d.calls.slice().reverse().map((/** @type {any} */ c) => {
    const key = `${c.state}|${c.answeredBy?.actor || ''}|${c.delivered}`
    const known = cards.get(c.toolCallId)
    if (known && known.key === key) return known.el
    const el = card(c)
    cards.set(c.toolCallId, { key, el })
    return el
  })
  // Reorder without detaching a card that holds focus (the operator may be typing).
  els.forEach((/** @type {HTMLElement} */ el, /** @type {number} */ i) => {
    if (callsBox.children[i] !== el) callsBox.insertBefore(el, callsBox.children[i] || null)
  })
  while (callsBox.children.length > els.length) callsBox.lastElementChild?.remove()
}

// ---- human handoff: take over, write as yourself, hand back ----------------------------

const handoffBox = /** @type {HTMLElement} */ (document.querySelector('[data-part="handoff"]'))
let handoffKey = ''

/** Rebuilt only when who holds the conversation changes, so a half-written message survives.
 * @param {any} d */
function renderHandoff(d) {
  const held = d.handoff
  const mine = held?.state === 'taken' && held.person === page.me
  const key = `${held?.state || ''}|${held?.person || ''}`
  if (key === handoffKey) return
  handoffKey = key
  const base = `/console/api/conversations/${encodeURIComponent(id)}`
  const note = !held ? tr('handoff_agent') : held.state === 'waiting' ? tr('handoff_asked') : mine ? tr('handoff_mine') : tr('handoff_other', { name: held.person })
  const out = [h('p', { 'data-part': 'handoff-state', 'data-state': held?.state || 'agent', text: note })]
  if (!held || held.state === 'waiting') {
    out.push(h('button', { type: 'button', 'data-part': 'take-over', 'data-kind': 'primary', onclick: () => confirm(tr('confirm_take_over')) && act(`${base}/take-over`, {}) }, tr('take_over')))
  } else if (mine) {
    const box = /** @type {HTMLTextAreaElement} */ (h('textarea', { id: 'person-message', 'data-part': 'person-message', rows: 3, maxlength: 8000 }))
    out.push(h('form', { 'data-part': 'person-form', onsubmit: async (/** @type {Event} */ e) => {
      e.preventDefault()
      if (!box.value.trim()) return box.focus()
      const result = await act(`${base}/messages`, { text: box.value })
      if (result.ok) box.value = ''
      box.focus()
    } },
    h('label', { for: 'person-message', text: tr('person_message') }), box,
    h('div', { 'data-part': 'decision' },
      h('button', { type: 'submit', 'data-part': 'send-person', 'data-kind': 'primary' }, tr('send_as', { name: page.me })),
      h('button', { type: 'button', 'data-part': 'hand-back', onclick: () => act(`${base}/hand-back`, {}) }, tr('hand_back')))))
  }
  handoffBox.replaceChildren(...out)
}

/** What the visitor thought of a reply. @param {any} m */
function rating(m) {
  const f = m.feedback
  if (!f) return ''
  const said = tr('rated', { rating: tr(`rating_${f.rating}`) }) + (f.comment ? ` — “${f.comment}”` : '')
  return h('span', { 'data-part': 'feedback', 'data-rating': f.rating, text: ` ${said}` })
}

/** @param {any} d */
function render(d) {
  renderHandoff(d)
  renderCalls(d)
  document.querySelector('[data-part="transcript"]')?.replaceChildren(...d.messages.map((/** @type {any} */ m) =>
    h('li', { 'data-part': 'turn', 'data-role': m.role, 'data-superseded': m.supersededBy ? 'true' : null },
      h('strong', { text: m.author ? `${tr('role_operator')} (${m.author})` : tr(`role_${m.role}`) }), ' ',
      m.text ? h('span', { text: m.text }) : '', rating(m),
      m.supersededBy ? h('span', { 'data-part': 'superseded', text: ` (${tr('superseded', { run: m.supersededBy })})` }) : '',
      m.toolCalls.length ? h('span', { 'data-part': 'tool-calls', text: ` ${tr('calls_tools', { names: m.toolCalls.join(', ') })}` }) : '')))
  const runs = d.runs.slice().reverse()
  document.querySelector('[data-part="runs"]')?.replaceChildren(runs.length ? h('ul', null, runs.map((/** @type {any} */ r) =>
    h('li', { 'data-part': 'run', 'data-status': r.status },
      h('code', { text: r.id }), ' ', h('span', { text: tr(`status_${r.status}`) }),
      ` · ${tr('col_step')}: ${r.step}`, r.simulated ? ` · ${tr('simulated')}` : '',
      r.error ? h('span', { 'data-part': 'run-error', text: ` · ${r.error.code}: ${r.error.message}` }) : '',
      r.status === 'waiting' || r.status === 'running' ? h('button', { type: 'button', 'data-part': 'cancel-run', 'data-kind': 'danger', onclick: () => confirm(tr('confirm_cancel')) && act(`/console/api/runs/${encodeURIComponent(r.id)}/cancel`, {}) }, tr('cancel_run')) : ''))) : h('p', { text: tr('no_runs') }))
  document.querySelector('[data-part="audit"]')?.replaceChildren(...d.audit.map((/** @type {any} */ e) =>
    h('li', { 'data-part': 'audit-entry' }, h('time', { text: when(e.at) }), ` ${e.actor} · ${e.action}`, e.callId ? ` · ${e.callId}` : '')))
  document.querySelector('[data-part="timeline"] tbody')?.replaceChildren(...d.events.slice().reverse().map((/** @type {any} */ e) =>
    h('tr', { 'data-part': 'event', 'data-type': e.type },
      h('td', { text: String(e.seq) }), h('td', null, h('code', { text: e.type })),
      h('td', null, h('code', { 'data-part': 'event-data', text: JSON.stringify(e.data).slice(0, 300) })))))
}

/** @param {boolean} [force] */
async function refresh(force) {
  const result = await api(`/console/api/conversations/${encodeURIComponent(id)}`)
  if (!result.ok) return
  const key = `${result.body.lastSeq}|${result.body.audit.length}`
  if (!force && key === shown) return
  shown = key
  render(result.body)
}

await ready
shown = `${page.data.lastSeq}|${page.data.audit.length}`
render(page.data)
every(refresh, 2000)
