"""The SQLite store's conversations, their sessions and stream tickets, and their messages."""

from __future__ import annotations

from hostcall.store import rows
from hostcall.store.console_records import (
    ConversationQuery,
    ConversationSummary,
    KnownPerson,
    PersonConversation,
)
from hostcall.store.interfaces import Conversations, Messages, Sessions
from hostcall.store.records import Conversation, OpenedStream, StoredMessage
from hostcall.store.sqlite.connection import Part
from hostcall.store.statements import SQLITE as SQL
from hostcall.store.statements import contains


class ConversationTables(Part, Conversations, Sessions, Messages):
    # ---- conversations -------------------------------------------------------------------

    async def create_conversation(self, conversation: Conversation) -> None:
        self.db.execute(
            SQL.insert_conversation,
            (
                conversation.id,
                conversation.agent_id,
                conversation.created_at,
                conversation.locale,
                rows.dump(list(conversation.handled_tools)),
                conversation.person,
                conversation.created_at,
                conversation.browser,
            ),
        )

    async def get_conversation(self, conversation_id: str) -> Conversation | None:
        row = self.db.execute(SQL.conversation, (conversation_id,)).fetchone()
        return rows.conversation(row) if row else None

    async def set_handled_tools(self, conversation_id: str, tools: tuple[str, ...]) -> None:
        self.db.execute(SQL.set_handled_tools, (rows.dump(list(tools)), conversation_id))

    async def list_conversations(self, query: ConversationQuery) -> list[ConversationSummary]:
        where, args = SQL.summary_filters(query)
        if query.text:
            where.append(
                "(id LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m"
                " WHERE m.conversation_id = s.id AND m.text LIKE ? ESCAPE '\\'))"
            )
            args += [contains(query.text)] * 2
        found = self.db.execute(
            f"SELECT * FROM ({SQL.conversation_summaries}) s WHERE {' AND '.join(where)}"
            " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
            (*args, query.limit, query.offset),
        )
        return [rows.summary(r) for r in found]

    async def set_person(self, conversation_id: str, person: str) -> bool:
        cursor = self.db.execute(SQL.set_person, (person, conversation_id, person))
        return cursor.rowcount == 1

    async def touch_conversation(self, conversation_id: str, at: float) -> None:
        self.db.execute(SQL.touch_conversation, (at, conversation_id, at))

    async def person_conversations(
        self,
        agent_id: str,
        person: str,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
    ) -> list[PersonConversation]:
        sql = SQL.person_conversations_before if before else SQL.person_conversations
        return self._owned(sql, agent_id, person, limit, before)

    async def browser_conversations(
        self,
        agent_id: str,
        browser: str,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
    ) -> list[PersonConversation]:
        sql = SQL.browser_conversations_before if before else SQL.browser_conversations
        return self._owned(sql, agent_id, browser, limit, before)

    async def known_people(
        self, agent_id: str = "", *, limit: int = 50, offset: int = 0
    ) -> list[KnownPerson]:
        found = self.db.execute(SQL.known_people, (agent_id, agent_id, limit, offset))
        return [rows.known_person(r) for r in found]

    def _owned(
        self, sql: str, agent_id: str, owner: str, limit: int, before: tuple[float, str] | None
    ) -> list[PersonConversation]:
        keyset = (before[0], before[0], before[1]) if before else ()
        found = self.db.execute(sql, (agent_id, owner, *keyset, limit))
        return [rows.person_conversation(r) for r in found]

    # ---- sessions and stream tickets -----------------------------------------------------

    async def rotate_session(self, conversation_id: str, generation: int) -> bool:
        cursor = self.db.execute(SQL.rotate_session, (conversation_id, generation))
        return cursor.rowcount == 1

    async def consume_ticket(self, nonce: str, expires_at: float, now: float) -> bool:
        async with self.db.transaction():
            self.db.execute(SQL.prune_tickets, (now,))
            cursor = self.db.execute(
                "INSERT OR IGNORE INTO stream_tickets (nonce, expires_at) VALUES (?, ?)",
                (nonce, expires_at),
            )
        return cursor.rowcount == 1

    async def open_stream(
        self, conversation_id: str, generation: int, nonce: str, expires_at: float, now: float
    ) -> OpenedStream:
        row = self.db.execute(SQL.conversation, (conversation_id,)).fetchone()
        if row is None:
            return OpenedStream(None, False)
        conversation, last_seq = rows.conversation(row), int(row["last_seq"])
        if conversation.session_generation != generation:
            return OpenedStream(conversation, False, last_seq)
        redeemed = await self.consume_ticket(nonce, expires_at, now)
        return OpenedStream(conversation, redeemed, last_seq)

    # ---- messages ------------------------------------------------------------------------

    async def add_message(self, message: StoredMessage) -> None:
        self.db.execute(SQL.insert_message, rows.message_values(message))

    async def list_messages(self, conversation_id: str) -> list[StoredMessage]:
        return list(rows.messages(self.db.execute(SQL.messages, (conversation_id,))))

    async def supersede_messages(self, conversation_id: str, first_id: str, run_id: str) -> int:
        return self.db.execute(SQL.supersede_messages, (run_id, conversation_id, first_id)).rowcount

    async def recent_messages(self, conversation_id: str, turns: int) -> list[StoredMessage]:
        return list(
            self.db.history(conversation_id, turns)
        )  # the read a run's start and claim make
