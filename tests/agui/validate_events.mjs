// Validates AG-UI events against the official @ag-ui/core schemas.
// stdin: a JSON array of {where, event, schema?} (schema: another of @ag-ui/core's schemas by
// name, e.g. AgentCapabilitiesSchema, for a value that is not an event); stdout: a JSON object {checked, failures: [{where,
// type, issues}]}. Exit 0 even with failures: the pytest caller asserts on the report.
import * as schemas from '@ag-ui/core/schemas'

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const items = JSON.parse(Buffer.concat(chunks).toString('utf8'))
const failures = []
for (const { where, event, schema } of items) {
  const parsed = schemas[schema ?? 'EventSchemas'].safeParse(event)
  if (!parsed.success) {
    failures.push({
      where,
      type: event?.type ?? null,
      issues: parsed.error.issues.map(i => `${i.path.join('.') || '(event)'}: ${i.message}`),
    })
  }
}
process.stdout.write(JSON.stringify({ checked: items.length, failures }))
