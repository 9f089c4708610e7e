// Hostcall widget: localisation. English, French, Spanish and Japanese (the seeds'
// languages), one module per language (locale-xx.js) so a page loads only its own. The
// language comes from the snippet's data-locale (the page's `locale` parameter), else the
// browser's languages, else English. Every locale file has every key; a missing one shows
// the key itself, which is easy to spot.

export const LOCALES = Object.freeze(['en', 'fr', 'es', 'ja'])

/** @type {Record<string, string>} */
let strings = {}

/** The first supported language among `candidates` ("fr-CA" → "fr"). @param {...(string | null | undefined)} candidates */
export function pickLocale(...candidates) {
  for (const c of candidates) {
    const lang = String(c || '').slice(0, 2).toLowerCase()
    if (LOCALES.includes(lang)) return lang
  }
  return 'en'
}

/** Load `lang`'s strings (the page preloads the module) and mark the document. @param {string} lang */
export async function setLocale(lang) {
  const code = LOCALES.includes(lang) ? lang : 'en'
  strings = (await import(`./locale-${code}.js`)).default
  document.documentElement.lang = code
}

/**
 * The string for `key`, with `{name}` placeholders filled in.
 * @param {string} key @param {Record<string, unknown>} [params]
 */
export function t(key, params) {
  const s = strings[key] ?? key
  return params ? s.replace(/\{(\w+)\}/g, (_, k) => String(params[k] ?? '')) : s
}
