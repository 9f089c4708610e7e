// widget/context.js: the page's context checked against the agent's caps before the widget
// keeps it. Each refusal names the key, a reason the server also uses, and what was wrong.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createContext } from '../../widget/context.js'

const CAPS = { maxEntryBytes: 64, maxTotalBytes: 100, maxEntries: 3 }

/** A context under `caps`, and the refusals it reported. */
function context(caps = CAPS) {
  const refused = []
  return { ctx: createContext(caps, r => refused.push(r)), refused }
}

test('accepted values are sent as the page set them, and null removes one', () => {
  const { ctx, refused } = context()
  assert.equal(ctx.value(), undefined)
  ctx.set('board.column', { id: 'doing', cards: 3 })
  ctx.set('page', '/board')
  ctx.set('page', '/cart')
  assert.deepEqual(ctx.value(), { 'board.column': { id: 'doing', cards: 3 }, page: '/cart' })
  ctx.set('page', null)
  ctx.set('board.column', undefined)
  assert.equal(ctx.value(), undefined)
  assert.deepEqual(refused, [])
})

test('a value is copied when set: changing the object later changes nothing sent', () => {
  const { ctx } = context()
  const cart = { items: 1 }
  ctx.set('cart', cart)
  cart.items = 2
  assert.deepEqual(ctx.value(), { cart: { items: 1 } })
})

test('a key outside the tool names rule is refused', () => {
  for (const key of ['', 'has space', 'k'.repeat(65), 'é', 42, null]) {
    const { ctx, refused } = context()
    ctx.set(key, 1)
    assert.equal(ctx.value(), undefined)
    assert.equal(refused.length, 1, String(key))
    assert.equal(refused[0].reason, 'bad_key')
    assert.match(refused[0].message, /letters, digits/)
  }
})

test('a key of 64 characters is refused past that length without touching it', () => {
  const { ctx, refused } = context()
  const key = 'k'.repeat(64)
  ctx.set(key, 1)
  ctx.set(key + 'k', 2)
  assert.deepEqual(ctx.value(), { [key]: 1 })
  assert.equal(refused[0].reason, 'bad_key')
})

test('what is not strict JSON is refused, saying where', () => {
  class Item {}
  const cyclic = { a: {} }
  cyclic.a.back = cyclic
  const cases = [
    [NaN, /sel is NaN/],
    [{ price: Infinity }, /sel\.price is Infinity/],
    [{ items: [1, undefined] }, /sel\.items\[1\] is undefined/],
    [() => 1, /sel is a function/],
    [10n, /sel is a bigint/],
    [[1, , 3], /sel\[1\] is a hole/], // eslint-disable-line no-sparse-arrays
    [cyclic, /sel\.a\.back contains itself/],
    [new Date(0), /sel is a Date/],
    [new Map(), /sel is a Map/],
    [new Item(), /sel is a Item/],
    [2 ** 53, /past 2\^53/],
    ['\uD800', /lone surrogate/],
    [{ ['a\u0000']: 1 }, /NUL/],
  ]
  for (const [value, why] of cases) {
    const { ctx, refused } = context({ ...CAPS, maxEntryBytes: 1000 })
    ctx.set('sel', value)
    assert.equal(ctx.value(), undefined, String(why))
    assert.equal(refused.length, 1, String(why))
    assert.equal(refused[0].key, 'sel')
    assert.equal(refused[0].reason, 'not_json')
    assert.match(refused[0].message, why)
  }
})

test('numbers JSON holds exactly, shared objects and emoji are accepted', () => {
  const { ctx, refused } = context({ ...CAPS, maxEntryBytes: 1000, maxTotalBytes: 1000 })
  const shared = { id: 1 }
  ctx.set('n', [2 ** 53 - 1, -0.5, 1e21, 1e300])
  ctx.set('twice', [shared, shared])
  ctx.set('text', 'a 😀 b')
  assert.deepEqual(refused, [])
  assert.deepEqual(ctx.value().twice, [{ id: 1 }, { id: 1 }])
})

test('nesting past what the server parses is refused', () => {
  let deep = 0
  for (let i = 0; i < 62; i++) deep = [deep]
  const { ctx, refused } = context({ ...CAPS, maxEntryBytes: 1000, maxTotalBytes: 1000 })
  ctx.set('ok', deep)
  assert.deepEqual(refused, [])
  ctx.set('deep', [deep])
  assert.equal(refused[0].reason, 'not_json')
  assert.match(refused[0].message, /nested past 62/)
})

test('an entry over its cap in UTF-8 bytes is refused, with its size and the cap', () => {
  const { ctx, refused } = context()
  ctx.set('t', '€'.repeat(20)) // 62 bytes of JSON: within 64
  ctx.set('u', '€'.repeat(21)) // 65
  assert.deepEqual(Object.keys(ctx.value()), ['t'])
  assert.deepEqual(refused, [{ key: 'u', reason: 'entry_too_large', message: 'page context "u" refused: it is 65 bytes of JSON; the limit is 64 per entry' }])
})

test('the count and the total are capped; replacing a key counts it once', () => {
  const { ctx, refused } = context()
  ctx.set('a', 'x'.repeat(30)) // 32 bytes
  ctx.set('b', 'x'.repeat(30))
  ctx.set('b', 'x'.repeat(30))
  ctx.set('c', 'x'.repeat(40)) // 32 + 32 + 42 > 100
  assert.deepEqual(refused.map(r => [r.key, r.reason]), [['c', 'total_too_large']])
  assert.match(refused[0].message, /106 bytes of JSON; the limit is 100 in total/)
  ctx.set('c', 1)
  ctx.set('d', 2)
  assert.deepEqual(refused.map(r => [r.key, r.reason]), [['c', 'total_too_large'], ['d', 'too_many_entries']])
  assert.deepEqual(Object.keys(ctx.value()), ['a', 'b', 'c'])
})

test('a refused value takes the key\'s earlier value with it', () => {
  const { ctx, refused } = context()
  ctx.set('sel', 'todo')
  ctx.set('sel', NaN)
  assert.equal(ctx.value(), undefined)
  assert.equal(refused.length, 1)
})

test('a value the page could not copy is refused with the browser\'s reason', () => {
  const { ctx, refused } = context()
  ctx.set('sel', undefined, 'function () {} could not be cloned.')
  assert.deepEqual(refused, [{ key: 'sel', reason: 'not_json', message: 'page context "sel" refused: it could not be copied (function () {} could not be cloned.)' }])
})
