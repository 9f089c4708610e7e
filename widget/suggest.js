// Hostcall widget: what the agent file offers the visitor (server/hostcall/suggestions.py,
// docs/agents.md): starter prompts on an empty chat, follow-ups after a reply that matches a
// rule, and a five-point rating of the whole conversation at its end (after a person of the
// team hands it back, or a reply that ends it). Loaded by app.js only for an agent whose file
// has any of them, with its strings (locale-xx-suggest.js) and styles (suggest.css).
//
// Nothing here creates a conversation: a starter is sent as the visitor's own first message
// would be (app.js's send), which creates it.

import { addStrings, announce, append, h, t, uid } from './chat.js'
import { write } from './drawing.js'

const REMARK_CHARS = 1000 // docs/protocol.md: the server's limit
const MOST = 3 // follow-ups shown at once

// Strings and styles first: nothing of this module shows as keys or unstyled.
await Promise.all([addStrings('suggest'), new Promise(resolve => document.head.append(h('link', {
  rel: 'stylesheet', href: new URL('suggest.css', import.meta.url).href, onload: resolve, onerror: resolve,
})))])

/**
 * @typedef {{starters?: Record<string, string[]>, followUps?: {when: string[], offer: Record<string, string[]>}[],
 *   rating?: {afterHandoff: boolean, when: string[]}}} Config the widget config's `suggest`
 * @typedef {{locale: string, send: (text: string) => void, state: {conversationId: string, ready: boolean},
 *   api: ReturnType<typeof import('./api.js').createApi>}} App what app.js lends
 */

/** Show what `config` offers; returns what app.js tells this module of the conversation:
 * `('reply', {text})` an answer of the agent's, complete; `('resumed', {text})` the last
 * answer of a resumed conversation (what followed it is shown again); `('handedBack')` a person left it;
 * `('rated', {conversationId})` its snapshot has a rating (given before a reload, or in
 * another tab), so it is never asked for.
 * @param {Config} config @param {App} app @returns {(kind: string, d?: any) => void} */
export function start(config, app) {
  const thread = /** @type {HTMLElement} */ (document.querySelector('[data-part=messages]'))
  /** The prompts of `byLocale` in the visitor's language, else in the file's first one.
   * @param {Record<string, string[]>} [byLocale] */
  const prompts = byLocale => (byLocale && (byLocale[app.locale] || Object.values(byLocale)[0])) || []
  /** Matches: the reply contains one of the phrases, ignoring case. @param {string} text @param {string[]} when */
  const matches = (text, when) => when.some(w => text.includes(w.toLocaleLowerCase()))
  /** Conversations whose rating was asked for here, or found given (once each). */
  const asked = new Set()
  /** @type {HTMLElement | null} */ let starters = null
  /** @type {HTMLElement | null} */ let followUps = null

  /** A group of prompts, each a button that sends it. @param {string} part @param {string} label @param {string[]} texts */
  const group = (part, label, texts) => h('div', { 'data-part': part, role: 'group', 'aria-label': label },
    ...texts.map(text => h('button', { type: 'button', 'data-part': part.replace(/s$/, ''), text, onclick: () => pick(text) })))
  /** @param {string} text */
  function pick(text) {
    starters?.remove()
    followUps?.remove()
    starters = followUps = null
    app.send(text)
  }

  // ---- starters: while the chat is empty (nothing but the greeting, no conversation)
  const first = prompts(config.starters)
  const empty = () => app.state.ready && !app.state.conversationId && !thread.querySelector('[data-part=message]:not([data-greeting])')
  // Decided when made, after the thread's changes queued before it: two calls never add two.
  const sync = () => first.length && write(() => {
    if (empty() && !starters?.isConnected) thread.append(starters = group('starters', t('starters'), first))
    else if (!empty() && starters) { starters.remove(); starters = null }
  })
  // A message shown (the visitor's, a resumed conversation's) or a new conversation started
  // (the thread emptied, the agent state back to idle): starters shown or removed; a message
  // of the visitor's, typed rather than picked, takes the follow-ups away.
  new MutationObserver(records => {
    const wrote = records.some(r => [...r.addedNodes].some(n => n instanceof HTMLElement && n.dataset.role === 'user'))
    if (wrote && followUps) { followUps.remove(); followUps = null }
    sync()
  }).observe(thread, { childList: true })
  new MutationObserver(sync).observe(document.documentElement, { attributes: true, attributeFilter: ['data-agent-state'] })
  sync()

  // ---- a rating of the whole conversation, asked once
  function ask() {
    const cid = app.state.conversationId
    if (!cid || asked.has(cid)) return
    asked.add(cid)
    const title = uid('rating')
    const status = h('p', { 'data-part': 'rating-status', role: 'status' })
    const scores = [1, 2, 3, 4, 5].map(n => h('label', { 'data-part': 'rating-score' },
      h('input', { type: 'radio', name: title, value: n, required: true, 'aria-label': t('ratingScore', { n }) }),
      h('span', { 'aria-hidden': 'true', text: String(n) })))
    const remark = /** @type {HTMLTextAreaElement} */ (h('textarea', {
      'data-part': 'rating-remark', rows: 2, maxlength: REMARK_CHARS, 'aria-label': t('ratingRemark'), placeholder: t('ratingRemark'),
    }))
    const form = /** @type {HTMLFormElement} */ (h('form', { 'data-part': 'rating', 'aria-labelledby': title, onsubmit: send },
      h('p', { id: title, 'data-part': 'rating-question', text: t('ratingQuestion') }),
      h('fieldset', { 'data-part': 'rating-scores' }, h('legend', { class: 'sr-only', text: t('ratingQuestion') }),
        h('span', { 'data-part': 'rating-end', 'aria-hidden': 'true', text: t('ratingLow') }), ...scores,
        h('span', { 'data-part': 'rating-end', 'aria-hidden': 'true', text: t('ratingHigh') })),
      remark, h('button', { type: 'submit', 'data-part': 'rating-send' }, t('ratingSend')), status))
    /** @param {Event} e */
    async function send(e) {
      e.preventDefault()
      const score = Number(new FormData(form).get(title))
      const body = remark.value.trim() ? { score, remark: remark.value.trim() } : { score }
      try {
        await app.api.call('POST', app.api.conv(cid, '/rating'), body)
      } catch (err) {
        // Rated already (another tab): the visitor's answer is not lost, it was given.
        if (err.code !== 'already_rated') {
          status.textContent = t('ratingFailed')
          return void console.warn('hostcall: rating', err)
        }
      }
      form.replaceChildren(h('p', { 'data-part': 'rating-thanks', role: 'status', text: t('ratingThanks') }))
    }
    append(form)
    announce(t('ratingQuestion'))
  }

  return (kind, d) => {
    if (kind === 'rated') return void asked.add(d.conversationId)
    if (kind === 'handedBack' && config.rating?.afterHandoff) return ask()
    if (kind !== 'reply' && kind !== 'resumed') return
    const text = String(d.text).toLocaleLowerCase()
    followUps?.remove()
    followUps = null
    const offered = [...new Set((config.followUps || []).filter(r => matches(text, r.when)).flatMap(r => prompts(r.offer)))].slice(0, MOST)
    if (offered.length) append(followUps = group('follow-ups', t('followUps'), offered))
    if (config.rating && matches(text, config.rating.when)) ask()
  }
}
