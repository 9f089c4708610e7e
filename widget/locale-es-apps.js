// Hostcall widget strings: Spanish, for MCP Apps views (apps.js, loaded with the first one).
// Keys and {placeholders} as in locale-en-apps.js.
export default {
  appViewTitle: 'Vista: {name}', appLoading: 'Cargando la vista…',
  appFailed: 'No se pudo mostrar esta vista.',
  appUnavailable: 'Este resultado tiene una vista que este sitio no ha activado.',
  appWantsSend: 'La vista quiere enviar: «{text}»', appSend: 'Enviar',
  appWantsOpen: 'La vista quiere abrir {host}.', appOpen: 'Abrir', appDismiss: 'Descartar',
  appWantsRun: 'La vista quiere ejecutar {tool}.', appRun: 'Ejecutar',
}
