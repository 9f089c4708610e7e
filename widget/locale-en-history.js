// Hostcall widget strings: English, for the history panel (widget/history.js), loaded with it.
export default {
  historyTitle: 'Your conversations', historyNew: 'New conversation', historyBack: 'Back to the chat',
  historyLoading: 'Loading your conversations…', historyEmpty: 'No conversations yet.',
  historyCountOne: '1 conversation', historyCount: '{n} conversations', historyFailed: 'Your conversations could not be loaded. Try again later.',
  historyMore: 'Show older', historyUntitled: 'No message yet', historyCurrent: 'open now',
  historyDelete: 'Delete', historyDeleteLabel: 'Delete “{title}”',
  historyDeleteAsk: 'Delete this conversation for good? It cannot be brought back.',
  historyDeleted: 'Conversation deleted.', historyDeleteFailed: 'It could not be deleted. Try again.',
  historyOpenFailed: 'It could not be opened. Try again.',
}
