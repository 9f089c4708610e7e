// widget/cards.js: a call's card is built with the thread's drawing, not with the call's first
// events. Its dispatch comes in the same network read as those, and goes to the page first:
// building the card before it held the call up. A stand-in document counts what is built.
import { mock, test } from 'node:test'
import assert from 'node:assert/strict'

const built = []
class Node {
  constructor (tag) { Object.assign(this, { tag, children: [], dataset: {}, attributes: {} }) }
  setAttribute (k, v) { this.attributes[k] = v }
  removeAttribute (k) { delete this.attributes[k] }
  addEventListener () {}
  append (...kids) { this.children.push(...kids) }
  replaceChildren (...kids) { this.children = kids }
  before () {}
  querySelector () { return null }
  querySelectorAll () { return [] }
}
globalThis.document = {
  createElement: tag => (built.push(tag), new Node(tag)),
  createComment: () => new Node('#comment'),
  createTextNode: text => Object.assign(new Node('#text'), { text }),
}
globalThis.requestAnimationFrame = () => {}
// The thread is never drawn here (no shell): no timer may fire.
mock.timers.enable({ apis: ['setTimeout'] })

const { hold } = await import('../../widget/drawing.js')
const { toolCard } = await import('../../widget/cards.js')

test('a card made and changed while the drawing waits builds no DOM, until it is needed', () => {
  hold(60_000) // a call with the page's handler: nothing is drawn
  const card = toolCard('call_1', 'read_board_tasks', 'Read the board')
  card.setState('running', 'Running in the page')
  card.setInput({ column: 'todo' })
  card.setTitle('Board')
  card.setBody()
  card.busy(true)
  card.show()
  assert.deepEqual(built, [])
  // Asked for (an MCP App's view goes in it): built then, as a card.
  assert.equal(card.el.tag, 'article')
  assert.equal(card.el.attributes['data-call-id'], 'call_1')
})
