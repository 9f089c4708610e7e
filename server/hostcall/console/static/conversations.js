// Hostcall console: the conversation list. Rows come from JSON and enter the DOM as text;
// the list refreshes every few seconds with the same filters (newest first, paginated).

import { page, tr, h, api, when, every } from './console.js'

const rows = /** @type {HTMLElement} */ (document.querySelector('[data-part="rows"]'))
const empty = /** @type {HTMLElement} */ (document.querySelector('[data-part="empty"]'))
const pager = /** @type {HTMLElement} */ (document.querySelector('[data-part="pager"]'))

/** @param {{items: any[], page: number, hasMore: boolean}} listing */
function render(listing) {
  rows.replaceChildren(...listing.items.map(c => h('tr', { 'data-part': 'conversation', 'data-id': c.id, 'data-waiting': c.waiting > 0 || c.handoff === 'waiting' ? 'yes' : 'no' },
    h('td', null, h('a', { href: `/console/conversations/${encodeURIComponent(c.id)}`, 'data-part': 'open', text: c.id })),
    h('td', { text: c.agentId }),
    h('td', null, c.person
      ? h('a', { href: `/console/people?${new URLSearchParams({ agent: c.agentId, person: c.person })}`, 'data-part': 'person', text: c.person })
      : tr('none')),
    h('td', null, h('time', { datetime: new Date(c.createdAt * 1000).toISOString(), text: when(c.createdAt) })),
    h('td', null, h('span', { 'data-part': 'run-status', 'data-status': c.runStatus || 'none', text: tr(`status_${c.runStatus || 'none'}`) })),
    h('td', null, c.waiting ? h('span', { 'data-part': 'waiting-badge', text: String(c.waiting) }) : tr('none')),
    h('td', { 'data-part': 'handoff', 'data-state': c.handoff || 'none', text: c.handoff === 'taken' ? tr('held_by', { name: c.heldBy }) : c.handoff ? tr('handoff_waiting') : tr('none') }),
    h('td', { 'data-part': 'feedback-counts', text: c.feedbackUp || c.feedbackDown ? tr('feedback_counts', { up: c.feedbackUp, down: c.feedbackDown }) : tr('none') }),
    h('td', { 'data-part': 'first-message', text: c.firstMessage || tr('none') }))))
  empty.hidden = listing.items.length > 0
  const link = (/** @type {number} */ n, /** @type {string} */ label, /** @type {string} */ part) => {
    const query = new URLSearchParams(location.search)
    query.set('page', String(n))
    return h('a', { href: `?${query}`, 'data-part': part, text: label })
  }
  pager.replaceChildren(
    listing.page > 1 ? link(listing.page - 1, tr('newer'), 'newer') : '',
    h('span', { text: tr('page_n', { n: listing.page }) }),
    listing.hasMore ? link(listing.page + 1, tr('older'), 'older') : '')
}

render(page.data)
every(async () => {
  const result = await api(`/console/api/conversations${location.search}`)
  if (result.ok) render(result.body)
}, 3000)
