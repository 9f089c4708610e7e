// Hostcall widget strings: English, for MCP Apps views (apps.js, loaded with the first one).
// Keys and {placeholders} as in locale-en-apps.js.
export default {
  appViewTitle: 'View: {name}', appLoading: 'Loading the view…',
  appFailed: 'This view could not be shown.',
  appUnavailable: 'This result has a view that this site has not enabled.',
  appWantsSend: 'The view wants to send: “{text}”', appSend: 'Send',
  appWantsOpen: 'The view wants to open {host}.', appOpen: 'Open', appDismiss: 'Dismiss',
  appWantsRun: 'The view wants to run {tool}.', appRun: 'Run',
}
