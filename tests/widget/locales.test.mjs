// The widget's strings: each part (the chat's, and each feature's: chat.js says which) has the same
// keys, and the same {placeholders} in each key, in every language (a missing key shows as
// its name to a visitor).
import { test } from 'node:test'
import assert from 'node:assert/strict'

const LOCALES = ['en', 'fr', 'es', 'ja']
const PARTS = ['', '-calls', '-history', '-people', '-control', '-restart', '-suggest', '-branch', '-reasoning', '-attach', '-apps']
const placeholders = text => [...text.matchAll(/\{(\w+)\}/g)].map(m => m[1]).sort()

for (const part of PARTS) {
  test(`locale-xx${part}.js: every language has every key and its placeholders`, async () => {
    const [en, ...others] = await Promise.all(
      LOCALES.map(async lang => (await import(`../../widget/locale-${lang}${part}.js`)).default))
    for (const [i, strings] of others.entries()) {
      assert.deepEqual(Object.keys(strings).sort(), Object.keys(en).sort(), LOCALES[i + 1])
      for (const key of Object.keys(en)) {
        assert.deepEqual(placeholders(strings[key]), placeholders(en[key]), `${LOCALES[i + 1]}: ${key}`)
        assert.ok(strings[key].trim(), `${LOCALES[i + 1]}: ${key} is empty`)
      }
    }
  })
}

// One place per string: a key in two parts would let the later-loaded one change it.
test('locale-xx*.js: no key is in two parts of a language', async () => {
  for (const lang of LOCALES) {
    const seen = new Map()
    for (const part of PARTS) {
      for (const key of Object.keys((await import(`../../widget/locale-${lang}${part}.js`)).default)) {
        assert.ok(!seen.has(key), `${lang}: ${key} is in locale-${lang}${seen.get(key)}.js and locale-${lang}${part}.js`)
        seen.set(key, part)
      }
    }
  }
})
