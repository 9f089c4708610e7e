"""Agent definitions stored by reference.

A run keeps the definition it started with, even after its agent's file changes. Each run
used to store a copy (~5 KB of JSON for the demo's planner), dumped and written per run,
and rewritten by SQLite with every change of the run. Now a run stores the definition's
digest (``definition_digest`` below, the same as ``Agent.digest``), and the definition is
one row of ``agent_definitions`` per distinct definition, never changed nor deleted. Runs
migrated from a copy carry a key of the form ``migrated:<run id>`` instead (SQL cannot
compute the digest): one row per distinct copy, as good as a digest to find it.

``Definitions`` is what one store process remembers: each definition's text and parsed
value by digest (bounded), and which digests it saw written, so it writes each once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from hostcall.store import rows
from hostcall.store.records import Run

# Distinct definitions remembered; past it, forgotten all at once (and read again).
CACHE_SIZE = 256


# Here rather than in hostcall/agents.py (which imports it from here): the digest is the key
# a definition is stored under, and the store imports nothing from the layers above it.
def definition_digest(data: Any) -> str:
    """Identifies an agent definition (same JSON, same digest)."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class Definitions:
    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._parsed: dict[str, Any] = {}
        # Digests this process knows to be in the table (committed).
        self.written: set[str] = set()

    @staticmethod
    def digest(run: Run) -> str:
        return run.agent_digest or definition_digest(run.agent)

    def text(self, digest: str, agent: Any) -> str:
        """The definition as stored: dumped once per digest, not once per run."""
        found = self._texts.get(digest)
        if found is None:
            self._make_room()
            found = self._texts[digest] = rows.dump(agent)
            # What a run read back will carry: the value it was written from (nothing
            # changes a run's agent; parse_agent only reads it).
            self._parsed.setdefault(digest, agent)
        return found

    def known(self, digests: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
        """The parsed definitions this process has, by digest, and the digests it lacks
        (to read from the table and ``learn``)."""
        found: dict[str, Any] = {}
        missing: list[str] = []
        for digest in dict.fromkeys(digests):
            if digest in self._parsed:
                found[digest] = self._parsed[digest]
            else:
                missing.append(digest)
        return found, missing

    def learn(self, digest: str, text: str) -> Any:
        """A definition read from the table: parsed, remembered, and returned."""
        self._make_room()
        parsed = self._parsed[digest] = rows.load(text)
        self.written.add(digest)
        return parsed

    def _make_room(self) -> None:
        if len(self._parsed) >= CACHE_SIZE or len(self._texts) >= CACHE_SIZE:
            self._texts.clear()
            self._parsed.clear()
