// Hostcall widget strings: English, for editing the last message and regenerating the last answer (branch.js, loaded when a run has ended).
export default {
  branchEdit: 'Edit',
  branchEditLabel: 'Edit your last message',
  branchRegenerate: 'Regenerate',
  branchRegenerateLabel: 'Write the last answer again',
  branchSend: 'Send',
  branchCancel: 'Cancel',
  branchAlreadyHappened: 'This already happened: the assistant acted on that message, and it cannot be undone. Send a new message instead.',
  branchNew: 'Write a new message',
  branchFailed: 'That did not work. Please try again.',
}
