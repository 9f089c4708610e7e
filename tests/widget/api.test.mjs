// widget/api.js, sessions across tabs: what the widget sends when another tab's
// resume replaced its session, and when its own resume met a cookie another tab had just
// replaced. fetch is a small scripted fake: no server, no browser.
import { test, afterEach } from 'node:test'
import assert from 'node:assert/strict'
import { createApi } from '../../widget/api.js'

const RESUME = '/api/agents/planner/session'
const OPENED = (token) => ({ conversationId: 'c_1', sessionToken: token, streamToken: 's', agent: {} })
const KEY = 'k'.repeat(43)
const ERROR = (code, details = {}) => ({ error: { code, message: code, details } })

/** Answers in order, keeping what each request carried. */
class ScriptedFetch {
  constructor(answers) { this.answers = answers; this.sent = []; this.bodies = [] }
  fetch = async (url, init) => {
    this.sent.push({ url, credentials: init.credentials, authorization: init.headers.get('authorization') })
    this.bodies.push(init.body === undefined || init.body instanceof Blob ? init.body : JSON.parse(init.body))
    this.types = [...(this.types || []), init.headers.get('content-type')]
    const next = this.answers.shift()
    assert.ok(next, `no answer scripted for ${url}`)
    const [status, body] = next
    return new Response(status === 204 ? null : JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } })
  }
}

const realFetch = globalThis.fetch
/** @type {ScriptedFetch} */
let server
afterEach(() => { globalThis.fetch = realFetch })
function script(...answers) {
  server = new ScriptedFetch(answers)
  globalThis.fetch = server.fetch
  return server
}

test('a new page resumes with the cookie and the page key, no token', async () => {
  script([200, OPENED('t1')])
  const api = createApi('', 'planner', 'https://shop.example', KEY)
  await api.resume()
  assert.deepEqual(server.sent, [{ url: RESUME, credentials: 'same-origin', authorization: null }])
  assert.deepEqual(server.bodies, [{ parentOrigin: 'https://shop.example', resumeKey: KEY }])
})

test('a new conversation is created with the page key, for the cookie to be bound to', async () => {
  script([201, OPENED('t1')])
  await createApi('', 'planner', '', KEY).create('fr')
  assert.deepEqual(server.bodies, [{ locale: 'fr', parentOrigin: '', resumeKey: KEY }])
})

test('a replaced tab resumes with the token it held, then retries with the new one', async () => {
  script([200, OPENED('t1')], [401, ERROR('session_replaced')], [200, OPENED('t2')], [202, { runId: 'r' }])
  const api = createApi('', 'planner', '')
  await api.resume()
  assert.deepEqual(await api.message('c_1', 'hello'), { runId: 'r' })
  const [, refused, resumed, retried] = server.sent
  assert.equal(refused.authorization, 'Bearer t1')
  assert.deepEqual(resumed, { url: RESUME, credentials: 'same-origin', authorization: 'Bearer t1' })
  assert.deepEqual(retried, { url: '/api/conversations/c_1/messages', credentials: 'omit', authorization: 'Bearer t2' })
})

test('a superseded cookie is asked for again after a pause, then resumes', async () => {
  script([404, ERROR('no_session', { superseded: true })], [200, OPENED('t1')])
  const api = createApi('', 'planner', '')
  const began = Date.now()
  assert.equal((await api.resume()).sessionToken, 't1')
  assert.equal(server.sent.length, 2)
  assert.ok(Date.now() - began >= 140, 'asked again only after the winner\'s cookie had time to land')
})

test('a superseded cookie is asked for three times at most', async () => {
  const superseded = [404, ERROR('no_session', { superseded: true })]
  script(superseded, superseded, superseded)
  const api = createApi('', 'planner', '')
  await assert.rejects(api.resume(), err => err.status === 404 && err.code === 'no_session')
  assert.equal(server.sent.length, 3)
})

test('no cookie at all is no error and not asked for again: the conversation comes with the first message', async () => {
  script([204])
  const api = createApi('', 'planner', '')
  assert.equal(await api.resume(), null)
  assert.deepEqual(api.current(), { conversationId: '', sessionToken: '' })
  assert.equal(server.sent.length, 1)
})

test('a message carries the page context when there is one, and no key when there is none', async () => {
  script([202, { runId: 'r1' }], [202, { runId: 'r2' }])
  const api = createApi('', 'planner', '')
  await api.message('c_1', 'which column?', false, { 'board.column': { id: 'doing' } })
  await api.message('c_1', 'and now?', false, undefined)
  assert.deepEqual(server.bodies, [{ text: 'which column?', context: { 'board.column': { id: 'doing' } } }, { text: 'and now?' }])
})

test('a file goes up as its bytes, not JSON, and again as they are after a replaced session', async () => {
  const file = new Blob([new Uint8Array([0x89, 0x50, 0x4e, 0x47])], { type: 'image/png' })
  script([200, OPENED('t1')], [401, ERROR('session_replaced')], [200, OPENED('t2')], [201, { attachment: { id: 'a_1' } }])
  const api = createApi('', 'planner', '')
  await api.resume()
  const sent = await api.call('POST', api.conv('c_1', '/attachments?name=p.png'), file)
  assert.equal(sent.attachment.id, 'a_1')
  const [, refused, , retried] = server.bodies
  assert.equal(refused, file)
  assert.equal(retried, file)
  // No JSON content type: the browser sends the file's own.
  assert.deepEqual(server.types, ['application/json', null, 'application/json', null])
  assert.equal(server.sent[3].authorization, 'Bearer t2')
})

test('a message names its files by id, and only when it has some', async () => {
  script([200, OPENED('t1')], [202, { runId: 'r1' }], [202, { runId: 'r2' }])
  const api = createApi('', 'planner', '')
  await api.resume()
  await api.message('c_1', '', false, undefined, ['a_1', 'a_2'])
  await api.message('c_1', 'hi', false, undefined, undefined)
  assert.deepEqual(server.bodies.slice(1), [{ text: '', attachments: ['a_1', 'a_2'] }, { text: 'hi' }])
})
