"""A visitor's ratings, as use cases: of one of the agent's replies, where the latest rating
stands (docs/protocol.md ``POST .../messages/{id}/feedback``), and of the whole conversation,
asked once at its end, where the first stands (``POST .../rating``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from hostcall import metrics
from hostcall.errors import Conflict, NotFound, Unprocessable
from hostcall.protocol.codes import ErrorCode
from hostcall.store.console_records import Feedback, Rating
from hostcall.store.interfaces import Database, Feedbacks, Messages
from hostcall.store.records import Conversation


class _FeedbackStore(Database, Feedbacks, Messages, Protocol):
    """What a rating reads (the reply) and writes (the rating)."""


class FeedbackService:
    def __init__(self, store: _FeedbackStore, *, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock

    async def rate(
        self, conversation: Conversation, message_id: str, rating: str, comment: str
    ) -> None:
        """Store the rating of the agent's reply ``message_id`` of ``conversation``."""
        listed = await self.store.list_messages(conversation.id)
        found = {m.id: m for m in listed}.get(message_id)
        if found is None:  # another conversation's message is not found here either
            raise NotFound(
                f"no message {message_id[:80]!r} in this conversation",
                code=ErrorCode.UNKNOWN_MESSAGE,
            )
        if found.role != "assistant" or not found.text:
            raise Unprocessable(
                f"message {message_id} is not a reply of the agent's ({found.role})",
                code=ErrorCode.NOT_A_REPLY,
            )
        feedback = Feedback(conversation.id, message_id, rating, comment, self.clock())
        async with self.store.transaction():
            changed = await self.store.save_feedback(feedback)
        # A new rating or a changed one, never the same sent again: the rate of thumbs down is
        # what an operator watches; the stored rating (one per reply) is the console's.
        if changed:
            metrics.FEEDBACK.labels(
                agent=metrics.agent_label(conversation.agent_id), rating=rating
            ).inc()

    async def rate_conversation(
        self, conversation: Conversation, score: int, remark: str
    ) -> Rating:
        """Store the conversation's rating, once: the same one sent again (a retry whose
        answer was lost) is the one stored; a different one is refused, ``already_rated``."""
        rating = Rating(conversation.id, score, remark, self.clock())
        async with self.store.transaction():
            stored = await self.store.save_rating(rating)
        if stored == rating:  # this one was stored: counted once, here
            metrics.RATINGS.labels(
                agent=metrics.agent_label(conversation.agent_id), score=str(score)
            ).inc()
        elif (stored.score, stored.remark) != (score, remark):
            raise Conflict(
                f"this conversation was rated {stored.score} already; a rating is given once",
                code=ErrorCode.ALREADY_RATED,
            )
        return stored
