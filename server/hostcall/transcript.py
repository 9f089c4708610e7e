"""Text messages a conversation's event log started and has not ended yet; and the recent
turns of a conversation that a model step is sent.

Only a step in flight (or one a crash cut off) leaves one open: a message is stored, and its
``TEXT_MESSAGE_END`` written, when its step commits. The engine discards what a crash cut
off; a snapshot stops its ``lastEventId`` before an open message, so the stream replays that
message from its start instead of from the middle.
"""

from __future__ import annotations

from collections.abc import Sequence

from hostcall.protocol.events import EventType
from hostcall.store.interfaces import Events
from hostcall.store.records import StoredMessage

PAGE = 1000


async def open_messages(store: Events, conversation_id: str) -> dict[str, int]:
    """Message id -> seq of its ``TEXT_MESSAGE_START``, for each message not ended yet."""
    started: dict[str, int] = {}
    seq = 0
    while page := await store.events_after(conversation_id, seq, PAGE):
        for event in page:
            if event.name == EventType.TEXT_MESSAGE_START:
                started[event.data["messageId"]] = event.seq
            elif event.name == EventType.TEXT_MESSAGE_END:
                started.pop(event.data["messageId"], None)
        seq = page[-1].seq
    return started


def recent_turns(messages: Sequence[StoredMessage], turns: int) -> Sequence[StoredMessage]:
    """The conversation's last ``turns`` turns, oldest first: everything from the person's
    ``turns``-th last message on (all of it if there are fewer).

    A turn is a person's message and all that answered it (the assistant's messages, the
    calls they made and the calls' results), so a window cut at a person's message never
    parts a call from its result, and the turn in progress, whose results the model reads
    now, is always whole. What a step sends the model, and so what it costs, stays flat
    however long the conversation grows.
    """
    seen = 0
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            seen += 1
            if seen == turns:
                return messages[index:]
    return messages
