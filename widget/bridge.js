/* Hostcall bridge (static/bridge.js), added to the host page by /embed.js when the widget is
 * first needed: loads the widget, takes the widget's hello from its exact origin and window
 * only, and speaks over the MessageChannel port that hello carries (nobody else holds it);
 * runs the page's handlers (the widget decides which calls reach them). No tokens here (the
 * resume key opens nothing without the cookie, which only Hostcall's host gets). */
;(() => {
  // MSG.HELLO = 'hostcall:hello'…: the MSG of widget/protocol.js (a test keeps these words equal).
  const MSG = {}
  for (const k of 'hello handlers ready call result cancel send focus close event active identity attention context'.split(' ')) MSG[k.toUpperCase()] = 'hostcall:' + k

  window.Hostcall?._connect?.(hc => {
    const { opts, src, base, handlers, emit } = hc
    const frame = (hc.frame = document.createElement('iframe'))
    // Hidden until the widget's hello (below): a refused frame shows no broken page.
    frame.style.cssText = 'border:0;width:100%;height:100%;display:block;visibility:hidden;min-height:' + (hc.mode == 'inline' ? '420px' : 0)
    frame.title = hc.label
    frame.dataset.part = 'hostcall-frame'
    hc.panel.append(frame)
    const running = new Map() // callId → AbortController of a handler running in this page
    let ready, greeted
    /** @type {MessagePort | undefined} the widget's channel, from its latest hello */
    let port

    const post = (type, data) => port?.postMessage({ type, ...data })
    // WebMCP's tools, this window's only (getTools may list other frames'), by name: listed at
    // first use and after each toolchange (fired as a tool is (un)registered), not per call;
    // a listing begun before a toolchange is not kept.
    const mc = document.modelContext
    let mine, gen = 0
    const own = (g = gen) => (mine ||= Promise.resolve().then(() => mc?.getTools?.()).then(list => {
      const tools = new Map([...(list || [])].filter(t => t.window === window).map(t => [t.name, t]))
      if (g == gen) mine = tools
      return tools
    }, err => {
      if (g == gen) mine = 0
      throw err
    }))
    let soon
    mc?.addEventListener?.('toolchange', () => (gen++, (mine = 0), clearTimeout(soon), (soon = setTimeout(hc.sync, 50, 1))))
    /** Handshake: the tools this page handles and its visitor's token, on every change
     * (`toolsOnly`: not the token, whose function may fetch). */
    hc.sync = async (toolsOnly, token) => {
      if (!toolsOnly) try { token = hc.id ? await (typeof hc.id == 'function' ? hc.id() : hc.id) : '' } catch (err) { emit('error', { code: 'identify_failed', message: String(err) }) }
      let pageTools // JSON text: a page's schema may hold what the channel cannot copy
      try { pageTools = JSON.stringify([...(await own()).values()], (k, v) => (v === window ? undefined : v)) } catch (err) { console.error(err) }
      greeted && post(MSG.HANDLERS, { tools: [...handlers.keys()], token, pageTools })
    }
    hc.send = text => (ready ? post(MSG.SEND, { text }) : hc.outbox.push(text))
    // The page's context, one entry at a time (the widget checks it). A value the channel
    // cannot copy (a function) goes as why, for the widget to refuse like any other.
    hc.put = (key, value) => {
      try { post(MSG.CONTEXT, { key, value }) } catch (err) { post(MSG.CONTEXT, { key: String(key), clone: String(err?.message || err) }) }
    }
    // Focus the frame from the page first: a frame's own focus() is often ignored.
    hc.focus = () => ready && (frame.focus(), post(MSG.FOCUS))

    // The only window message read: the hello of the widget this page framed. A hello from
    // any other window or origin, with or without a port, is ignored. A reloaded frame says
    // hello again with a new channel, which replaces the old one.
    addEventListener('message', e => {
      if (e.origin !== src.origin || e.source !== frame.contentWindow || e.data?.type !== MSG.HELLO || !e.ports[0]) return
      port?.close()
      port = e.ports[0]
      port.onmessage = ({ data: m }) => m && typeof m.type === 'string' && receive(m)
      greeted = 1
      ready = 0
      frame.style.visibility = ''
      for (const [key, value] of hc.ctx) value == null ? hc.ctx.delete(key) : hc.put(key, value)
      hc.sync()
    })

    function receive(m) {
      if (m.type === MSG.READY) {
        ready = 1
        for (const text of hc.outbox.splice(0)) post(MSG.SEND, { text })
        hc.isOpen && hc.focus()
        emit('ready', {})
      } else if (m.type === MSG.CALL) {
        run(m)
      } else if (m.type === MSG.CANCEL) {
        running.get(m.callId)?.abort(new DOMException('Call settled elsewhere', 'AbortError'))
      } else if (m.type === MSG.CLOSE) {
        window.Hostcall('close')
      } else if (m.type === MSG.IDENTITY) {
        hc.sync()
      } else if (m.type === MSG.EVENT) {
        emit(m.event, m.detail)
      } else if (m.type === MSG.ATTENTION) {
        attention()
      }
    }

    // Count what came while closed (static/badge.js draws it).
    let badge
    function attention() {
      const b = hc.button
      if (hc.isOpen || !b) return
      b.dataset.unread = String(+(b.dataset.unread || 0) + 1)
      badge ||= document.head.appendChild(Object.assign(document.createElement('script'), { src: base + 'static/badge.js' }))
    }

    // The person typing, clicking or focusing on this page makes this tab the one calls go
    // to (docs/protocol.md "Surfaces"); the widget reports it to the server, throttled too.
    let seen = 0
    const active = () => ready && Date.now() - seen > 2e3 && (seen = Date.now(), post(MSG.ACTIVE))
    for (const t of ['pointerdown', 'keydown', 'focusin']) addEventListener(t, active, { capture: true, passive: true })

    /** Run a handler; post its outcome unless the call was settled meanwhile. */
    async function run({ callId, toolName, input, inputSchema, outputSchema, deadline, pageTool }) {
      const tool = pageTool && (await own()).get(toolName)
      const fn = pageTool ? tool && (i => mc.executeTool(tool, i)) : handlers.get(toolName)
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

    // No hello soon after the frame loads: the server went away or refused it (its log says).
    frame.onload = () => setTimeout(() => greeted || (
      hc.fail({ code: 'widget_not_started', message: "the widget did not start (see the server's log)" }),
      (hc.mode == 'inline' ? frame : (hc.button.remove(), hc.panel)).remove()), 1500)
    const q = new URLSearchParams({ origin: location.origin, mode: hc.mode })
    for (const k of ['locale', 'theme', 'accent']) opts[k] && q.set(k, opts[k])
    // The resume key (widget/api.js): in this page's storage, which no other origin reads,
    // handed over in the fragment, which no request carries.
    const keyName = 'hostcall:key:' + opts.agent
    let key = ''
    try { key = localStorage[keyName] || '' } catch (err) {}
    if (!/^[\w-]{32,128}$/.test(key)) {
      key = [...crypto.getRandomValues(new Uint8Array(24))].map(b => b.toString(16).padStart(2, '0')).join('')
      try { localStorage[keyName] = key } catch (err) {}
    }
    frame.src = base + 'widget/' + encodeURIComponent(opts.agent) + '?' + q + '#key=' + key
  })
})()
