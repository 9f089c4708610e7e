"""What checking a tool's output against its schema costs: Hostcall's check
(hostcall/schemas.py: jsonschema-rs's quick yes, jsonschema for a no and its messages),
jsonschema alone (the baseline), and jsonschema-rs alone, on the demo's schemas, in one process.

Usage: .venv/bin/python bench/schema_bench.py [--quick]
A measurement: prints a table and exits 0; 1 when a validator disagrees with jsonschema.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator, FormatChecker
from report import print_table

from hostcall.schemas import CompiledSchema

ROOT = Path(__file__).resolve().parent.parent
PLANNER = json.loads((ROOT / "demo" / "agents" / "planner.json").read_text())
SCHEMAS = {tool["name"]: tool["output_schema"] for tool in PLANNER["tools"]
           if tool.get("output_schema")}  # fmt: skip
# A ``pattern``: regular expressions are jsonschema-rs's too.
SCHEMAS["with a pattern"] = {
    "type": "object",
    "properties": {"id": {"type": "string", "pattern": "^T-[0-9]+$"}},
    "required": ["id"],
}


def task(n: int) -> dict[str, str]:
    return {"id": f"T-{n}", "title": f"Task {n}", "status": "todo", "assignee": "ada",
            "dueDate": "2026-12-31"}  # fmt: skip


CASES: list[tuple[str, str, Any]] = [
    ("read_board_tasks, 2 tasks", "read_board_tasks", {"tasks": [task(1), task(2)]}),
    ("read_board_tasks, 200 tasks", "read_board_tasks", {"tasks": [task(n) for n in range(200)]}),
    ("create_task", "create_task", {"id": "T-1", "title": "Review", "status": "todo"}),
    ("with a pattern", "with a pattern", {"id": "T-42"}),
    ("create_task, invalid", "create_task", {"id": "T-1", "title": "", "status": "later"}),
]


def per_call(check: Callable[[], object], rounds: int) -> float:
    """Median seconds per call over ``rounds`` batches, after one warm-up batch."""
    batch = 50
    times = []
    for i in range(rounds + 1):
        start = time.perf_counter()
        for _ in range(batch):
            check()
        if i:
            times.append((time.perf_counter() - start) / batch)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    rounds = 20 if args.quick else 200
    formats = FormatChecker()
    rows, disagreements = [], []
    for label, name, value in CASES:
        schema = SCHEMAS[name]
        baseline = Draft202012Validator(schema, format_checker=formats)
        ours = CompiledSchema(schema)
        rust = jsonschema_rs.Draft202012Validator(schema, validate_formats=True)
        verdict = baseline.is_valid(value)
        if (not ours.problems(value)) != verdict or rust.is_valid(value) != verdict:
            disagreements.append(label)
        # What Hostcall asks for: the problems (none when valid), the same for each.
        base_t = per_call(lambda: list(baseline.iter_errors(value)), rounds)  # noqa: B023
        ours_t = per_call(lambda: ours.problems(value), rounds)  # noqa: B023
        rust_t = per_call(lambda: list(rust.iter_errors(value)), rounds)  # noqa: B023
        rows.append((label, "valid" if verdict else "invalid", f"{base_t * 1e6:.1f} µs",
                     f"{ours_t * 1e6:.1f} µs ({ours_t / base_t:.2f}x)",
                     f"{rust_t * 1e6:.1f} µs ({rust_t / base_t:.2f}x)"))  # fmt: skip
    print_table(
        f"Checking a tool's output against its schema, median per call, {rounds} batches of 50",
        rows,
        [
            "jsonschema alone is the baseline; ratios are to it, from the same minutes",
            "Hostcall: jsonschema-rs's quick yes; jsonschema for a no, and for its messages",
        ],
        header=("case", "verdict", "jsonschema", "hostcall", "jsonschema-rs"),
    )
    if disagreements:
        print(f"!! verdicts differ from jsonschema's: {', '.join(disagreements)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
