"""A step's reasoning, relayed as it streams: AG-UI's ``REASONING_*`` events, before the
answer it leads to (docs/protocol.md "Reasoning").

What is kept is what is relayed, in the conversation's event log: the reasoning a provider
streams in plain text, unless the agent file says ``"show_reasoning": false`` (then none of
it, not even that the model reasoned). Reasoning a provider sends encrypted is never relayed
nor stored, not even as its blob: only a ``REASONING_START`` and ``REASONING_END`` with
nothing between say that the model reasoned. Never sent back to the model: the next step
reads the answers, as a model without reasoning would.
"""

from __future__ import annotations

from hostcall.appender import Appender
from hostcall.calls.moves import new_id
from hostcall.models.base import ReasoningDelta, ReasoningEncrypted
from hostcall.protocol.events import (
    ProtocolEvent,
    ReasoningEnd,
    ReasoningMessageContent,
    ReasoningMessageEnd,
    ReasoningMessageStart,
    ReasoningStart,
)


class Reasoning:
    def __init__(self, appender: Appender, *, shown: bool) -> None:
        self.appender = appender
        self.shown = shown
        self.message_id = new_id("m")
        self.started = False  # REASONING_START sent, REASONING_END not yet
        self.text = False  # a reasoning message is open

    async def add(self, item: ReasoningDelta | ReasoningEncrypted) -> None:
        if not self.shown:
            return
        events: list[ProtocolEvent] = []
        if not self.started:
            self.started = True
            events.append(ReasoningStart(self.message_id))
        if isinstance(item, ReasoningDelta) and item.text:
            if not self.text:
                self.text = True
                events.append(ReasoningMessageStart(self.message_id))
            events.append(ReasoningMessageContent(self.message_id, item.text))
        if events and events[0].TYPE is ReasoningStart.TYPE:
            # The first: streams show the model thinking now, not once it has answered.
            await self.appender.put(*events)
        elif events:
            self.appender.add(*events)

    def end(self) -> None:
        """End the reasoning, if it began (the answer begins, or the step ends): queued
        after what it streamed, before what comes next."""
        if not self.started:
            return
        ending: list[ProtocolEvent] = [ReasoningMessageEnd(self.message_id)] if self.text else []
        self.appender.add(*ending, ReasoningEnd(self.message_id))
        # Reasoning again after the answer began (some models interleave) is a reasoning of
        # its own: a client may not see one id started twice.
        self.started = self.text = False
        self.message_id = new_id("m")
