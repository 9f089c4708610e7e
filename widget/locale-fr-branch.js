// Hostcall widget strings: French, for editing the last message and regenerating the last answer (branch.js, loaded when a run has ended).
export default {
  branchEdit: 'Modifier',
  branchEditLabel: 'Modifier votre dernier message',
  branchRegenerate: 'Régénérer',
  branchRegenerateLabel: 'Réécrire la dernière réponse',
  branchSend: 'Envoyer',
  branchCancel: 'Annuler',
  branchAlreadyHappened: "C'est déjà fait\u202f: l'assistant a agi sur ce message, et cela ne peut pas être annulé. Envoyez plutôt un nouveau message.",
  branchNew: 'Écrire un nouveau message',
  branchFailed: "Cela n'a pas fonctionné. Veuillez réessayer.",
}
