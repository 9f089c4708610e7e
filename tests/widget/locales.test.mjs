// The widget's strings: each part (the chat's, the tool calls', the history's, people.js's) has the same
// keys, and the same {placeholders} in each key, in every language (a missing key shows as
// its name to a visitor).
import { test } from 'node:test'
import assert from 'node:assert/strict'

const LOCALES = ['en', 'fr', 'es', 'ja']
const placeholders = text => [...text.matchAll(/\{(\w+)\}/g)].map(m => m[1]).sort()

for (const part of ['', '-calls', '-history', '-people']) {
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
