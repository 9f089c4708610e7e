// Hostcall widget: the visitor's history (docs/embedding.md "History"): their conversations
// with the agent, last written in first, to open and continue, start anew, or delete. The
// signed-in person's on any browser, else this browser's (the server decides, from the
// conversation whose session the widget holds). Loaded on demand: app.js imports it when
// the header's history button is pressed, so the first screen carries none of it.
// Keyboard: Tab through the list, Enter opens, Escape goes back to the chat; every change is
// announced (the list's status line is a live region).

import { h, t, addStrings, phone, setAgentState } from './chat.js'

// ============================================================================
// API
// ============================================================================

/** @typedef {{conversationId: string, title: string, createdAt: string, updatedAt: string}} Entry */
/**
 * What the panel works with: app.js's API and state, and its `restart` (`switchTo`: boot
 * again, resuming the conversation the browser's cookie names; `fresh`: start a new one).
 * @typedef {{api: Api, current: () => string, root: HTMLElement, back: HTMLElement | null,
 *   parentOrigin: string, switchTo: () => void, fresh: () => void}} Context
 * @typedef {Pick<ReturnType<typeof import('./api.js').createApi>, 'call' | 'key'>} Api
 */

/** Loaded once: the strings and styles (the styles first, so nothing shows unstyled). */
const ready = Promise.all([
  addStrings('history'),
  new Promise(resolve => document.head.append(h('link', {
    rel: 'stylesheet', href: new URL('history.css', import.meta.url).href, onload: resolve, onerror: resolve,
  }))),
])

/** @type {HTMLElement | null} */
let panel = null

/** The history's endpoint (docs/protocol.md "History"), asked with the held conversation's
 * session. @param {Context} c @param {string} tail */
const path = (c, tail) => `/api/conversations/${encodeURIComponent(c.current())}/history${tail}`

/**
 * Show the history over the chat.
 * @param {Api} api @param {{conversationId: string}} state
 * @param {(fresh?: boolean) => void} restart
 */
export async function show(api, state, restart) {
  const cfg = JSON.parse(document.getElementById('hc-config')?.textContent || '{}')
  /** @type {Context} */
  const c = {
    api, current: () => state.conversationId, root: /** @type {HTMLElement} */ (document.getElementById('hc-root')),
    back: document.querySelector('[data-part=open-history]'),
    parentOrigin: cfg.parentOrigin && window.parent !== window ? cfg.parentOrigin : '',
    // The server pointed this browser's resume cookie at it: boot again, resuming it.
    switchTo: () => restart(false), fresh: () => restart(),
  }
  await ready
  close(c, false)
  const id = 'hc-history-title'
  const status = h('p', { 'data-part': 'history-status', role: 'status', text: t('historyLoading') })
  const list = h('ul', { 'data-part': 'history-list', 'aria-labelledby': id })
  const more = h('button', { type: 'button', 'data-part': 'history-more', hidden: true, text: t('historyMore') })
  panel = h('section', {
    'data-part': 'history', 'aria-labelledby': id, 'data-state': 'loading', // then ready, or failed
    onkeydown: e => { if (e.key === 'Escape') { e.stopPropagation(); close(c) } },
  },
  h('div', { 'data-part': 'history-header' },
    h('button', { type: 'button', 'data-part': 'history-back', onclick: () => close(c) }, h('span', { 'aria-hidden': 'true', text: '‹ ' }), t('historyBack')),
    h('h2', { id, 'data-part': 'history-title', tabindex: -1, text: t('historyTitle') }),
    h('button', { type: 'button', 'data-part': 'history-new', onclick: () => { close(c, false); c.fresh() } }, t('historyNew'))),
  status, list, more)
  document.documentElement.dataset.view = 'history'
  c.root.append(panel)
  const shown = panel
  // The conversation it was opened from is left (a sign-out, another person signing in, a
  // new conversation): the list was that one's holder's, so it goes at once.
  const from = c.current()
  const watch = setInterval(() => {
    if (panel !== shown) clearInterval(watch)
    else if (c.current() !== from) close(c, false)
  }, 100)
  /** @param {string} [before] */
  const page = async before => {
    more.hidden = true
    // No conversation yet (one is made with the first message): nothing of this browser's
    // or this person's to list, and no session to ask with.
    if (!from) { status.textContent = t('historyEmpty'); shown.dataset.state = 'ready'; return }
    try {
      const found = await c.api.call('GET', path(c, before ? `?before=${encodeURIComponent(before)}` : ''))
      if (panel !== shown) return
      list.append(...found.conversations.map((/** @type {Entry} */ e) => item(c, e, status)))
      const n = list.childElementCount
      status.textContent = t(n ? (n === 1 ? 'historyCountOne' : 'historyCount') : 'historyEmpty', { n })
      if (found.next) Object.assign(more, { hidden: false, onclick: () => page(found.next) })
      shown.dataset.state = 'ready'
    } catch {
      status.textContent = t('historyFailed')
      shown.dataset.state = 'failed'
    }
  }
  await page()
  if (panel !== shown) return
  // The person's place: the conversation they are in, else the list's first, else the title.
  const first = /** @type {HTMLElement | null} */ (list.querySelector('[aria-current] [data-part=history-open]') || list.querySelector('[data-part=history-open]'))
  if (!phone()) (first || /** @type {HTMLElement} */ (shown.querySelector('h2'))).focus()
}

/** Back to the chat. @param {Context} c @param {boolean} [focus] */
export function close(c, focus = true) {
  panel?.remove()
  panel = null
  delete document.documentElement.dataset.view
  if (focus) c.back?.focus()
}

// ============================================================================
// One conversation of the list
// ============================================================================

const when = (/** @type {string} */ iso) => {
  try { return new Intl.DateTimeFormat(document.documentElement.lang, { dateStyle: 'medium', timeStyle: 'short' }).format(new Date(iso)) } catch { return iso }
}

/** @param {Context} c @param {Entry} e @param {HTMLElement} status */
function item(c, e, status) {
  const title = e.title || t('historyUntitled')
  const current = e.conversationId === c.current()
  const say = (/** @type {string} */ text) => { status.textContent = text }
  const open = h('button', {
    type: 'button', 'data-part': 'history-open',
    onclick: async () => {
      if (current) return close(c)
      // Loading from the click on (docs/testing.md: "starting"), until the thread is drawn.
      const was = document.documentElement.dataset.agentState || 'idle'
      setAgentState('starting')
      try {
        // With cookies: the server points this browser's resume cookie at it (a reload
        // comes back here); with the session token held, which proves whose history it is.
        await c.api.call('POST', path(c, `/${encodeURIComponent(e.conversationId)}`), { parentOrigin: c.parentOrigin, resumeKey: c.api.key }, { cookies: true, held: true })
        close(c, false)
        c.switchTo()
      } catch { setAgentState(was); say(t('historyOpenFailed')) }
    },
  },
  h('span', { 'data-part': 'history-item-title', text: title }),
  h('span', { 'data-part': 'history-item-meta' },
    h('time', { datetime: e.updatedAt, text: when(e.updatedAt) }),
    current ? ` · ${t('historyCurrent')}` : ''))
  const remove = h('button', {
    type: 'button', 'data-part': 'history-delete', 'aria-label': t('historyDeleteLabel', { title }), title: t('historyDelete'),
    onclick: () => { ask.hidden = false; /** @type {HTMLElement} */ (ask.querySelector('[data-part=history-delete-no]')).focus() },
  }, t('historyDelete'))
  const ask = h('div', {
    'data-part': 'history-confirm', role: 'group', 'aria-label': t('historyDeleteLabel', { title }), hidden: true,
    onkeydown: ev => { if (ev.key === 'Escape') { ev.stopPropagation(); ask.hidden = true; remove.focus() } },
  },
  h('p', { text: t('historyDeleteAsk') }),
  h('button', {
    type: 'button', 'data-part': 'history-delete-yes', 'data-kind': 'danger',
    onclick: async () => {
      try {
        await c.api.call('DELETE', path(c, `/${encodeURIComponent(e.conversationId)}`))
      } catch {
        ask.hidden = true
        remove.focus()
        return say(t('historyDeleteFailed'))
      }
      if (current) { close(c, false); return c.fresh() }
      const next = /** @type {HTMLElement | null} */ (row.nextElementSibling || row.previousElementSibling)
      row.remove()
      say(t('historyDeleted'))
      ;/** @type {HTMLElement | null} */ (next?.querySelector('[data-part=history-open]') || panel?.querySelector('[data-part=history-new]'))?.focus()
    },
  }, t('historyDelete')),
  h('button', { type: 'button', 'data-part': 'history-delete-no', onclick: () => { ask.hidden = true; remove.focus() } }, t('cancel')))
  const row = h('li', { 'data-part': 'history-item', 'data-id': e.conversationId, 'aria-current': current ? 'true' : null },
    h('div', { 'data-part': 'history-row' }, open, remove), ask)
  return row
}
