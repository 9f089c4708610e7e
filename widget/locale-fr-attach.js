// Hostcall widget strings: French, for files sent with a message (attach.js).
export default {
  attach: 'Joindre des fichiers',
  attachFiles: 'Fichiers à envoyer',
  attachAdded: '{name} joint. Il part avec votre prochain message.',
  attachRemove: 'Retirer {name}',
  attachUploading: 'Envoi de {i} sur {n}…',
  attachTypeRefused: '{name}\u00a0: ce type de fichier n’est pas accepté ici.',
  attachTooLarge: '{name} est trop volumineux (au plus {size}).',
  attachTooMany: 'Au plus {n} fichiers par message.',
  attachContentRefused: '{name} a été refusé\u00a0: son contenu n’est pas d’un type accepté ici.',
  attachNotAllowed: 'Ce chat n’accepte pas de fichiers.',
  attachQuota: '{name} a été refusé\u00a0: cette conversation n’a plus de place pour des fichiers.',
  attachBadName: '{name} a été refusé\u00a0: renommez le fichier et réessayez.',
  attachFailed: '{name} n’a pas pu être envoyé. Votre message n’est pas parti\u00a0; veuillez réessayer.',
}
