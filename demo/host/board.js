// Demo host page: a task board whose data the Hostcall agent reads and writes through two
// client-side tools (seed 000's project-planning example). The board lives in this page
// only (sessionStorage, so a reload keeps it); Hostcall's server never sees it except
// through the handlers below.
'use strict'

// ============================================================================ Board state
const STORE = 'demo-board:v1'
const SEED = [
  { id: 'T-1', title: 'Fix the login redirect bug', status: 'in-progress', assignee: 'Sam', dueDate: '2026-12-02' },
  { id: 'T-2', title: 'Prepare the sprint demo', status: 'todo', assignee: 'Amira', dueDate: '2026-12-04' },
  { id: 'T-3', title: 'Write the onboarding email copy', status: 'todo', assignee: 'Léa', dueDate: '2026-12-09' },
  { id: 'T-4', title: 'Update the API docs', status: 'in-progress', assignee: 'Kenji', dueDate: '2026-12-03' },
  { id: 'T-5', title: 'Set up the CI pipeline', status: 'done', assignee: 'Sam', dueDate: '2026-11-25' },
  { id: 'T-6', title: 'Summarise the customer interviews', status: 'done', assignee: 'Léa', dueDate: '2026-11-27' },
]

// `?delay=<ms>` makes the handlers take that long (to try reloads in the middle of a call);
// `?delay=hold` makes them wait for `demoBoard.release()`, so that a test, however slow its
// machine, chooses the moment a handler answers rather than racing a timer.
const delayParam = new URLSearchParams(location.search).get('delay')
const DELAY = Math.min(Number(delayParam) || 0, 60000)
/** Handlers held by `?delay=hold`, each waiting for `demoBoard.release()`. @type {(() => void)[]} */
const held = []
const pause = () => new Promise(resolve => (delayParam === 'hold' ? held.push(resolve) : setTimeout(resolve, DELAY)))

/** @type {{tasks: typeof SEED, nextId: number, results: Record<string, object>, runs: {callId: string, tool: string}[], manual: boolean, selected?: string}} */
let board = load()

function load() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(STORE) || 'null')
    if (saved && Array.isArray(saved.tasks)) return saved
  } catch { /* fresh board */ }
  return { tasks: SEED.map(t => ({ ...t })), nextId: 7, results: {}, runs: [], manual: false, selected: '' }
}

function save() {
  sessionStorage.setItem(STORE, JSON.stringify(board))
}

// ============================================================================ Tool handlers
// handler(input, ctx): ctx.callId is an idempotency key; the widget calls a handler at most
// once per call, and create_task also remembers its results by call id, as a real app should.

/** read_board_tasks: {boardId, status?} → {tasks: [{id, title, status, assignee, dueDate}]} */
async function readBoardTasks(input, ctx) {
  recordRun(ctx)
  await pause()
  const tasks = board.tasks.filter(t => !input.status || t.status === input.status)
  return { tasks: tasks.map(({ id, title, status, assignee, dueDate }) => ({ id, title, status, assignee, dueDate })) }
}

/** create_task: {title, description?, dueDate?} → {id, title, status} */
async function createTask(input, ctx) {
  recordRun(ctx)
  if (board.results[ctx.callId]) return board.results[ctx.callId]
  await pause()
  if (ctx.signal.aborted) throw new Error('cancelled: the call was settled elsewhere')
  const task = {
    id: `T-${board.nextId++}`, title: String(input.title), status: 'todo', assignee: 'You',
    dueDate: input.dueDate ? String(input.dueDate) : '', description: input.description ? String(input.description) : '',
  }
  board.tasks.push(task)
  const output = { id: task.id, title: task.title, status: task.status }
  board.results[ctx.callId] = output
  save()
  render(task.id)
  return output
}

function recordRun(ctx) {
  board.runs.push({ callId: ctx.callId, tool: ctx.toolName })
  save()
  renderRuns()
}

function registerCreateTask() {
  board.manual ? Hostcall('unregister', 'create_task') : Hostcall('register', 'create_task', createTask)
}

Hostcall('register', 'read_board_tasks', readBoardTasks)
registerCreateTask()

// count_tasks is registered the web-standard way, WebMCP, with no Hostcall call at all: the
// agent file admits it (page_tools). Where the browser has no WebMCP, the loader offers the
// same document.modelContext, there by the page's load event (the loader is async).
function registerCountTasks() {
  document.modelContext?.registerTool({
    name: 'count_tasks',
    title: 'Count tasks',
    description: "How many tasks the board has with a status ('todo', 'in-progress', 'done'), or in all.",
    inputSchema: { type: 'object', properties: { status: { type: 'string', enum: ['todo', 'in-progress', 'done'] } } },
    annotations: { readOnlyHint: true },
    execute: async ({ status }) => ({ status: status || 'all', count: board.tasks.filter(t => !status || t.status === status).length }),
  })
}
document.modelContext ? registerCountTasks() : addEventListener('load', registerCountTasks)

// ============================================================================ Rendering

function el(tag, attrs, ...kids) {
  const node = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs || {})) if (v != null) node.setAttribute(k, v)
  node.append(...kids.filter(k => k != null))
  return node
}

/** @param {string} [fresh] id of a task to highlight */
function render(fresh) {
  for (const column of document.querySelectorAll('[data-part=column]')) {
    const tasks = board.tasks.filter(t => t.status === column.dataset.status)
    column.querySelector('[data-part=count]').textContent = String(tasks.length)
    column.querySelector('[data-part=task-list]').replaceChildren(...tasks.map(t =>
      el('li', { 'data-part': 'task', 'data-task-id': t.id, 'data-status': t.status, 'data-fresh': t.id === fresh ? '' : null },
        el('p', { 'data-part': 'task-title' }, t.title),
        el('p', { 'data-part': 'task-meta' },
          el('span', { 'data-part': 'task-id' }, t.id),
          t.assignee ? el('span', { 'data-part': 'task-assignee' }, t.assignee) : null,
          t.dueDate ? el('span', { 'data-part': 'task-due' }, `Due ${t.dueDate}`) : null))))
  }
  const toggle = document.querySelector('[data-part=toggle-manual-create]')
  toggle.checked = board.manual
  renderSelection()
}

// ============================================================================ Page context
// The column the person selected (by its title) is the page's context: the agent gets it with
// each message ("What's in this column?"). Selecting it again clears it. Set again on every
// render, so that a task the agent added is in it.

function selectColumn(status) {
  board.selected = board.selected === status ? '' : status
  save()
  renderSelection()
}

function renderSelection() {
  let selected = null
  for (const column of document.querySelectorAll('[data-part=column]')) {
    const on = column.dataset.status === board.selected
    column.toggleAttribute('data-selected', on)
    column.querySelector('[data-part=select-column]').setAttribute('aria-pressed', String(on))
    if (on) selected = column
  }
  Hostcall('context', 'selected_column', selected && {
    status: board.selected,
    name: selected.querySelector('[data-part=select-column]').textContent,
    tasks: board.tasks.filter(t => t.status === board.selected).map(({ id, title, assignee, dueDate }) => ({ id, title, assignee, dueDate })),
  })
}

for (const column of document.querySelectorAll('[data-part=column]')) {
  column.querySelector('[data-part=select-column]').addEventListener('click', () => selectColumn(column.dataset.status))
}

function renderRuns() {
  const count = tool => board.runs.filter(r => r.tool === tool).length
  document.querySelector('[data-part=handler-runs]').textContent =
    `Handler runs: read_board_tasks × ${count('read_board_tasks')}, create_task × ${count('create_task')}`
}

function logEvent(name, detail) {
  const text = {
    ready: () => 'Widget ready',
    open: () => 'Chat opened',
    close: () => 'Chat closed',
    message: d => `${d.role} message: ${String(d.text).slice(0, 80)}`,
    toolcall: d => `Tool call ${d.toolName} (${d.state}${d.route ? `, ${d.route}` : ''})`,
    toolresult: d => `Tool result ${d.toolName}: ${d.state}`,
    error: d => `Error: ${d.message || ''}`, // a sentence; the code is for the page's code
  }[name](detail || {})
  const log = document.querySelector('[data-part=event-log]')
  log.prepend(el('li', { 'data-part': 'event', 'data-event': name }, el('time', null, new Date().toLocaleTimeString()), ' ', text))
  while (log.children.length > 30) log.lastElementChild.remove()
}

for (const name of ['ready', 'open', 'close', 'message', 'toolcall', 'toolresult', 'error']) {
  Hostcall('on', name, detail => logEvent(name, detail))
}

document.querySelector('[data-part=toggle-manual-create]').addEventListener('change', e => {
  board.manual = e.target.checked
  save()
  registerCreateTask()
})
document.querySelector('[data-part=reset-board]').addEventListener('click', () => {
  const manual = board.manual
  sessionStorage.removeItem(STORE)
  board = load()
  board.manual = manual
  save()
  render()
  renderRuns()
})

/** For tests and the curious: the board as the handlers see it. */
window.demoBoard = {
  tasks: () => structuredClone(board.tasks),
  runs: () => structuredClone(board.runs),
  /** `?delay=hold`: let the handlers waiting now answer; how many there were. */
  release: () => held.splice(0).map(resolve => resolve()).length,
}

render()
renderRuns()
