// A typed host page (the README's example, with the demo's tools): it must type-check against
// widget/embed.d.ts. scripts/check runs `tsc -p tests/types`.
import type { Handler, HandlerContext, ToolResultDetail } from '../../widget/embed'

interface Task {
  id: string
  title: string
  status: 'todo' | 'in-progress' | 'done'
  dueDate?: string
}

const board: Task[] = [{ id: 't1', title: 'Write release notes', status: 'todo' }]

const readBoard: Handler<{ boardId: string; status?: Task['status'] }, { tasks: Task[] }> = async (
  input,
  ctx: HandlerContext,
) => {
  ctx.signal.throwIfAborted()
  console.log(`call ${ctx.callId} of ${ctx.toolName}`, ctx.outputSchema)
  return { tasks: board.filter(t => !input.status || t.status === input.status) }
}

Hostcall('register', 'read_board_tasks', readBoard)
window.Hostcall('register', 'create_task', (input: { title: string; dueDate?: string }): Task => {
  const task: Task = { id: `t${board.length + 1}`, title: input.title, status: 'todo', dueDate: input.dueDate }
  board.push(task)
  return task
})

// The command form works before the loader has run; `on` then returns nothing to call.
const stop = Hostcall('on', 'toolresult', (detail: ToolResultDetail) => {
  if (detail.outcome && 'error' in detail.outcome) console.warn(detail.outcome.error.code)
})
stop?.()
Hostcall('open')
Hostcall('send', 'What should I work on next?')
// Where the visitor is: sent with each message; null removes it.
Hostcall('context', 'selected_column', { status: 'todo', tasks: board.map(t => t.id) })
Hostcall('context', 'selected_column', null)

// The methods exist once the loader has run.
if (Hostcall.loaded) {
  Hostcall.on('message', m => console.log(m.role, m.text.length))
  const stopErrors: () => void = Hostcall.on('error', e => console.error(e.code, e.message ?? ''))
  stopErrors()
  Hostcall.send('And after that?')
  Hostcall.unregister('create_task')
  Hostcall.context('page', { path: location.pathname })
  Hostcall.on('error', e => 'key' in e && console.warn(`context ${e.key}: ${e.reason}`))
  Hostcall.identify(async () => (await fetch('/hostcall-token')).text())
}
if (window.Hostcall.loaded) {
  window.Hostcall.register<{ status?: Task['status'] }, { tasks: Task[] }>('read_board_tasks', () => ({ tasks: board }))
}

// Known visitors: a token, or a function that fetches a fresh one before each expires.
Hostcall('identify', 'eyJhbGciOiJIUzI1NiJ9.e30.sig')
Hostcall('logout')

// Page tools: WebMCP alone, the browser's or the loader's stand-in.
const notes = new AbortController()
document.modelContext?.registerTool<{ text: string }>({
  name: 'add_note',
  description: 'Adds a note.',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  annotations: { readOnlyHint: false },
  execute: async ({ text }) => ({ saved: text }),
}, { signal: notes.signal })
document.modelContext?.addEventListener('toolchange', async () => {
  const tools = (await document.modelContext?.getTools()) ?? []
  console.log(tools.filter(t => t.window === window).map(t => t.name))
})
Hostcall('on', 'error', e => {
  if (e.code === 'page_tool_refused' && 'name' in e) console.warn(`tool ${e.name}: ${e.reason}`)
})
notes.abort()
