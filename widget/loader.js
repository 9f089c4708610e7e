/* Hostcall embed loader (/embed.js): the page's API (README.md, /embed.d.ts), a launcher once the
 * server allows the page, the rest on first use. Budget: 3 KB gzipped. */
;(() => {
  const queued = window.Hostcall
  const script = /** @type {HTMLScriptElement} */ (document.currentScript || document.querySelector('script[data-agent]'))
  const opts = script?.dataset || {}
  if (queued?.loaded || !opts.agent) return
  // WebMCP's shape where neither the browser nor the page gives one: bridge.js reads it.
  'modelContext' in document || (() => {
    const tools = new Map()
    const mc = (document.modelContext = /** @type {any} */ (new EventTarget()))
    const changed = () => mc.dispatchEvent(new Event('toolchange'))
    mc.addEventListener('toolchange', e => mc.ontoolchange?.(e))
    mc.registerTool = async (tool, o) => {
      tools.set(tool.name, { ...tool, window })
      o?.signal?.addEventListener('abort', () => tools.delete(tool.name) && changed())
      changed()
    }
    mc.getTools = async () => [...tools.values()]
    mc.executeTool = async (tool, input) => JSON.stringify(await tools.get(tool.name).execute(input))
  })()
  const src = new URL(script.src, location.href)
  const base = src.href.replace(/embed\.js.*/, '')
  const label = { fr: 'Discussion', ja: 'チャット' }[(opts.locale || navigator.language).slice(0, 2)] || 'Chat'
  const openKey = 'hostcall:open:' + opts.agent
  const accent = /^#[0-9a-f]{3,8}$/i.test(opts.accent) ? opts.accent : '#4f46e5'
  const scheme = ['light', 'dark'].includes(opts.theme) ? opts.theme : 'light dark'
  const ICONS = ['M3 5h18v12H9l-5 4v-4H3z', 'M6 6l12 12M18 6 6 18']
  /** Handed to static/bridge.js (_connect, once), which adds frame, sync, send, focus, put. */
  const hc = { opts, src, base, label, handlers: new Map(), ctx: new Map(), listeners: {}, outbox: [], emit, fail }
  let panel, button, icon, inline, isOpen, openSoon, phone

  const api = {
    register(name, fn) {
      hc.handlers.set(name, fn)
      hc.sync?.()
    },
    unregister(name) {
      hc.handlers.delete(name)
      hc.sync?.()
    },
    open() {
      if (!(button || panel)) return (openSoon = 1)
      mount()
      inline || isOpen || toggle(1)
    },
    close() {
      isOpen && toggle(0)
    },
    send(text) {
      api.open()
      hc.send ? hc.send(text) : hc.outbox.push(text)
    },
    identify(token) {
      hc.id = token
      hc.sync?.()
    },
    logout() {
      api.identify()
    },
    context(name, value) {
      hc.ctx.set(name, value)
      hc.put?.(name, value)
    },
    on(event, fn) {
      (hc.listeners[event] ||= new Set()).add(fn)
      return () => hc.listeners[event].delete(fn)
    },
  }

  function Hostcall(command, ...args) {
    return api[command](...args)
  }
  window.Hostcall = Object.assign(Hostcall, api, { loaded: /** @type {const} */ (1), _connect: fn => hc.frame?.src || fn(hc) })
  for (const args of queued?.q || []) {
    try { Hostcall(...args) } catch (err) { console.error(err) }
  }

  function emit(name, detail) {
    for (const fn of hc.listeners[name] || []) {
      try { fn(detail) } catch (err) { console.error(err) }
    }
  }

  /** Under 640 px the open panel is a full-screen sheet, clear of the safe-area insets. */
  function layout() {
    const full = phone.matches
    panel.style.cssText = 'position:fixed;z-index:2147483000;overflow:hidden;box-sizing:border-box;color-scheme:' + scheme +
      ';background:linear-gradient(' + accent + ' 0 0) top/100% env(safe-area-inset-top) no-repeat,light-dark(#fff,#15171c);' + (full
      ? 'inset:0;padding:env(safe-area-inset-top) env(safe-area-inset-right) env(safe-area-inset-bottom) env(safe-area-inset-left)'
      : 'right:16px;bottom:88px;width:min(390px,100vw - 32px);height:min(640px,100vh - 104px);border-radius:16px;box-shadow:0 12px 40px #0004') + (isOpen ? '' : ';display:none')
    button.style.display = full && isOpen ? 'none' : 'grid'
  }

  /** Open (1) or close (0) the panel. */
  function toggle(open) {
    hc.isOpen = isOpen = open
    layout()
    button.setAttribute('aria-expanded', !!open)
    icon.setAttribute('d', ICONS[open])
    icon.setAttribute('fill', open ? 'none' : 'currentColor')
    try { open ? sessionStorage.setItem(openKey, '1') : sessionStorage.removeItem(openKey) } catch (err) {}
    open ? hc.focus?.() : button.focus()
    emit(open ? 'open' : 'close', {})
  }

  /** The panel and the bridge, once: until then the page holds a button. */
  function mount() {
    if (hc.panel) return
    if (!inline) {
      panel = document.createElement('div')
      panel.id = panel.dataset.part = 'hostcall-panel'
      button.setAttribute('aria-controls', panel.id)
      phone = matchMedia('(max-width:639px)')
      phone.onchange = layout
      layout()
      button.before(panel)
    }
    hc.panel = panel
    hc.mode = inline ? 'inline' : 'bubble'
    document.head.append(Object.assign(document.createElement('script'), { src: base + 'static/bridge.js' }))
  }

  /** The widget cannot run here: say why (bridge.js removes what it drew). */
  function fail(why) {
    console.error('Hostcall: no widget: ' + why.message)
    emit('error', why)
  }

  function init() {
    let was
    try { was = sessionStorage.getItem(openKey) } catch (err) {}
    panel = opts.mount && document.querySelector(opts.mount)
    if ((inline = !!panel)) return mount()
    button = hc.button = document.createElement('button')
    // A black or white icon, whichever contrasts more: WCAG's luminance 0.179 is CIE L* 49.4.
    button.style.cssText = 'position:fixed;right:16px;bottom:16px;z-index:2147483001;width:56px;height:56px;border:0;border-radius:50%;cursor:pointer;display:grid;place-items:center;padding:0;box-shadow:0 4px 14px #0004;background:' +
      accent + ';color:lch(from ' + accent + ' calc((49.4 - l) * infinity) 0 0)'
    button.dataset.part = 'hostcall-launcher'
    button.setAttribute('aria-label', label)
    button.setAttribute('aria-expanded', false)
    button.onclick = () => toggle(isOpen ? 0 : (mount(), 1))
    button.onpointerenter = button.onfocus = mount
    // DOM calls, not innerHTML: pages enforcing Trusted Types refuse markup strings.
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg')
    icon = document.createElementNS(svg.namespaceURI, 'path')
    for (const [el, k, v] of [[svg, 'viewBox', '0 0 24 24'], [svg, 'width', 26], [svg, 'height', 26], [svg, 'aria-hidden', true], [icon, 'stroke', 'currentColor'], [icon, 'stroke-width', 2], [icon, 'd', ICONS[0]], [icon, 'fill', 'currentColor']]) el.setAttribute(k, v)
    svg.append(icon)
    button.append(svg)
    document.body.append(button)
    if (opts.open === 'true' || was || openSoon) api.open()
  }

  Promise.all([
    fetch(base + 'embed/check?' + new URLSearchParams({ agent: opts.agent, origin: location.origin })).then(r => r.json()).catch(() => ({})),
    document.body || new Promise(r => addEventListener('DOMContentLoaded', r)),
  ]).then(([why]) => why.code ? fail(why) : init())
})()
