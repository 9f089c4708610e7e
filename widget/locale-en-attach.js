// Hostcall widget strings: English, for files sent with a message (attach.js).
export default {
  attach: 'Attach files',
  attachFiles: 'Files to send',
  attachAdded: '{name} attached. It is sent with your next message.',
  attachRemove: 'Remove {name}',
  attachUploading: 'Uploading {i} of {n}…',
  attachTypeRefused: '{name}: this type of file is not accepted here.',
  attachTooLarge: '{name} is too large (at most {size}).',
  attachTooMany: 'At most {n} files per message.',
  attachContentRefused: '{name} was refused: its content is not a type accepted here.',
  attachNotAllowed: 'This chat does not accept files.',
  attachQuota: '{name} was refused: this conversation has no room for more files.',
  attachBadName: '{name} was refused: rename the file and try again.',
  attachFailed: '{name} could not be uploaded. Your message was not sent; please try again.',
}
