// Hostcall widget: an MCP Apps view in its tool call's card (docs/agents.md "MCP Apps") —
// the host side of the specification's JSON-RPC over postMessage. toolcalls.js imports it
// when a call's result carries `app` (live, or from the snapshot after a reload): a chat
// whose tools have no view never fetches it, its styles (apps.css) or its strings.
//
// The view runs on its MCP server's apps origin, never this one: a proxy page of that origin,
// framed here, holds the view in a frame of its own (by address, so the proxy's CSP is not the
// view's). Each server has an origin of its own, so another server's view cannot reach into
// this one. Everything that comes out of that frame is the view's to say, and treated so: a
// message counts only from the proxy's window AND the origin of the call's own proxyUrl; what
// is posted goes to that exact origin. The view's asks go through Hostcall's rules: a tool call and its context through
// the server (every policy, the ledger), a message only when the visitor sends it, a link
// only when the visitor opens it. Nothing is sent to the view before it says `initialized`.

import * as W from './apps-wire.js'
import { addStrings, announce, h, phone, t } from './chat.js'

await Promise.all([addStrings('apps'), new Promise(resolve => document.head.append(h('link', {
  rel: 'stylesheet', href: new URL('apps.css', import.meta.url).href, onload: resolve, onerror: resolve,
})))])

/**
 * What toolcalls.js lends a view.
 * @typedef {object} Host
 * @property {Pick<ReturnType<typeof import('./api.js').createApi>, 'call' | 'current'>} api
 * @property {(text: string) => void} send a visitor message
 * @property {(event: string, detail: object) => void} emit a Hostcall('on', …) event
 * @property {string} title the tool's title, which names the view
 */
/**
 * A call's `app` (docs/protocol.md): the view offered, or why there is none.
 * @typedef {{server?: string, resourceUri?: string, viewUrl?: string, proxyUrl?: string,
 *   prefersBorder?: boolean, unavailable?: string, failed?: string}} App
 * @typedef {{toolCallId: string, toolCallName: string, input?: any, outcome?: any, app?: App}} Call
 */

/** The views shown, by call id. @type {Map<string, View>} */
const views = new Map()

/**
 * Show call `call`'s view in its card (`card`: the card's element), once: the same call
 * shown again (its result again, a snapshot) keeps its view, and tells it a new outcome; one
 * that failed stays failed until the page loads again.
 * @param {HTMLElement} card @param {Call} call @param {Host} host
 */
export function show(card, call, host) {
  const app = call.app || {}
  const had = views.get(call.toolCallId)
  if (had && had.card === card) return had.update(call)
  had?.close()
  const spot = card.querySelector('[data-part=tool-call-body]')
  let origin = ''
  try { origin = new URL(String(app.proxyUrl)).origin } catch { /* none: a note instead */ }
  if (app.unavailable || app.failed || !app.viewUrl || !origin || origin === location.origin) {
    card.querySelector('[data-part=app-view]')?.remove()
    const el = h('p', { 'data-part': 'app-view', 'data-state': 'failed', text: t(app.unavailable ? 'appUnavailable' : 'appFailed') })
    spot?.before(el)
    return
  }
  const view = new View(card, call, host, origin)
  views.set(call.toolCallId, view)
  spot?.before(view.el)
}

/** The conversation is left (a new one, another one, the page goes): every view is told, then
 * its frame goes. */
export function closeAll() {
  views.forEach(v => v.close())
  views.clear()
}
window.addEventListener('pagehide', closeAll)

// ============================================================================
// One view: its proxy frame, the handshake, and what it asks
// ============================================================================

class View {
  /** @param {HTMLElement} card @param {Call} call @param {Host} host @param {string} origin the origin of the call's proxyUrl (its server's) */
  constructor(card, call, host, origin) {
    this.card = card
    this.call = call
    this.host = host
    this.origin = origin
    this.initialized = false
    this.closed = false
    this.sentResource = false
    this.answeredInit = false
    /** The visitor's answer to the open question, if one is open. @type {((ok: boolean) => void) | null} */
    this.answer = null
    /** The outcome last told to the view. */
    this.told = undefined
    /** The host's requests waiting for the view's answer, by id. @type {Map<number, () => void>} */
    this.waiting = new Map()
    this.nextId = 1
    const proxy = new URL(String(call.app?.proxyUrl))
    proxy.searchParams.set('host', location.origin)
    // The proxy (and the view in it, which the sandbox's flags bound too) may run scripts
    // and keep its own origin's storage; it may not navigate this page or the host page,
    // open windows or show dialogs: links go through ui/open-link, which asks the visitor.
    this.frame = /** @type {HTMLIFrameElement} */ (h('iframe', {
      'data-part': 'app-frame', title: t('appViewTitle', { name: host.title }), src: proxy.href,
      sandbox: 'allow-scripts allow-same-origin allow-forms', referrerpolicy: 'no-referrer', allow: '',
    }))
    this.frame.style.height = `${W.HEIGHT.FIRST}px`
    this.status = h('p', { 'data-part': 'app-note', role: 'status', text: t('appLoading') })
    this.prompt = h('div', { 'data-part': 'app-prompt', hidden: true })
    this.el = h('section', {
      'data-part': 'app-view', 'data-state': 'loading', 'aria-label': t('appViewTitle', { name: host.title }),
      'data-border': call.app?.prefersBorder === false ? 'none' : null,
    }, this.status, this.frame, this.prompt)
    this.onMessage = (/** @type {MessageEvent} */ e) => this.receive(e)
    window.addEventListener('message', this.onMessage)
    this.timer = setTimeout(() => this.fail('app_view_timeout'), W.INIT_WITHIN_MS)
    this.dark = matchMedia('(prefers-color-scheme: dark)')
    this.onTheme = () => this.initialized && this.post(W.notify(W.METHOD.CONTEXT_CHANGED, { theme: theme(this.dark) }))
    this.dark.addEventListener('change', this.onTheme)
  }

  /** Post to the proxy, at its server's origin only (never `*`): a proxy navigated
   * elsewhere gets nothing. @param {object} message */
  post(message) {
    if (!this.closed) this.frame.contentWindow?.postMessage(message, this.origin)
  }

  /** @param {MessageEvent} e */
  receive(e) {
    // Both: the origin alone would let another frame of that origin (another view of the
    // same server) speak for this one; the window alone, a frame navigated elsewhere.
    if (e.origin !== this.origin || e.source !== this.frame.contentWindow) return
    const m = W.classify(e.data)
    if (!m) return
    if (m.kind === 'response') return void this.waiting.get(Number(m.id))?.()
    if (this.closed) return
    if (m.kind === 'notification') return this.notice(m.method, m.params)
    if (!this.initialized && !W.BEFORE_INITIALIZED.has(m.method)) return this.post(W.refuse(m.id, W.ERROR.INVALID, 'ui/notifications/initialized first'))
    this.request(m.method, m.params).then(
      result => this.post(W.reply(m.id, result)),
      (/** @type {any} */ err) => this.post(W.refuse(m.id, err?.rpc ?? W.ERROR.REFUSED, String(err?.message || err))))
  }

  /** A notification from the proxy or the view. @param {string} method @param {any} params */
  notice(method, params) {
    if (method === W.METHOD.PROXY_READY && !this.sentResource) {
      this.sentResource = true
      this.post(W.notify(W.METHOD.RESOURCE_READY, { viewUrl: this.call.app?.viewUrl }))
    } else if (method === W.METHOD.INITIALIZED && !this.initialized && this.answeredInit) {
      this.initialized = true
      clearTimeout(this.timer)
      this.el.dataset.state = 'ready'
      this.status.remove()
      this.post(W.notify(W.METHOD.TOOL_INPUT, { arguments: input(this.call) }))
      this.update(this.call)
    } else if (method === W.METHOD.SIZE_CHANGED) {
      const px = W.clampHeight(params.height)
      if (px !== null) this.frame.style.height = `${px}px`
    }
  }

  /**
   * A request of the view's: its answer (a JSON-RPC result), or a throw (its error).
   * @param {string} method @param {any} params @returns {Promise<object>}
   */
  async request(method, params) {
    const M = W.METHOD
    if (method === M.PING) return {}
    if (method === M.INITIALIZE) {
      this.answeredInit = true
      return {
        protocolVersion: W.version(params.protocolVersion),
        hostInfo: { name: 'Hostcall', version: '1' },
        hostCapabilities: {
          openLinks: {}, serverTools: {},
          message: { text: {} }, updateModelContext: { text: {}, structuredContent: {} },
        },
        hostContext: {
          theme: theme(this.dark), locale: document.documentElement.lang, displayMode: 'inline',
          availableDisplayModes: ['inline'], platform: phone() ? 'mobile' : 'web',
          containerDimensions: { maxHeight: W.HEIGHT.MAX },
          toolInfo: { id: this.call.toolCallId, tool: { name: this.call.toolCallName, inputSchema: { type: 'object' } } },
        },
      }
    }
    if (method === M.DISPLAY_MODE) return { mode: 'inline' }
    if (method === M.TOOLS_CALL) {
      if (typeof params.name !== 'string') throw rpcError(W.ERROR.PARAMS, 'tools/call needs a name')
      const body = { name: params.name, arguments: params.arguments ?? {} }
      try {
        return await this.route('tools-call', body)
      } catch (/** @type {any} */ err) {
        if (err.code !== 'approval_required') throw err
      }
      // A write the agent file lets views ask for: the visitor's click here is the approval
      // (the view cannot reach the API to give it itself).
      const args = JSON.stringify(body.arguments)
      const ok = await this.ask(t('appWantsRun', { tool: params.name.slice(0, 100) }), t('appRun'), 'app-run', args.length > 300 ? `${args.slice(0, 300)}…` : args)
      if (!ok) throw rpcError(W.ERROR.REFUSED, 'declined')
      return this.route('tools-call', { ...body, confirmed: true })
    }
    if (method === M.UPDATE_CONTEXT) {
      const body = { content: Array.isArray(params.content) ? params.content : [], ...(params.structuredContent && { structuredContent: params.structuredContent }) }
      await this.route('context', body)
      return {}
    }
    if (method === M.MESSAGE) {
      const text = W.messageText(params)
      if (!text) return { isError: true }
      const sent = await this.ask(t('appWantsSend', { text }), t('appSend'), 'app-send')
      if (sent) this.host.send(text)
      return sent ? {} : { isError: true }
    }
    if (method === M.OPEN_LINK) {
      const url = W.linkTarget(params.url)
      if (!url) return { isError: true }
      const open = await this.ask(t('appWantsOpen', { host: url.host }), t('appOpen'), 'app-open', url.href)
      if (open) window.open(url.href, '_blank', 'noopener,noreferrer')
      return open ? {} : { isError: true }
    }
    throw rpcError(W.ERROR.NO_METHOD, `${String(method).slice(0, 80)} is not handled by this host`)
  }

  /** POST to the view's bridge route (docs/protocol.md), with the session's credentials.
   * @param {'tools-call' | 'context'} what @param {object} body */
  async route(what, body) {
    const cid = this.host.api.current().conversationId
    const path = `/api/conversations/${encodeURIComponent(cid)}/calls/${encodeURIComponent(this.call.toolCallId)}/app/${what}`
    try {
      return await this.host.api.call('POST', path, body)
    } catch (/** @type {any} */ err) {
      // The code only: the server's sentence is for the API's client, not the view.
      throw Object.assign(rpcError(W.ERROR.REFUSED, String(err?.code || 'refused')), { code: err?.code })
    }
  }

  /**
   * Ask the visitor (the card's own prompt, under the view): resolves true on `yes`. One
   * question at a time: a new one answers the one before "no".
   * @param {string} question @param {string} yes @param {string} part @param {string} [detail]
   * @returns {Promise<boolean>}
   */
  ask(question, yes, part, detail) {
    this.answer?.(false)
    return new Promise(resolve => {
      const done = (/** @type {boolean} */ ok) => {
        if (this.answer !== done) return
        this.answer = null
        this.prompt.hidden = true
        this.prompt.replaceChildren()
        resolve(ok)
      }
      this.answer = done
      // Not replaceChildren(…, null, …): a null child is the text "null".
      this.prompt.replaceChildren(...[
        h('p', { 'data-part': 'app-prompt-text', text: question }),
        detail && h('p', { 'data-part': 'app-prompt-detail', text: detail }),
        h('div', { 'data-part': 'actions' },
          h('button', { type: 'button', 'data-part': part, 'data-kind': 'primary', onclick: () => done(true) }, yes),
          h('button', { type: 'button', 'data-part': 'app-dismiss', onclick: () => done(false) }, t('appDismiss'))),
      ].filter(Boolean))
      this.prompt.hidden = false
      announce(question)
    })
  }

  /** The call's outcome, told once the view is initialized (again only if it changed).
   * @param {Call} call */
  update(call) {
    this.call = call
    if (!this.initialized || this.told === call.outcome) return
    const message = W.resultMessage(call.outcome)
    if (!message) return
    this.told = call.outcome
    this.post(W.notify(message.method, message.params))
  }

  /** The view did not come (no `initialized` in time): the card says so, its text result
   * stays, and the page hears of it. @param {string} code */
  fail(code) {
    if (this.initialized || this.closed) return
    this.stop()
    window.removeEventListener('message', this.onMessage)
    this.frame.remove()
    this.prompt.remove()
    this.el.dataset.state = 'failed'
    this.status.textContent = t('appFailed')
    this.el.prepend(this.status)
    this.host.emit('error', { code, message: `The view of ${this.call.toolCallName} did not load.`, callId: this.call.toolCallId })
  }

  /** Stop answering and waiting (the teardown's answer is still heard: close()). */
  stop() {
    this.closed = true
    clearTimeout(this.timer)
    this.dark.removeEventListener('change', this.onTheme)
    this.answer?.(false)
  }

  /** The frame goes, and nothing of it is heard any more. */
  gone() {
    this.stop()
    window.removeEventListener('message', this.onMessage)
    this.waiting.clear()
    this.el.remove()
  }

  /** Teardown: an initialized view is asked to wrap up (one that is not was told nothing,
   * and is told nothing now), and its frame goes once it answered, or TEARDOWN_WITHIN_MS on. */
  close() {
    if (this.closed) return
    if (!this.initialized) return this.gone()
    const id = this.nextId++
    this.post({ jsonrpc: '2.0', id, method: W.METHOD.TEARDOWN, params: {} })
    this.stop()
    this.waiting.set(id, () => this.gone())
    setTimeout(() => this.gone(), W.TEARDOWN_WITHIN_MS)
  }
}

/** The theme the widget shows (its own, or the system's when it follows it). @param {MediaQueryList} dark */
function theme(dark) {
  const chosen = document.documentElement.dataset.theme
  return chosen === 'light' || chosen === 'dark' ? chosen : dark.matches ? 'dark' : 'light'
}

/** The call's arguments (toolcalls.js: the snapshot's, else as they streamed). @param {Call} call */
const input = call => (call.input && typeof call.input === 'object' ? call.input : {})

/** An error with its JSON-RPC code. @param {number} code @param {string} message */
function rpcError(code, message) {
  return Object.assign(new Error(message), { rpc: code })
}
