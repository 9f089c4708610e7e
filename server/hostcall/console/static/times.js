// Hostcall console: a server-drawn page's times (<time data-part="when" datetime="ISO">) in
// the reader's local date and time, as the lists a script draws show theirs (console.js's
// when()). Without script, the ISO time stays.

import { when } from './console.js'

for (const el of document.querySelectorAll('time[data-part="when"]')) {
  const at = Date.parse(el.getAttribute('datetime') || '')
  if (!Number.isNaN(at)) el.textContent = when(at / 1000)
}
