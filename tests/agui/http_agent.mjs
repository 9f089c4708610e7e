// Drives a Hostcall agent with the real @ag-ui/client HttpAgent, as an AG-UI app would.
// stdin: {url, threadId, text, tools: [{name, description, parameters}], answers: {toolName:
// {output} | {error}}, resumes: [{toolName?, reason?, status, payload?, echoToken?}], maxRuns,
// stopAtInterrupt, state: {messages, pendingInterrupts}}. The client runs the tools it
// declared with `answers`, answers each interrupt with the first unused `resumes` entry that
// matches it (echoToken: send the interrupt's token back in the entry's metadata), and runs
// the agent again, until a run ends with nothing for it to do (or with interrupts it has no answer for). `state` (a previous run's
// output) continues a thread in a new process, as a page reloaded from storage would.
// stdout: {runs: [{events, newMessages, error}], messages, state, warnings}.
import { HttpAgent } from '@ag-ui/client'

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const plan = JSON.parse(Buffer.concat(chunks).toString('utf8'))

// Every warning the client prints (it reports fields it strips as "Removed unrecognised
// material"): the caller asserts there are none.
const warnings = []
const warn = console.warn
console.warn = (...args) => { warnings.push(args.map(String).join(' ')); warn(...args) }
console.error = (...args) => { warnings.push(args.map(String).join(' ')) }

const agent = new HttpAgent({ url: plan.url, threadId: plan.threadId })
if (plan.state) {
  agent.messages = plan.state.messages
  agent.pendingInterrupts = plan.state.pendingInterrupts
} else {
  agent.messages = [{ id: 'u-1', role: 'user', content: plan.text }]
}
const runs = []
const declared = new Set(plan.tools.map(t => t.name))
const resumes = [...(plan.resumes ?? [])]
const offset = plan.firstRun ?? 1

function resumeFor(interrupt) {
  const toolName = interrupt.metadata?.hostcall?.toolName
  const at = resumes.findIndex(r => (!r.toolName || r.toolName === toolName) &&
    (!r.reason || r.reason === interrupt.reason))
  if (at < 0) return null  // none planned: the thread stays interrupted
  const [r] = resumes.splice(at, 1)
  const entry = { interruptId: interrupt.id, status: r.status }
  if (r.payload !== undefined) entry.payload = r.payload
  if (r.echoToken) {
    const { decisionToken, resultToken } = interrupt.metadata.hostcall
    entry.metadata = { hostcall: decisionToken ? { decisionToken } : { resultToken } }
  }
  return entry
}

for (let n = 0; n < (plan.maxRuns ?? 4); n++) {
  let resume
  if (agent.pendingInterrupts.length) {
    if (plan.stopAtInterrupt) break
    resume = agent.pendingInterrupts.map(resumeFor)
    if (resume.includes(null)) break
  }
  const events = []
  let error = null
  let newMessages = []
  try {
    ({ newMessages } = await agent.runAgent(
      { runId: `run-${n + offset}`, tools: plan.tools, ...(resume && { resume }) },
      { onEvent: ({ event }) => { events.push(event) } },
    ))
  } catch (e) {
    error = String(e?.message ?? e)
  }
  runs.push({ events, newMessages, error, resume: resume ?? null })
  if (error) break
  if (agent.pendingInterrupts.length) continue
  const answered = new Set(agent.messages.filter(m => m.role === 'tool').map(m => m.toolCallId))
  // The calls this run made, and those an earlier run made that this one let go (an
  // approval): RUN_FINISHED's outcome names them.
  const finished = events.findLast(e => e.type === 'RUN_FINISHED')
  const pending = new Set(finished?.outcome?.pendingToolCallIds ?? [])
  const made = agent.messages.flatMap(m => m.toolCalls ?? [])
  const calls = [...newMessages.flatMap(m => m.toolCalls ?? []),
    ...made.filter(c => pending.has(c.id))]
    .filter(c => declared.has(c.function.name) && !answered.has(c.id))
  if (!calls.length) break
  for (const call of calls) {
    const answer = plan.answers[call.function.name]
    const message = { id: `tool-${call.id}`, role: 'tool', toolCallId: call.id }
    if ('error' in answer) Object.assign(message, { content: '', error: answer.error })
    else message.content = JSON.stringify(answer.output)
    agent.messages.push(message)
  }
}
const state = { messages: agent.messages, pendingInterrupts: agent.pendingInterrupts }
process.stdout.write(JSON.stringify({ runs, messages: agent.messages, state, warnings }))
