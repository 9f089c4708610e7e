/* Hostcall embed loader (/embed.js): API in README.md. A facade: no iframe until the launcher
 * is hovered, focused or opened. postMessage only with the widget's exact origin and window;
 * the page never sees tokens. Budget: 3 KB gzipped. */
;(() => {
  // ======================================================================== Constants
  // MSG.HELLO = 'hostcall:hello'…: the MSG of widget/protocol.js (a test keeps these words equal).
  const MSG = {}
  for (const k of 'hello handlers ready call result cancel send focus close event'.split(' ')) MSG[k.toUpperCase()] = 'hostcall:' + k
  const ICONS = ['M3 5h18v12H9l-5 4v-4H3z', 'M6 6l12 12M18 6 6 18']

  const queued = window.Hostcall
  const script = document.currentScript || document.querySelector('script[data-agent]')
  const opts = script?.dataset || {}
  if (queued?.loaded || !opts.agent) return
  const src = new URL(script.src, location.href)
  const label = { fr: 'Discussion', ja: 'チャット' }[(opts.locale || navigator.language).slice(0, 2)] || 'Chat'
  const openKey = 'hostcall:open:' + opts.agent

  const handlers = new Map()
  const listeners = {}
  const running = new Map() // callId → AbortController of a handler running in this page
  const outbox = [] // messages waiting for the widget's READY
  let frame, panel, button, icon, inline, isOpen, ready, greeted, openSoon

  // ======================================================================== State and API
  const api = {
    register(name, fn) {
      handlers.set(name, fn)
      sync()
    },
    unregister(name) {
      handlers.delete(name)
      sync()
    },
    open() {
      if (!panel) return (openSoon = 1)
      mount()
      if (!inline && !isOpen) toggle(1)
    },
    close() {
      if (isOpen) toggle(0)
    },
    send(text) {
      api.open()
      ready ? post(MSG.SEND, { text }) : outbox.push(text)
    },
    on(event, fn) {
      (listeners[event] ||= new Set()).add(fn)
      return () => listeners[event].delete(fn)
    },
  }

  function Hostcall(command, ...args) {
    return api[command](...args)
  }
  window.Hostcall = Object.assign(Hostcall, api, { loaded: 1 })
  for (const args of queued?.q || []) {
    try { Hostcall(...args) } catch (err) { console.error(err) }
  }

  function emit(name, detail) {
    for (const fn of listeners[name] || []) {
      try { fn(detail) } catch (err) { console.error(err) }
    }
  }

  // ======================================================================== Widget bridge
  function post(type, data) {
    frame.contentWindow.postMessage({ type, ...data }, src.origin)
  }

  /** Handshake: the tools this page handles, again on every change. */
  function sync() {
    greeted && post(MSG.HANDLERS, { tools: [...handlers.keys()] })
  }

  addEventListener('message', (e) => {
    const m = e.data
    if (!frame || e.origin !== src.origin || e.source !== frame.contentWindow || !m) return
    if (m.type === MSG.HELLO) {
      greeted = 1
      ready = 0
      sync()
    } else if (m.type === MSG.READY) {
      ready = 1
      for (const text of outbox.splice(0)) post(MSG.SEND, { text })
      isOpen && (frame.focus(), post(MSG.FOCUS))
      emit('ready', {})
    } else if (m.type === MSG.CALL) {
      run(m)
    } else if (m.type === MSG.CANCEL) {
      running.get(m.callId)?.abort(new DOMException('Call settled elsewhere', 'AbortError'))
    } else if (m.type === MSG.CLOSE) {
      api.close()
    } else if (m.type === MSG.EVENT) {
      emit(m.event, m.detail)
    }
  })

  /** Run a handler; post its outcome unless the call was settled meanwhile. */
  async function run({ callId, toolName, input, inputSchema, outputSchema, deadline }) {
    const fn = handlers.get(toolName)
    if (!fn) return post(MSG.RESULT, { callId, noHandler: 1 })
    if (running.has(callId)) return
    const ctrl = new AbortController()
    const wait = Date.parse(deadline) - Date.now()
    const timer = wait > 0 && setTimeout(() => ctrl.abort(new DOMException('Deadline passed', 'TimeoutError')), Math.min(wait, 2e9))
    running.set(callId, ctrl)
    let reply
    try {
      const output = await fn(input, { callId, toolName, inputSchema, outputSchema, signal: ctrl.signal })
      reply = { callId, output: output === undefined ? null : JSON.parse(JSON.stringify(output)) }
    } catch (err) {
      reply = { callId, error: { message: String(err?.message || err) } }
    }
    clearTimeout(timer)
    running.delete(callId)
    ctrl.signal.aborted || post(MSG.RESULT, reply)
  }

  // ======================================================================== UI
  /** Open (1) or close (0) the panel; `quiet`: no event, no focus move. */
  function toggle(open, quiet) {
    isOpen = open
    panel.style.display = open ? 'block' : 'none'
    button.setAttribute('aria-expanded', !!open)
    icon.setAttribute('d', ICONS[open])
    icon.setAttribute('fill', open ? 'none' : 'currentColor')
    if (quiet) return // the initial closed state: nothing to store or announce
    try { open ? sessionStorage.setItem(openKey, 1) : sessionStorage.removeItem(openKey) } catch (err) {}
    // Focus the frame from the page first: a frame's own focus() is often ignored.
    open ? ready && (frame.focus(), post(MSG.FOCUS)) : button.focus()
    emit(open ? 'open' : 'close', {})
  }

  /** Create the iframe, once. Until then the widget costs the page nothing. */
  function mount() {
    if (frame) return
    const q = new URLSearchParams({ origin: location.origin, mode: inline ? 'inline' : 'bubble' })
    for (const k of ['locale', 'theme', 'accent']) opts[k] && q.set(k, opts[k])
    frame = document.createElement('iframe')
    frame.style.cssText = 'border:0;width:100%;height:100%;display:block;min-height:' + (inline ? '420px' : 0)
    frame.src = src.href.replace(/embed\.js.*/, 'widget/') + encodeURIComponent(opts.agent) + '?' + q
    frame.title = label
    frame.dataset.part = 'hostcall-frame'
    // No hello after load: this origin is most likely not allowed; do nothing but say why.
    frame.onload = () => setTimeout(() => greeted || unavailable(), 4000)
    panel.append(frame)
  }

  function unavailable() {
    const message = 'Hostcall: no widget; is ' + location.origin + ' an allowed origin of agent ' + opts.agent + '?'
    console.error(message)
    inline ? frame.remove() : (panel.remove(), button.remove())
    emit('error', { code: 'widget_unavailable', message })
  }

  function init() {
    let was
    try { was = sessionStorage.getItem(openKey) } catch (err) {}
    panel = opts.mount && document.querySelector(opts.mount)
    if ((inline = !!panel)) return mount()
    panel = document.createElement('div')
    button = document.createElement('button')
    panel.id = 'hostcall-panel'
    panel.style.cssText = 'position:fixed;z-index:2147483000;right:16px;bottom:88px;width:min(390px,100vw - 32px);height:min(640px,100vh - 104px);border-radius:16px;overflow:hidden;background:#fff;box-shadow:0 12px 40px #0004'
    panel.dataset.part = 'hostcall-panel'
    button.style.cssText = 'position:fixed;right:16px;bottom:16px;z-index:2147483001;width:56px;height:56px;border:0;border-radius:50%;color:#fff;cursor:pointer;display:grid;place-items:center;padding:0;box-shadow:0 4px 14px #0004;background:' + (/^#[0-9a-f]{3,8}$/i.test(opts.accent) ? opts.accent : '#4f46e5')
    button.dataset.part = 'hostcall-launcher'
    button.setAttribute('aria-controls', panel.id)
    button.setAttribute('aria-label', label)
    button.onclick = () => toggle(isOpen ? 0 : (mount(), 1))
    button.onpointerenter = button.onfocus = mount
    // DOM calls, not innerHTML: pages enforcing Trusted Types refuse markup strings.
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg')
    icon = document.createElementNS(svg.namespaceURI, 'path')
    for (const [el, k, v] of [[svg, 'viewBox', '0 0 24 24'], [svg, 'width', 26], [svg, 'height', 26], [svg, 'aria-hidden', true], [icon, 'stroke', 'currentColor'], [icon, 'stroke-width', 2]]) el.setAttribute(k, v)
    svg.append(icon)
    button.append(svg)
    toggle(0, 1)
    document.body.append(panel, button)
    if (opts.open === 'true' || was || openSoon) api.open()
  }

  document.body ? init() : addEventListener('DOMContentLoaded', init)
})()
