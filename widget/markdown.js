// Hostcall widget: the safe markdown subset the assistant's messages are drawn in —
// paragraphs, lists, ``` code, **bold**, *italic*, `code`, [links](https://…) and bare
// http(s) URLs — built with DOM calls only, never innerHTML; links only for http(s). A link
// whose words are not its address shows the host it goes to after them: a reply may quote a
// tool's output or a person's message, and `[your bank](https://evil.example)` must not hide
// where it leads (the full address is its title).
// Imported by chat.js when a message first needs it: the idle chat's greeting is plain text,
// and the person's first message fetches it while the answer is on its way.

import { h } from './chat.js'

const INLINE = /`([^`\n]+)`|\*\*([^*\n]+?)\*\*|(?<![\w*])\*(?![\s*])([^*\n]+?)\*(?![\w*])|\[([^\]\n]+)\]\(\s*([^()\s]+)\s*\)|(https?:\/\/[^\s<>()"']+[^\s<>()"'.,;:!?])/g

/** Render `src` into `into`, replacing its children. @param {string} src @param {HTMLElement} into */
export function renderMarkdown(src, into) {
  const lines = src.replace(/\r\n?/g, '\n').split('\n')
  const blocks = []
  let para = []
  let list = null
  const flush = () => { if (para.length) blocks.push(h('p', null, inline(para.join('\n')))); para = [] }
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]
    const item = /^\s*([-*+•]|\d{1,3}[.)])\s+(.*)$/.exec(line)
    const heading = /^#{1,6}\s+(.*)$/.exec(line)
    if (/^\s*```/.test(line)) {
      const code = []
      while (++i < lines.length && !/^\s*```/.test(lines[i])) code.push(lines[i])
      flush()
      blocks.push(h('pre', null, h('code', { text: code.join('\n') })))
      list = null
    } else if (item) {
      flush()
      const tag = /\d/.test(item[1]) ? 'OL' : 'UL'
      if (list?.tagName !== tag) {
        const start = parseInt(item[1], 10)
        blocks.push(list = h(tag, start > 1 ? { start } : null))
      }
      list.append(h('li', null, inline(item[2])))
    } else if (list && /^\s{2,}\S/.test(line)) {
      list.lastElementChild?.append(' ', ...inline(line.trim()))
    } else {
      list = null
      if (heading) { flush(); blocks.push(h('p', null, h('strong', null, inline(heading[1])))) } else if (line.trim()) para.push(line)
      else flush()
    }
  }
  flush()
  into.replaceChildren(...blocks)
}

function inline(text) {
  const out = []
  let last = 0
  for (const m of text.matchAll(INLINE)) {
    out.push(text.slice(last, m.index))
    if (m[1] != null) out.push(h('code', { text: m[1] }))
    else if (m[2]) out.push(h('strong', null, inline(m[2])))
    else if (m[3]) out.push(h('em', null, inline(m[3])))
    else if (m[4]) out.push(link(m[5], inline(m[4]), m[4]) ?? m[0])
    else out.push(link(m[6], [m[6]], m[6]) ?? m[6])
    last = (m.index) + m[0].length
  }
  out.push(text.slice(last))
  return out
}

/** An anchor for an http(s) URL, its host after words that are not the address; null for
 * anything else, which stays plain text. The host is the URL's (punycode for an IDN).
 * @param {string} href @param {any[]} kids @param {string} words */
function link(href, kids, words) {
  let url
  try { url = new URL(href) } catch { return null }
  if (!/^https?:$/.test(url.protocol)) return null
  const said = words.trim().toLowerCase()
  const host = [href.toLowerCase(), url.href.toLowerCase(), url.host].includes(said) ? null : h('span', { 'data-part': 'link-host', text: ` (${url.host})` })
  return h('a', { href: url.href, title: url.href, target: '_blank', rel: 'noopener noreferrer nofollow' }, kids, host)
}
