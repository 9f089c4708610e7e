// Drives a Hostcall agent with the real @ag-ui/client HttpAgent, as an AG-UI app would.
// stdin: {url, threadId, text, tools: [{name, description, parameters}], answers: {toolName:
// {output} | {error}}, maxRuns}. The client runs the tools it declared with `answers`, then
// runs the agent again, until a run ends without a call for it. stdout: {runs: [{events,
// newMessages}], messages}.
import { HttpAgent } from '@ag-ui/client'

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const plan = JSON.parse(Buffer.concat(chunks).toString('utf8'))

const agent = new HttpAgent({ url: plan.url, threadId: plan.threadId })
agent.messages = [{ id: 'u-1', role: 'user', content: plan.text }]
const runs = []
const declared = new Set(plan.tools.map(t => t.name))
for (let n = 0; n < (plan.maxRuns ?? 4); n++) {
  const events = []
  const { newMessages } = await agent.runAgent(
    { runId: `run-${n + 1}`, tools: plan.tools },
    { onEvent: ({ event }) => { events.push(event) } },
  )
  runs.push({ events, newMessages })
  const answered = new Set(agent.messages.filter(m => m.role === 'tool').map(m => m.toolCallId))
  const calls = newMessages.flatMap(m => m.toolCalls ?? [])
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
process.stdout.write(JSON.stringify({ runs, messages: agent.messages }))
