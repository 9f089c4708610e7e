"""The PostgreSQL store's feedback on replies and human handoffs (the twin of
sqlite/people.py; statements.py has their SQL)."""

from __future__ import annotations

from hostcall.store import rows
from hostcall.store.console_records import Feedback, Handoff, Rating
from hostcall.store.interfaces import Feedbacks, Handoffs
from hostcall.store.postgres.connections import Part
from hostcall.store.statements import POSTGRES as SQL

PEOPLE_SCHEMA = """
CREATE TABLE feedback (
    message_id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, rating TEXT NOT NULL,
    comment TEXT NOT NULL, at DOUBLE PRECISION NOT NULL
);
CREATE INDEX feedback_by_conversation ON feedback (conversation_id, rating);
CREATE TABLE handoffs (
    conversation_id TEXT PRIMARY KEY, state TEXT NOT NULL, person TEXT NOT NULL,
    since DOUBLE PRECISION NOT NULL
);
ALTER TABLE messages ADD COLUMN author TEXT;
"""

# A visitor's rating of a whole conversation (records.Rating): one row, the first.
RATINGS_SCHEMA = """
CREATE TABLE ratings (
    conversation_id TEXT PRIMARY KEY, score INTEGER NOT NULL, remark TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL
);
"""


class PeopleTables(Part, Feedbacks, Handoffs):
    async def save_feedback(self, feedback: Feedback) -> bool:
        f = feedback
        if await self.db.count(SQL.restate_feedback, (f.comment, f.at, f.message_id, f.rating)):
            return False
        changed = await self.db.count(
            SQL.save_feedback, (f.message_id, f.conversation_id, f.rating, f.comment, f.at)
        )
        return bool(changed)

    async def feedback_of(self, conversation_id: str) -> list[Feedback]:
        return [rows.feedback(r) for r in await self.db.all(SQL.feedback_of, (conversation_id,))]

    async def save_rating(self, rating: Rating) -> Rating:
        r = rating
        await self.db.count(SQL.save_rating, (r.conversation_id, r.score, r.remark, r.at))
        return await self.rating_of(r.conversation_id) or rating

    async def rating_of(self, conversation_id: str) -> Rating | None:
        row = await self.db.one(SQL.rating_of, (conversation_id,))
        return rows.rating(row) if row else None

    async def get_handoff(self, conversation_id: str) -> Handoff | None:
        row = await self.db.one(SQL.handoff, (conversation_id,))
        return rows.handoff(row) if row else None

    async def request_person(self, conversation_id: str, now: float) -> bool:
        return await self.db.count(SQL.request_person, (conversation_id, now)) == 1

    async def take_over(self, conversation_id: str, person: str, now: float) -> bool:
        return await self.db.count(SQL.take_over, (conversation_id, person, now)) == 1

    async def hand_back(self, conversation_id: str, person: str) -> bool:
        return await self.db.count(SQL.hand_back, (conversation_id, person)) == 1
