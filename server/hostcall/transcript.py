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


async def reasonings(store: Events, conversation_id: str) -> dict[str, str]:
    """Message id -> what the model reasoned (in plain text) before that message or the
    calls it made, for a snapshot to show it again after a reload. Reasoning is in the log
    only as it was relayed: none for an agent that hides it, and "" for a provider that
    encrypts it (the model reasoned; nothing of it is shown)."""
    found: dict[str, str] = {}
    # The reasonings since the last message or call began, each its deltas so far.
    pending: list[list[str]] | None = None
    seq = 0
    while page := await store.reasoning_events_after(conversation_id, seq, PAGE):
        for event in page:
            data = event.data
            if event.name == EventType.REASONING_START:
                pending = [*(pending or []), []]
            elif event.name == EventType.REASONING_MESSAGE_CONTENT:
                if pending:
                    pending[-1].append(str(data.get("delta", "")))
            elif pending is not None:
                # The message (or a call's parent message) it led to; a person's message
                # next means its run ended with no answer: that reasoning led nowhere shown.
                anchor = data.get("messageId") or data.get("parentMessageId")
                if anchor and data.get("role") != "user":
                    said = [p for p in (found.get(anchor, ""), *map("".join, pending)) if p]
                    found[anchor] = "\n\n".join(said)
                pending = None
        seq = page[-1].seq
    return found


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
