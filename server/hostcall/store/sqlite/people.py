"""The SQLite store's feedback on replies and human handoffs (statements.py has their SQL)."""

from __future__ import annotations

from hostcall.store import rows
from hostcall.store.console_records import Feedback, Handoff, Rating
from hostcall.store.interfaces import Feedbacks, Handoffs
from hostcall.store.sqlite.connection import Part
from hostcall.store.statements import SQLITE as SQL

PEOPLE_SCHEMA = """
CREATE TABLE feedback (
    message_id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, rating TEXT NOT NULL,
    comment TEXT NOT NULL, at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX feedback_by_conversation ON feedback (conversation_id, rating);
CREATE TABLE handoffs (
    conversation_id TEXT PRIMARY KEY, state TEXT NOT NULL, person TEXT NOT NULL,
    since REAL NOT NULL
) WITHOUT ROWID;
ALTER TABLE messages ADD COLUMN author TEXT;
"""

# A visitor's rating of a whole conversation (records.Rating): one row, the first.
RATINGS_SCHEMA = """
CREATE TABLE ratings (
    conversation_id TEXT PRIMARY KEY, score INTEGER NOT NULL, remark TEXT NOT NULL,
    at REAL NOT NULL
) WITHOUT ROWID;
"""


class PeopleTables(Part, Feedbacks, Handoffs):
    async def save_feedback(self, feedback: Feedback) -> bool:
        f = feedback
        if self.db.execute(SQL.restate_feedback,
                            (f.comment, f.at, f.message_id, f.rating)).rowcount:  # fmt: skip
            return False
        changed = self.db.execute(
            SQL.save_feedback, (f.message_id, f.conversation_id, f.rating, f.comment, f.at)
        ).rowcount
        return bool(changed)

    async def feedback_of(self, conversation_id: str) -> list[Feedback]:
        return [rows.feedback(r) for r in self.db.execute(SQL.feedback_of, (conversation_id,))]

    async def save_rating(self, rating: Rating) -> Rating:
        r = rating
        self.db.execute(SQL.save_rating, (r.conversation_id, r.score, r.remark, r.at))
        return await self.rating_of(r.conversation_id) or rating

    async def rating_of(self, conversation_id: str) -> Rating | None:
        row = self.db.execute(SQL.rating_of, (conversation_id,)).fetchone()
        return rows.rating(row) if row else None

    async def get_handoff(self, conversation_id: str) -> Handoff | None:
        row = self.db.execute(SQL.handoff, (conversation_id,)).fetchone()
        return rows.handoff(row) if row else None

    async def request_person(self, conversation_id: str, now: float) -> bool:
        return self.db.execute(SQL.request_person, (conversation_id, now)).rowcount == 1

    async def take_over(self, conversation_id: str, person: str, now: float) -> bool:
        return self.db.execute(SQL.take_over, (conversation_id, person, now)).rowcount == 1

    async def hand_back(self, conversation_id: str, person: str) -> bool:
        return self.db.execute(SQL.hand_back, (conversation_id, person)).rowcount == 1
