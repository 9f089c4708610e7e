/* Hostcall launcher badge (static/badge.js), added to the host page by bridge.js the first
 * time a reply, a card needing the person, or a team member's message or notice arrives while
 * the chat is closed. It draws the launcher's data-unread count (the bridge's), clears it
 * when the chat opens, and puts it in
 * the launcher's accessible name, in the snippet's language. */
;(() => {
  const button = /** @type {HTMLButtonElement | null} */ (document.querySelector('[data-part=hostcall-launcher]'))
  if (!button || button.querySelector('[data-part=hostcall-badge]')) return
  const script = /** @type {HTMLScriptElement | null} */ (document.querySelector('script[data-agent]'))
  const lang = (script?.dataset.locale || navigator.language).slice(0, 2)
  const name = button.getAttribute('aria-label')
  /** The launcher's name with `n` unread (the loader's label, then the count), by language.
   * @type {Record<string, (n: number) => string>} */
  const UNREAD = {
    en: n => `${name}, ${n} unread`,
    fr: n => `${name}, ${n} non lu${n > 1 ? 's' : ''}`,
    es: n => `${name}, ${n} sin leer`,
    ja: n => `${name}、未読 ${n} 件`,
  }
  const dot = document.createElement('span')
  dot.dataset.part = 'hostcall-badge'
  dot.setAttribute('aria-hidden', 'true')
  dot.style.cssText = 'position:absolute;top:-4px;right:-4px;min-width:22px;height:22px;padding:0 6px;box-sizing:border-box;border-radius:11px;background:#dc2626;color:#fff;font:700 12px/22px system-ui,sans-serif;text-align:center;box-shadow:0 0 0 2px #fff'
  button.append(dot)

  function draw() {
    const n = Number(button.dataset.unread) || 0
    dot.textContent = n > 9 ? '9+' : String(n)
    dot.style.display = n ? '' : 'none'
    button.setAttribute('aria-label', n ? (UNREAD[lang] || UNREAD.en)(n) : name)
  }
  new MutationObserver(draw).observe(button, { attributes: true, attributeFilter: ['data-unread'] })
  window.Hostcall('on', 'open', () => delete button.dataset.unread) // seen: cleared
  draw()
})()
