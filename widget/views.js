// Hostcall widget: a tool's result view (docs/agents.md "Views") — card, list, table,
// key/value, image — drawn from the data the server built from the result
// (hostcall/views/drawn.py). toolcalls.js imports it when a result carries a view (the
// weight budget: a chat whose tools have none never fetches it). Never HTML: every value is
// a text node (chat.js h()), and an image's address is there only if the agent's view
// allows its origin (the widget's CSP says the same). A button sends the visitor's message;
// any tool it leads to is the model's call, through approval, limits and guardrails.

import { h, t, uid } from './chat.js'

/**
 * @typedef {{label: string, message: string, tool?: string}} Button
 * @typedef {{type: string, title?: string, subtitle?: string, items?: any[], more?: number,
 *   columns?: string[], fields?: {label: string, value: string}[],
 *   image?: {src?: string, alt: string}, buttons?: Button[]}} View
 */

/**
 * The view's element; `name` titles it when the view has no title of its own, `send` sends
 * a visitor message.
 * @param {View} view @param {string} name @param {(text: string) => void} send @returns {HTMLElement}
 */
export function draw(view, name, send) {
  const titleId = uid('view')
  /** @param {Button[] | undefined} list @param {string} [about] the id of what they act on */
  const buttons = (list, about) => list?.length ? h('div', { 'data-part': 'view-actions' }, list.map(b => h('button', {
    type: 'button', 'data-part': 'view-button', 'data-tool': b.tool, 'aria-describedby': about,
    onclick: () => send(b.message),
  }, b.label))) : null
  const items = view.items || []
  let body = null
  if (view.type === 'list') {
    body = h('ul', { 'data-part': 'view-items' }, items.map(item => {
      const id = uid('item')
      return h('li', { 'data-part': 'view-item' },
        h('span', { id, 'data-part': 'view-item-title', text: item.title ?? '' }),
        item.subtitle ? h('span', { 'data-part': 'view-item-subtitle', text: item.subtitle }) : null,
        buttons(item.buttons, id))
    }))
  } else if (view.type === 'table') {
    const acts = items.some(row => row.buttons?.length)
    body = h('div', { 'data-part': 'view-table-wrap', tabindex: 0, role: 'group', 'aria-label': view.title || name },
      h('table', { 'data-part': 'view-table' },
        h('thead', null, h('tr', null, (view.columns || []).map(c => h('th', { scope: 'col', text: c })),
          acts ? h('th', { scope: 'col', text: t('viewActions') }) : null)),
        h('tbody', null, items.map(row => {
          const id = uid('row')
          return h('tr', { id }, (row.cells || []).map((/** @type {string} */ c) => h('td', { text: c })),
            acts ? h('td', null, buttons(row.buttons, id)) : null)
        }))))
  }
  // Untitled, it is named for its tool, whose card heads it already: no second heading.
  const heading = view.title ? h('h3', { id: titleId, 'data-part': 'view-title', text: view.title }) : null
  return h('section', { 'data-part': 'result-view', 'data-view': view.type, 'aria-labelledby': heading && titleId, 'aria-label': heading ? null : name },
    heading,
    view.subtitle ? h('p', { 'data-part': 'view-subtitle', text: view.subtitle }) : null,
    view.image ? image(view.image) : null,
    body,
    view.more ? h('p', { 'data-part': 'view-more', text: t('viewMore', { n: view.more }) }) : null,
    view.fields?.length ? h('dl', { 'data-part': 'view-fields' }, view.fields.map(f => [h('dt', { text: f.label }), h('dd', { text: f.value })])) : null,
    buttons(view.buttons, heading ? titleId : undefined))
}

/** An allowed image, or its description alone. No referrer: the host learns nothing of the
 * page or the conversation (the widget page sends none either). @param {{src?: string, alt: string}} img */
const image = img => img.src
  ? h('img', { 'data-part': 'view-image', src: img.src, alt: img.alt, referrerpolicy: 'no-referrer', loading: 'lazy', decoding: 'async' })
  : h('p', { 'data-part': 'view-image-alt', text: img.alt })
