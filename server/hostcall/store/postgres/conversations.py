"""The PostgreSQL store's conversations, their sessions and stream tickets, and their
messages (held back in a transaction: messages.py)."""

from __future__ import annotations

from hostcall.store import rows
from hostcall.store.console_records import (
    ConversationQuery,
    ConversationSummary,
    KnownPerson,
    PersonConversation,
)
from hostcall.store.interfaces import Conversations, Messages, Sessions
from hostcall.store.postgres.connections import Part, PostgresConnections
from hostcall.store.records import Conversation, OpenedStream, StoredMessage
from hostcall.store.statements import POSTGRES as SQL
from hostcall.store.statements import contains, window_skip

# How often consume_ticket forgets expired tickets.
TICKET_PRUNE_SECONDS = 30.0
# open_stream in one statement, where the conversation's read and the ticket's INSERT were
# two: the ticket goes in only for a conversation at the ticket's session generation.
OPEN_STREAM = """
WITH c AS (SELECT * FROM conversations WHERE id = %(cid)s), t AS (
    INSERT INTO stream_tickets (nonce, expires_at) SELECT %(nonce)s, %(until)s FROM c
    WHERE c.session_generation = %(generation)s ON CONFLICT (nonce) DO NOTHING RETURNING 1
)
SELECT c.*, EXISTS (SELECT 1 FROM t) AS redeemed FROM c
"""


class ConversationTables(Part, Conversations, Sessions, Messages):
    def __init__(self, db: PostgresConnections) -> None:
        super().__init__(db)
        # When this process last forgot expired tickets.
        self._tickets_pruned = 0.0

    # ---- conversations -------------------------------------------------------------------

    async def create_conversation(self, conversation: Conversation) -> None:
        await self.db.run(
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
        row = await self.db.one(SQL.conversation, (conversation_id,))
        return rows.conversation(row) if row else None

    async def set_handled_tools(self, conversation_id: str, tools: tuple[str, ...]) -> None:
        await self.db.run(SQL.set_handled_tools, (rows.dump(list(tools)), conversation_id))

    async def list_conversations(self, query: ConversationQuery) -> list[ConversationSummary]:
        where, args = SQL.summary_filters(query)
        if query.text:
            # ILIKE: SQLite's LIKE is case-insensitive (ASCII), and the query says so too.
            where.append(
                "(id ILIKE %s OR EXISTS (SELECT 1 FROM messages m"
                " WHERE m.conversation_id = s.id AND m.text ILIKE %s))"
            )
            args += [contains(query.text)] * 2
        found = await self.db.all(
            f"SELECT * FROM ({SQL.conversation_summaries}) s WHERE {' AND '.join(where)}"
            " ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s",
            (*args, query.limit, query.offset),
        )
        return [rows.summary(r) for r in found]

    async def set_person(self, conversation_id: str, person: str) -> bool:
        return await self.db.count(SQL.set_person, (person, conversation_id, person)) == 1

    async def touch_conversation(self, conversation_id: str, at: float) -> None:
        current = self.db.current()
        if current is None:
            await self.db.run(SQL.touch_conversation, (at, conversation_id, at))
            return
        # Held: the transaction's next append of the conversation sets it in its UPDATE of
        # the same row (one statement, not two: a run's start touches before its first
        # append), or its end sends it alone (hostcall/store/postgres/events.py).
        current.touched[conversation_id] = max(at, current.touched.get(conversation_id, at))

    async def person_conversations(
        self,
        agent_id: str,
        person: str,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
    ) -> list[PersonConversation]:
        sql = SQL.person_conversations_before if before else SQL.person_conversations
        return await self._owned(sql, agent_id, person, limit, before)

    async def browser_conversations(
        self,
        agent_id: str,
        browser: str,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
    ) -> list[PersonConversation]:
        sql = SQL.browser_conversations_before if before else SQL.browser_conversations
        return await self._owned(sql, agent_id, browser, limit, before)

    async def known_people(
        self, agent_id: str = "", *, limit: int = 50, offset: int = 0
    ) -> list[KnownPerson]:
        found = await self.db.all(SQL.known_people, (agent_id, agent_id, limit, offset))
        return [rows.known_person(r) for r in found]

    async def _owned(
        self, sql: str, agent_id: str, owner: str, limit: int, before: tuple[float, str] | None
    ) -> list[PersonConversation]:
        keyset = (before[0], before[0], before[1]) if before else ()
        found = await self.db.all(sql, (agent_id, owner, *keyset, limit))
        return [rows.person_conversation(r) for r in found]

    # ---- sessions and stream tickets -----------------------------------------------------

    async def rotate_session(self, conversation_id: str, generation: int) -> bool:
        return await self.db.count(SQL.rotate_session, (conversation_id, generation)) == 1

    async def _prune_tickets(self, now: float) -> None:
        if now - self._tickets_pruned > TICKET_PRUNE_SECONDS:
            # Housekeeping, not the check: an expired ticket is refused by its signature's
            # age before it gets here. Once in a while, not a table scan per stream.
            self._tickets_pruned = now
            await self.db.run(SQL.prune_tickets, (now,))

    async def open_stream(
        self, conversation_id: str, generation: int, nonce: str, expires_at: float, now: float
    ) -> OpenedStream:
        await self._prune_tickets(now)
        row = await self.db.one(
            OPEN_STREAM,
            {"cid": conversation_id, "generation": generation, "nonce": nonce, "until": expires_at},
        )
        if row is None:
            return OpenedStream(None, False)
        return OpenedStream(rows.conversation(row), bool(row["redeemed"]), int(row["last_seq"]))

    async def consume_ticket(self, nonce: str, expires_at: float, now: float) -> bool:
        await self._prune_tickets(now)
        changed = await self.db.count(
            "INSERT INTO stream_tickets (nonce, expires_at) VALUES (%s, %s)"
            " ON CONFLICT (nonce) DO NOTHING",
            (nonce, expires_at),
        )
        return changed == 1

    # ---- messages ------------------------------------------------------------------------

    async def add_message(self, message: StoredMessage) -> None:
        current = self.db.current()
        if current is not None:
            # Held: it goes out with the transaction's next append of its conversation, or
            # before its next read of messages or COMMIT (messages.py).
            current.messages.append(rows.message_values(message))
            return
        await self.db.run(SQL.insert_message, rows.message_values(message))

    async def list_messages(self, conversation_id: str) -> list[StoredMessage]:
        return [rows.message(r) for r in await self.db.all(SQL.messages, (conversation_id,))]

    async def supersede_messages(self, conversation_id: str, first_id: str, run_id: str) -> int:
        return await self.db.count(SQL.supersede_messages, (run_id, conversation_id, first_id))

    async def recent_messages(self, conversation_id: str, turns: int) -> list[StoredMessage]:
        values = (conversation_id, conversation_id, window_skip(turns))
        return [rows.message(r) for r in await self.db.all(SQL.recent_messages, values)]
