// Hostcall widget: files the visitor sends with a message (docs/agents.md, "attachments";
// docs/protocol.md, the upload route). Chosen files wait as chips above the composer, with a
// thumbnail and a remove button; what the agent's config refuses is refused at once, with the
// reason. Nothing is uploaded before Send: then each file goes up (its progress said), and the
// message is posted with their ids (app.js's send). A file the server refuses is taken out of
// the message, the typed text goes back to the composer and the other files stay, with the
// reason; a file the server could not be reached for stays, and the message is marked not
// sent, with Retry, as any. The chips go when the server's stream shows the message. The
// thread shows a message's files: images drawn from their bytes, other files by name.
//
// Loaded by files.js with the first file chosen, dropped or pasted, and by events.js and
// snapshot.js with the first message that has files; its strings (locale-xx-attach.js) and
// styles (attach.css) with it. Never markup: only the four image types below are drawn, as an
// <img> of bytes whose first ones say so (an SVG or a page named .png is shown by its name).

import { addStrings, announce, h, t } from './chat.js'

// Strings and styles first: nothing of this module shows as keys or unstyled.
await Promise.all([addStrings('attach'), new Promise(resolve => document.head.append(h('link', {
  rel: 'stylesheet', href: new URL('attach.css', import.meta.url).href, onload: resolve, onerror: resolve,
})))])

/**
 * @typedef {{maxFiles: number, types: Record<string, number>}} Config the widget config's
 *   `attachments` (server/hostcall/attachments/policy.py)
 * @typedef {{id: string, name: string, type: string, size: number, url: string}} Sent a
 *   message's file, as the server shows it (docs/protocol.md)
 * @typedef {ReturnType<typeof import('./api.js').createApi>} Api
 * @typedef {{api: Api, cfg: {apiBase?: string}}} App what app.js lends
 * @typedef {{size: () => number, add: (files: File[]) => Promise<void>,
 *   upload: (cid: string, pending: HTMLElement, text: string) => Promise<string[] | undefined>,
 *   sent: (ids: string[]) => void}} Tray
 * @typedef {{file: File, type: string, el: HTMLElement, src: string, reason: string,
 *   id?: string, cid?: string}} Chip a chosen file; `id`: uploaded to conversation `cid`
 */

/** The types drawn as images, and the bytes each begins with (`null`: any byte). */
const IMAGES = {
  'image/png': [0x89, 0x50, 0x4e, 0x47],
  'image/jpeg': [0xff, 0xd8, 0xff],
  'image/gif': [0x47, 0x49, 0x46, 0x38],
  'image/webp': [0x52, 0x49, 0x46, 0x46, null, null, null, null, 0x57, 0x45, 0x42, 0x50],
}
/** What a name's extension says, for a browser that guesses nothing (or another type: a CSV
 * is "application/vnd.ms-excel" on some systems). */
const EXTENSIONS = {
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp',
  pdf: 'application/pdf', txt: 'text/plain', csv: 'text/csv',
}
/** What the visitor is told of a refusal by the server, by its code (docs/protocol.md). */
const REASONS = {
  attachment_too_large: 'attachTooLarge', attachment_type_refused: 'attachContentRefused',
  attachments_not_allowed: 'attachNotAllowed', attachment_quota: 'attachQuota',
  bad_attachment_name: 'attachBadName', bad_attachment: 'attachContentRefused',
}

/** The composer's files, once made. @type {Tray | null} */
let made = null
/** The API's path prefix (the page's config, as app.js reads it). */
const base = JSON.parse(document.getElementById('hc-config')?.textContent || '{}').apiBase || ''

/**
 * The composer's files, for the agent's `config`; `app` lends its API client.
 * @param {Config} config @param {App} app @returns {Tray}
 */
export function tray(config, app) {
  /** @type {Chip[]} */
  let chips = []
  const list = h('ul', { 'data-part': 'attachment-chips' })
  const status = h('p', { 'data-part': 'attachments-status', role: 'status' })
  const box = h('div', { 'data-part': 'attachments', role: 'group', 'aria-label': t('attachFiles'), hidden: true }, list, status)
  document.querySelector('[data-part=composer]')?.before(box)
  const input = /** @type {HTMLTextAreaElement | null} */ (document.querySelector('[data-part=composer-input]'))
  const ready = () => chips.filter(c => !c.reason)
  const say = (/** @type {string} */ text) => { status.textContent = text }
  const sync = () => { box.hidden = !chips.length }

  /** @param {Chip} chip @param {string} reason */
  function refuse(chip, reason) {
    chip.reason = reason
    chip.el.dataset.state = 'refused'
    chip.el.querySelector('[data-part=attachment-reason]')?.replaceChildren(reason)
    announce(reason)
  }

  /** @param {Chip} chip @param {boolean} [focus] */
  function remove(chip, focus = true) {
    const at = chips.indexOf(chip)
    chips = chips.filter(c => c !== chip)
    if (chip.src) URL.revokeObjectURL(chip.src)
    chip.el.remove()
    sync()
    if (!focus) return
    // Focus stays in the tray, on the next chip's remove button, else goes to the composer.
    const next = chips[Math.min(at, chips.length - 1)]
    ;/** @type {HTMLElement | null} */ (next?.el.querySelector('[data-part=attachment-remove]') || input)?.focus()
  }

  /** @param {File} file */
  async function add(file) {
    const named = EXTENSIONS[/** @type {keyof typeof EXTENSIONS} */ (file.name.split('.').pop()?.toLowerCase() || '')]
    const type = file.type in config.types ? file.type : named || file.type || '?'
    const most = config.types[type]
    const reason = !most ? t('attachTypeRefused', { name: file.name })
      : file.size > most ? t('attachTooLarge', { name: file.name, size: bytes(most) })
        : ready().length >= config.maxFiles ? t('attachTooMany', { n: config.maxFiles }) : ''
    const src = !reason && await looksLike(file, type) ? URL.createObjectURL(file) : ''
    const label = t('attachRemove', { name: file.name })
    /** @type {Chip} */
    const chip = { file, type, src, reason: '', el: h('li', { 'data-part': 'attachment-chip', 'data-type': type, 'data-state': 'ready' },
      preview(src, file.name),
      h('span', { 'data-part': 'attachment-name', dir: 'auto', text: file.name, title: file.name }),
      h('span', { 'data-part': 'attachment-size', text: bytes(file.size) }),
      h('span', { 'data-part': 'attachment-reason' }),
      h('button', { type: 'button', 'data-part': 'attachment-remove', 'aria-label': label, title: label, onclick: () => remove(chip) }, '×')) }
    chips.push(chip)
    list.append(chip.el)
    sync()
    if (reason) refuse(chip, reason)
    else announce(t('attachAdded', { name: file.name }))
  }

  return (made = {
    size: () => ready().length,
    // One at a time, in order: the count checked against the files before.
    add: async files => { for (const file of files) await add(file) },
    async upload(cid, pending, text) {
      chips.filter(c => c.reason).forEach(c => remove(c, false)) // refused and shown: not sent
      const going = ready()
      if (!going.length) return undefined
      show(pending, going.map(c => ({ name: c.file.name, type: c.type, size: c.file.size, src: c.src })))
      // Each stays, while the message is on its way: its image is in the thread too.
      const lock = (/** @type {boolean} */ on) => going.forEach(c => c.el.querySelector('button')?.toggleAttribute('disabled', on))
      lock(true)
      for (const [i, chip] of going.entries()) {
        say(t('attachUploading', { i: i + 1, n: going.length }))
        chip.el.dataset.state = 'uploading'
        try {
          // Uploaded before, for this conversation (a send that failed after it): not again.
          if (chip.cid !== cid) {
            const path = app.api.conv(cid, `/attachments?name=${encodeURIComponent(chip.file.name)}`)
            chip.id = (await app.api.call('POST', path, chip.file)).attachment.id
            chip.cid = cid
          }
          chip.el.dataset.state = 'uploaded'
        } catch (err) {
          for (const c of going) if (c.el.dataset.state !== 'refused') c.el.dataset.state = c.cid === cid ? 'uploaded' : 'ready'
          lock(false)
          say('')
          const key = err.status >= 400 && err.status < 500 && REASONS[/** @type {keyof typeof REASONS} */ (err.code)]
          // Not reached (the network, the server down): the message is marked not sent,
          // with Retry (app.js), and its files stay here for it.
          if (!key) throw err
          // Refused: that file is out of the message, with why; the message is not sent,
          // its text back in the composer, the other files still here. control.js says
          // nothing more (`said`); the page's `error` event has the code.
          pending.remove()
          if (input && !input.value.trim()) input.value = text
          refuse(chip, t(key, { name: chip.file.name, size: bytes(config.types[chip.type] || 0) }))
          input?.focus()
          throw Object.assign(err, { said: true })
        }
      }
      say('')
      return going.map(c => String(c.id))
    },
    // The server's stream (or a snapshot) shows the message with these files: their chips
    // go (their images stay, in the thread).
    sent(ids) {
      for (const c of chips) if (c.id && ids.includes(c.id)) c.el.remove()
      chips = chips.filter(c => !(c.id && ids.includes(c.id)))
      sync()
    },
  })
}

/**
 * Show a message's files in the thread, above its text: `sent`, as the server has them (the
 * stream's, a snapshot's), or the chips of a message being sent (`src`: their object URLs).
 * The server's images are fetched with the session (an <img> could not send it) and drawn
 * from their bytes. A message that has them already keeps them.
 * @param {HTMLElement | null | undefined} el the message @param {(Sent | {name: string, type: string, size: number, src: string})[]} sent
 * @param {Api} [api]
 */
export function show(el, sent, api) {
  made?.sent(sent.map(f => 'id' in f ? f.id : ''))
  if (!el || !sent.length || el.querySelector('[data-part=message-attachments]')) return
  el.dataset.files = String(sent.length)
  el.hidden = false
  el.querySelector('[data-part=message-text]')?.before(h('ul', { 'data-part': 'message-attachments' }, sent.map(f => {
    const item = h('li', { 'data-part': 'message-attachment', 'data-type': f.type, title: f.name },
      h('span', { 'data-part': 'attachment-name', dir: 'auto', text: f.name }),
      h('span', { 'data-part': 'attachment-size', text: bytes(f.size) }))
    const src = 'src' in f ? f.src : ''
    if (src) item.prepend(image(src, f.name))
    else if ('url' in f && f.type in IMAGES && api) fetchImage(f, api).then(src => src && item.prepend(image(src, f.name)), err => console.warn('hostcall: an attachment', err))
    return item
  })))
}

/**
 * An image's bytes, as an object URL, if they are the image its type says. With the session
 * as a header (`call` reads JSON; an <img> sends no header), at most once more after another
 * tab replaced the session. @param {Sent} f @param {Api} api
 */
async function fetchImage(f, api) {
  for (let n = 0; ; n++) {
    const res = await fetch(base + f.url, { headers: { authorization: `Bearer ${api.current().sessionToken}` }, credentials: 'omit' })
    if (res.status === 401 && !n && (await api.resume().catch(() => null))) continue
    if (!res.ok) throw new Error(`${f.url}: ${res.status}`)
    const blob = await res.blob()
    return await looksLike(blob, f.type) ? URL.createObjectURL(new Blob([blob], { type: f.type })) : ''
  }
}

/** @param {string} src @param {string} name */
const image = (src, name) => h('img', { 'data-part': 'attachment-thumb', src, alt: name, decoding: 'async' })

/** A chip's picture: the image, or a tag with the file's kind, as its name says ("PDF", "TXT").
 * @param {string} src @param {string} name */
const preview = (src, name) => src ? h('img', { 'data-part': 'attachment-thumb', src, alt: '' })
  : h('span', { 'data-part': 'attachment-icon', 'aria-hidden': 'true', text: (name.includes('.') && name.split('.').pop() || '?').slice(0, 4).toUpperCase() })

/** Whether `blob` is an image of `type` by its first bytes (drawn only then). @param {Blob} blob @param {string} type */
async function looksLike(blob, type) {
  const magic = IMAGES[/** @type {keyof typeof IMAGES} */ (type)]
  if (!magic) return false
  const head = new Uint8Array(await blob.slice(0, magic.length).arrayBuffer())
  return magic.every((b, i) => b === null || head[i] === b)
}

/** A size in the visitor's language, in kB or MB ("1.5 MB", "0.1 kB"). @param {number} n */
function bytes(n) {
  const [unit, size] = n >= 1048576 ? ['megabyte', n / 1048576] : ['kilobyte', Math.max(n / 1024, 0.1)]
  return new Intl.NumberFormat(document.documentElement.lang, { style: 'unit', unit, maximumFractionDigits: 1 }).format(size)
}
