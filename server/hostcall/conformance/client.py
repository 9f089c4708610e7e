"""A small AG-UI client over HTTP: ``RunAgentInput`` out, the SSE events back, and the
thread's history as an AG-UI client keeps it (its own messages and the agent's)."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass(frozen=True, slots=True)
class Run:
    """One AG-UI run as the client saw it: its events, or the HTTP refusal."""

    status: int
    events: tuple[dict[str, Any], ...] = ()
    body: str = ""

    @property
    def refused(self) -> bool:
        """A ``RUN_ERROR``, or an HTTP error before any event."""
        return self.status != 200 or any(e.get("type") == "RUN_ERROR" for e in self.events)

    @property
    def error(self) -> str:
        for event in self.events:
            if event.get("type") == "RUN_ERROR":
                return f"RUN_ERROR {event.get('code')}: {event.get('message')}"
        return f"HTTP {self.status}: {self.body[:200]}" if self.status != 200 else ""

    @property
    def outcome(self) -> dict[str, Any] | None:
        last = self.events[-1] if self.events else {}
        if last.get("type") != "RUN_FINISHED":
            return None
        outcome: dict[str, Any] = last.get("outcome") or {"type": "success"}
        return outcome

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        outcome = self.outcome or {}
        found: list[dict[str, Any]] = outcome.get("interrupts", [])
        return found if outcome.get("type") == "interrupt" else []

    def about(self, tool_call_id: str, kind: str) -> list[dict[str, Any]]:
        """The events of ``kind`` for one tool call."""
        return [e for e in self.events if e.get("type") == kind
                and e.get("toolCallId") == tool_call_id]  # fmt: skip

    def describe(self) -> str:
        if self.refused:
            return self.error
        outcome = self.outcome
        if outcome is None:
            return "the stream ended without RUN_FINISHED"
        ids = [i.get("id") for i in self.interrupts]
        return f"RUN_FINISHED {outcome.get('type')}" + (f" {ids}" if ids else "")


@dataclass
class Thread:
    """A thread as one client holds it."""

    endpoint: Endpoint
    id: str = field(default_factory=lambda: f"conformance-{uuid.uuid4()}")
    messages: list[dict[str, Any]] = field(default_factory=list)

    def say(self, text: str) -> Run:
        self.messages.append({"id": f"u-{uuid.uuid4()}", "role": "user", "content": text})
        return self.run()

    def reload(self) -> Run:
        """The thread again, as a client that reloaded sends it: its history, nothing new."""
        return self.run()

    def resume(self, *entries: dict[str, Any]) -> Run:
        return self.run(resume=list(entries))

    def resume_then_abort(self, *entries: dict[str, Any]) -> Run:
        """Resume, and abort the run (close the request, as AG-UI's ``abortRun`` does) at
        its first event after ``RUN_STARTED``: the run is under way. The history keeps what
        the client saw until then."""
        return self.run(resume=list(entries), abort=True)

    def run(self, *, resume: list[dict[str, Any]] | None = None, abort: bool = False) -> Run:
        body: dict[str, Any] = {
            "threadId": self.id, "runId": f"run-{uuid.uuid4()}", "messages": self.messages,
            "tools": [], "context": [], "state": {}, "forwardedProps": {},
        }  # fmt: skip
        if resume is not None:
            body["resume"] = resume
        run = self.endpoint.post(body, abort=abort)
        self._keep(run)
        return run

    def _keep(self, run: Run) -> None:
        """The agent's messages of ``run``, added to the history as AG-UI clients add them."""
        texts: dict[str, dict[str, Any]] = {}
        for event in run.events:
            kind = event.get("type")
            if kind == "TEXT_MESSAGE_START" and event.get("role", "assistant") == "assistant":
                texts[event["messageId"]] = message = {
                    "id": event["messageId"], "role": "assistant", "content": ""}  # fmt: skip
                self.messages.append(message)
            elif kind == "TEXT_MESSAGE_CONTENT" and event.get("messageId") in texts:
                texts[event["messageId"]]["content"] += event.get("delta", "")
            elif kind == "TOOL_CALL_START":
                parent = event.get("parentMessageId") or f"a-{event['toolCallId']}"
                if parent not in texts:
                    texts[parent] = {"id": parent, "role": "assistant", "content": ""}
                    self.messages.append(texts[parent])
                texts[parent].setdefault("toolCalls", []).append({
                    "id": event["toolCallId"], "type": "function",
                    "function": {"name": event["toolCallName"], "arguments": ""}})  # fmt: skip
            elif kind == "TOOL_CALL_ARGS":
                for message in texts.values():
                    for call in message.get("toolCalls", []):
                        if call["id"] == event["toolCallId"]:
                            call["function"]["arguments"] += event.get("delta", "")
            elif kind == "TOOL_CALL_RESULT":
                self.messages.append({"id": event.get("messageId") or f"t-{uuid.uuid4()}",
                                      "role": "tool", "toolCallId": event["toolCallId"],
                                      "content": event.get("content", "")})  # fmt: skip


class Endpoint:
    """An AG-UI endpoint URL (``POST`` a ``RunAgentInput``, read SSE)."""

    def __init__(self, url: str, *, timeout: float = 60.0) -> None:
        self.url = url
        self.http = httpx.Client(timeout=timeout)

    def thread(self) -> Thread:
        return Thread(self)

    def post(self, body: dict[str, Any], *, abort: bool = False) -> Run:
        """``abort``: close the request at the first event after ``RUN_STARTED``."""
        headers = {"Accept": "text/event-stream"}
        with self.http.stream("POST", self.url, json=body, headers=headers) as response:
            if response.status_code != 200:
                return Run(response.status_code, body=response.read().decode(errors="replace"))
            events: list[dict[str, Any]] = []
            for event in _stream(response.iter_lines()):
                events.append(event)
                if abort and event.get("type") != "RUN_STARTED":
                    break  # leaving the block closes the connection, unread
            return Run(200, tuple(events))

    def close(self) -> None:
        self.http.close()


def _events(lines: Any) -> list[dict[str, Any]]:
    """The JSON of each SSE event (``data:`` lines, joined; an empty line ends an event)."""
    return list(_stream(lines))


def _stream(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    data: list[str] = []
    for line in itertools.chain(lines, [""]):
        if not line:
            if data:
                yield json.loads("\n".join(data))
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
