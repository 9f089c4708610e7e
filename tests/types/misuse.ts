// Mistakes the declarations must catch: each line needs its @ts-expect-error (tsc fails on an
// unused one, so a declaration that became too loose fails the check).
export {}

// @ts-expect-error: no such command
Hostcall('reload')
// @ts-expect-error: before the loader has run, Hostcall is the snippet's queue: no methods
Hostcall.register('x', () => ({}))
// @ts-expect-error: nor on window
window.Hostcall.on('message', () => {})
// @ts-expect-error: queued, `on` may return nothing to call
Hostcall('on', 'message', () => {})()

if (Hostcall.loaded) {
  // @ts-expect-error: no such event
  Hostcall.on('finished', () => {})
  // @ts-expect-error: a message's detail has no `callId`
  Hostcall.on('message', m => m.callId)
  // @ts-expect-error: send takes text
  Hostcall.send({ text: 'hi' })
  // @ts-expect-error: a handler's context has no `token` (the page never sees tokens)
  Hostcall.register('x', (_input, ctx) => ctx.token)
  // @ts-expect-error: the output must be JSON, not a function
  Hostcall.register('y', () => () => 1)
  // @ts-expect-error: identify takes a JWT or a function giving one
  Hostcall.identify({ sub: 'ann' })
}
// @ts-expect-error: the command form checks the same: send takes text
Hostcall('send', 42)
// @ts-expect-error: context is JSON: a function is not
Hostcall('context', 'cart', { total: () => 3 })
// @ts-expect-error: and a key is a name
Hostcall('context', 42, 'x')
