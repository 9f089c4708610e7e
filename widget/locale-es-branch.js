// Hostcall widget strings: Spanish, for editing the last message and regenerating the last answer (branch.js, loaded when a run has ended).
export default {
  branchEdit: 'Editar',
  branchEditLabel: 'Editar tu último mensaje',
  branchRegenerate: 'Regenerar',
  branchRegenerateLabel: 'Escribir de nuevo la última respuesta',
  branchSend: 'Enviar',
  branchCancel: 'Cancelar',
  branchAlreadyHappened: 'Esto ya ocurrió: el asistente actuó según ese mensaje y no se puede deshacer. Envía un mensaje nuevo en su lugar.',
  branchNew: 'Escribir un mensaje nuevo',
  branchFailed: 'No funcionó. Inténtalo de nuevo.',
}
