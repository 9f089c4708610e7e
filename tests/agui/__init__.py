"""AG-UI conformance: our events checked by the official ``@ag-ui/core`` schemas, in node.

``scripts/install --test`` installs ``@ag-ui/core`` (and ``@ag-ui/client``) from the npm
registry into ``node_modules/``; these helpers run the node scripts beside this file.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from hostcall.protocol.frames import stored_event
from hostcall.settings import ROOT

HERE = Path(__file__).parent
NODE_MODULES = ROOT / "node_modules" / "@ag-ui"


def run_node(script: str, payload: Any, *, timeout: float = 60) -> Any:
    """Run ``tests/agui/<script>`` with ``payload`` as JSON on stdin; its stdout as JSON."""
    assert (NODE_MODULES / "core").is_dir(), (
        "@ag-ui/core is not installed: run scripts/install --test (it runs npm ci)"
    )
    done = subprocess.run(
        ["node", str(HERE / script)],
        input=json.dumps(payload).encode(),
        capture_output=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"node {script} failed:\n{done.stderr.decode()}"
    return json.loads(done.stdout)


def check_events(items: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The events of ``items`` ((where, event JSON)) that AG-UI's schemas refuse, with why."""
    report = run_node("validate_events.mjs", [{"where": w, "event": e} for w, e in items])
    assert report["checked"] == len(items)
    failures: list[dict[str, Any]] = report["failures"]
    return failures


def check_shapes(items: list[tuple[str, str, Any]]) -> list[dict[str, Any]]:
    """``check_events`` for other values: (where, the name of an @ag-ui/core schema, value)."""
    payload = [{"where": w, "schema": s, "event": v} for w, s, v in items]
    report = run_node("validate_events.mjs", payload)
    assert report["checked"] == len(items)
    failures: list[dict[str, Any]] = report["failures"]
    return failures


def stored_events(db: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(where, SSE event name, event JSON) of every event in a Hostcall SQLite file, as a
    stream sends it (``stored_event`` brings rows of older versions to today's shape)."""
    uri = f"file:{db}?mode=ro"
    with sqlite3.connect(uri, uri=True) as conn:
        has = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'events'").fetchone()
        rows = conn.execute("SELECT conversation_id, seq, type, data FROM events") if has else []
        events = [stored_event(*row) for row in rows]
    return [(f"{db}:{e.id}", e.name, e.data) for e in events]


def event_name(event: dict[str, Any]) -> str:
    """The SSE ``event:`` name docs/protocol.md promises for an event's JSON."""
    return str(event["name"] if event.get("type") == "CUSTOM" else event.get("type"))
