// Hostcall widget strings: Spanish, for files sent with a message (attach.js).
export default {
  attach: 'Adjuntar archivos',
  attachFiles: 'Archivos para enviar',
  attachAdded: '{name} adjuntado. Se envía con su próximo mensaje.',
  attachRemove: 'Quitar {name}',
  attachUploading: 'Subiendo {i} de {n}…',
  attachTypeRefused: '{name}: este tipo de archivo no se acepta aquí.',
  attachTooLarge: '{name} es demasiado grande (como máximo {size}).',
  attachTooMany: 'Como máximo {n} archivos por mensaje.',
  attachContentRefused: '{name} fue rechazado: su contenido no es de un tipo aceptado aquí.',
  attachNotAllowed: 'Este chat no acepta archivos.',
  attachQuota: '{name} fue rechazado: esta conversación no tiene espacio para más archivos.',
  attachBadName: '{name} fue rechazado: cambie el nombre del archivo e inténtelo de nuevo.',
  attachFailed: 'No se pudo subir {name}. Su mensaje no se envió; inténtelo de nuevo.',
}
