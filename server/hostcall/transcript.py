"""Text messages a conversation's event log started and has not ended yet.

Only a step in flight (or one a crash cut off) leaves one open: a message is stored, and its
``TEXT_MESSAGE_END`` written, when its step commits. The engine discards what a crash cut
off; a snapshot stops its ``lastEventId`` before an open message, so the stream replays that
message from its start instead of from the middle.
"""

from __future__ import annotations

from hostcall.protocol.events import EventType
from hostcall.store import Store

PAGE = 1000


async def open_messages(store: Store, conversation_id: str) -> dict[str, int]:
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
