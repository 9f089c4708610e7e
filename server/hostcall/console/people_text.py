# ruff: noqa: E501, RUF001  (translated sentences read better unbroken; Japanese punctuation)
"""The people pages' words in the console's four languages (merged into text.TEXT): the list
of signed-in people, and the erasure's confirmation said beside its field."""

from __future__ import annotations

PEOPLE_TEXT = {
    "en": {
        "people_list": "Signed-in people",
        "people_list_hint": "Everyone your site signed in who has a conversation kept, the one last active first.",
        "col_conversations": "Conversations",
        "no_people": "Nobody signed in has a conversation yet.",
        "people_pages": "Pages of signed-in people",
        "people_newer": "← More recently active",
        "people_later": "Less recently active →",
        "all_people": "← All signed-in people",
        "erase_mismatch": "That is not this person's id: nothing was erased. Type it exactly as shown above.",
    },
    "fr": {
        "people_list": "Personnes connectées",
        "people_list_hint": "Toutes les personnes que votre site a connectées et dont une conversation est conservée, la plus récemment active d’abord.",
        "col_conversations": "Conversations",
        "no_people": "Aucune personne connectée n’a encore de conversation.",
        "people_pages": "Pages des personnes connectées",
        "people_newer": "← Actives plus récemment",
        "people_later": "Actives moins récemment →",
        "all_people": "← Toutes les personnes connectées",
        "erase_mismatch": "Ce n’est pas l’identifiant de cette personne : rien n’a été effacé. Saisissez-le exactement comme ci-dessus.",
    },
    "es": {
        "people_list": "Personas identificadas",
        "people_list_hint": "Todas las personas que su sitio identificó y de las que se guarda una conversación, la más recientemente activa primero.",
        "col_conversations": "Conversaciones",
        "no_people": "Ninguna persona identificada tiene aún una conversación.",
        "people_pages": "Páginas de personas identificadas",
        "people_newer": "← Activas más recientemente",
        "people_later": "Activas menos recientemente →",
        "all_people": "← Todas las personas identificadas",
        "erase_mismatch": "Ese no es el identificador de esta persona: no se borró nada. Escríbalo exactamente como aparece arriba.",
    },
    "ja": {
        "people_list": "ログインした利用者",
        "people_list_hint": "サイトがログインさせ、会話が保存されているすべての利用者（最近のものから）。",
        "col_conversations": "会話",
        "no_people": "会話のあるログイン利用者はまだいません。",
        "people_pages": "ログイン利用者のページ",
        "people_newer": "← より最近",
        "people_later": "より前 →",
        "all_people": "← ログインした利用者の一覧",
        "erase_mismatch": "この利用者の ID ではありません。何も削除されていません。上に表示されているとおりに入力してください。",
    },
}
