// widget/apps-wire.js: what the host side of an MCP Apps view accepts from a view and tells
// it, with node's own test runner (tests/system/test_widget_js.py runs it). The frame, the
// origins and the visitor's consent are the browser's: tests/e2e/test_app_views.py.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import * as W from '../../widget/apps-wire.js'

test('only JSON-RPC 2.0 is read: requests, notifications and responses apart', () => {
  assert.equal(W.classify(null), null)
  assert.equal(W.classify('ui/initialize'), null)
  assert.equal(W.classify({ method: 'ui/initialize', id: 1 }), null) // no jsonrpc
  assert.equal(W.classify({ jsonrpc: '2.0', id: 1 }), null) // neither a method nor an answer
  assert.deepEqual(W.classify({ jsonrpc: '2.0', id: 1, method: 'ping' }), { kind: 'request', id: 1, method: 'ping', params: {} })
  assert.deepEqual(W.classify({ jsonrpc: '2.0', id: { x: 1 }, method: 'ping' }), { kind: 'notification', method: 'ping', params: {} })
  assert.deepEqual(W.classify({ jsonrpc: '2.0', method: W.METHOD.INITIALIZED, params: 'x' }), { kind: 'notification', method: W.METHOD.INITIALIZED, params: {} })
  assert.deepEqual(W.classify({ jsonrpc: '2.0', id: 'a', result: {} }), { kind: 'response', id: 'a', result: {}, error: undefined })
})

test('before initialized a view is answered only its handshake and ping', () => {
  assert.deepEqual([...W.BEFORE_INITIALIZED].sort(), ['ping', 'ui/initialize'])
})

test('the method names are the specification’s', () => {
  assert.equal(W.METHOD.INITIALIZED, 'ui/notifications/initialized')
  assert.equal(W.METHOD.TOOL_INPUT, 'ui/notifications/tool-input')
  assert.equal(W.METHOD.TOOL_RESULT, 'ui/notifications/tool-result')
  assert.equal(W.METHOD.TEARDOWN, 'ui/resource-teardown')
  assert.equal(W.METHOD.UPDATE_CONTEXT, 'ui/update-model-context')
  assert.equal(W.METHOD.PROXY_READY, 'ui/notifications/sandbox-proxy-ready')
  assert.equal(W.METHOD.RESOURCE_READY, 'ui/notifications/sandbox-resource-ready')
})

test('a view’s height is clamped, and what is not a number is ignored', () => {
  assert.equal(W.clampHeight(10), W.HEIGHT.MIN)
  assert.equal(W.clampHeight(1e9), W.HEIGHT.MAX)
  assert.equal(W.clampHeight(240.4), 240)
  for (const bad of [NaN, Infinity, '300', null, undefined]) assert.equal(W.clampHeight(bad), null)
})

test('a link is asked about only when it is http(s)', () => {
  assert.equal(W.linkTarget('https://example.com/a?b=1').host, 'example.com')
  assert.equal(W.linkTarget('http://example.com').protocol, 'http:')
  for (const bad of ['javascript:alert(1)', 'data:text/html,x', '/relative', 'file:///etc/passwd', 'blob:https://x/1', 42, `https://x.example/${'a'.repeat(3000)}`]) {
    assert.equal(W.linkTarget(bad), null, String(bad).slice(0, 40))
  }
})

test('a message is its text blocks, the visitor’s role only, bounded', () => {
  assert.equal(W.messageText({ role: 'user', content: [{ type: 'text', text: 'Add a task' }, { type: 'image', data: 'x' }, { type: 'text', text: 'now' }] }), 'Add a task\nnow')
  assert.equal(W.messageText({ role: 'assistant', content: [{ type: 'text', text: 'x' }] }), '')
  assert.equal(W.messageText({ content: 'not a list' }), '')
  assert.equal(W.messageText({ role: 'user', content: [{ type: 'text', text: 'y'.repeat(9000) }] }).length, 8000)
})

test('the result told to a view: the MCP result as it came, a value wrapped, a stop as cancelled', () => {
  const mcp = { content: [{ type: 'text', text: '{"n":1}' }], structuredContent: { n: 1 }, truncated: false }
  assert.deepEqual(W.resultMessage({ output: mcp }), { method: W.METHOD.TOOL_RESULT, params: { content: mcp.content, structuredContent: { n: 1 } } })
  assert.deepEqual(W.resultMessage({ output: { n: 2 } }), { method: W.METHOD.TOOL_RESULT, params: { content: [{ type: 'text', text: '{"n":2}' }], structuredContent: { n: 2 } } })
  assert.deepEqual(W.resultMessage({ output: [1] }).params, { content: [{ type: 'text', text: '[1]' }] })
  assert.deepEqual(W.resultMessage({ error: { code: 'cancelled', message: 'stopped' } }), { method: W.METHOD.TOOL_CANCELLED, params: { reason: 'cancelled' } })
  assert.deepEqual(W.resultMessage({ error: { code: 'upstream_error', message: 'down' } }).params, { isError: true, content: [{ type: 'text', text: 'down' }] })
  assert.equal(W.resultMessage(undefined), null)
  assert.equal(W.resultMessage({}), null)
})

test('the protocol version: the view’s when spoken here, else the newest', () => {
  assert.equal(W.version('2025-11-21'), '2025-11-21')
  assert.equal(W.version('1999-01-01'), W.VERSIONS[0])
  assert.equal(W.version(undefined), W.VERSIONS[0])
})
