// Hostcall widget: the composer's attach button, and files dropped or pasted on the chat, for
// an agent whose file admits them (the config's `attachments`). Imported by app.js at start
// for such an agent only, with the strings and styles it shares with attach.js; attach.js
// itself (the chips, the uploads, the thread's files) comes with the first file.

import { addStrings, h, t } from './chat.js'

// Dropped anywhere on the chat, or pasted: files only (text dropped or pasted is the
// composer's, as ever). Listened for before the strings and styles below load, so that a
// file dropped meanwhile is neither lost nor opened by the browser: it waits for `start`.
/** @type {File[]} */
const early = []
/** @type {(files: File[]) => void} */
let take = files => { early.push(...files) }
addEventListener('dragover', e => e.preventDefault())
addEventListener('drop', e => {
  const files = [...e.dataTransfer?.files || []]
  if (files.length) e.preventDefault()
  take(files)
})
addEventListener('paste', e => take([...e.clipboardData?.files || []]))

await Promise.all([addStrings('attach'), new Promise(resolve => document.head.append(h('link', {
  rel: 'stylesheet', href: new URL('attach.css', import.meta.url).href, onload: resolve, onerror: resolve,
})))])

const CLIP = 'M16.5 6v11.5a4 4 0 0 1-8 0V5a2.5 2.5 0 0 1 5 0v10.5a1 1 0 0 1-2 0V6H10v9.5a2.5 2.5 0 0 0 5 0V5a4 4 0 0 0-8 0v12.5a5.5 5.5 0 0 0 11 0V6z'

/**
 * What app.js's send asks of the files: how many wait, and their upload (attach.js's tray).
 * @typedef {{size: () => number, upload: (cid: string, pending: HTMLElement, text: string) => Promise<string[] | undefined> | undefined}} Files
 */

/**
 * The attach button, for the agent's `config`; the files dropped or pasted go to its tray,
 * those dropped before it too.
 * @param {import('./attach.js').Config} config @param {import('./attach.js').App} app
 * @returns {Files}
 */
export function start(config, app) {
  /** @type {import('./attach.js').Tray | null} */
  let tray = null
  /** @type {Promise<import('./attach.js').Tray> | null} */
  let loading = null
  let tries = 0
  // Once, and again at a fresh URL after a failure (a failed import stays failed for its URL).
  const load = () => (loading ??= import(`./attach.js${tries ? `?retry=${tries}` : ''}`).then(m => (tray = m.tray(config, app)), err => {
    tries++
    loading = null
    throw err
  }))
  /** @param {File[]} files */
  const add = files => { if (files.length) load().then(x => x.add(files), err => console.warn('hostcall: loading a module', err)) }

  // A file input inside its label, drawn as a button: the browser's own picker opens on a
  // click or a key at once (attach.js is not needed for it), the camera offered on a phone.
  const input = /** @type {HTMLInputElement} */ (h('input', {
    type: 'file', multiple: true, accept: Object.keys(config.types).join(), class: 'sr-only', 'aria-label': t('attach'),
    onchange: () => { add([...input.files || []]); input.value = '' },
  }))
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg')
  svg.setAttribute('viewBox', '0 0 24 24')
  svg.setAttribute('aria-hidden', 'true')
  svg.append(document.createElementNS('http://www.w3.org/2000/svg', 'path'))
  svg.firstElementChild?.setAttribute('d', CLIP)
  document.querySelector('[data-part=composer]')?.prepend(h('label', { 'data-part': 'attach', title: t('attach') }, svg, input))

  take = add
  add(early.splice(0))

  return { size: () => tray?.size() || 0, upload: (cid, pending, text) => tray?.upload(cid, pending, text) }
}
