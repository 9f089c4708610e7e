"""Result tables: one row per measure, Hostcall next to its floor, with a verdict."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Sequence

Row = tuple[str, str, str, str, str, str]
HEADER: Row = ("measure", "hostcall", "floor/bare", "ratio", "target", "verdict")


def compare(
    measure: str, ours: float, floor: float, fmt: Callable[[float], str], target: float | None
) -> Row:
    """A row with ratio = ours / floor; the verdict is ``ok`` when ratio <= target."""
    ratio = ours / floor if floor else float("inf")
    verdict = "info" if target is None else ("ok" if ratio <= target else "MISSED")
    goal = "-" if target is None else f"<= {target:g}x"
    return (measure, fmt(ours), fmt(floor), f"{ratio:.2f}x", goal, verdict)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def kib(size: float) -> str:
    return f"{size / 1024:.1f} KiB"


def mib(size: float) -> str:
    return f"{size / 2**20:.1f} MiB"


def per_second(rate: float) -> str:
    return f"{rate:,.0f}/s"


def summary(values: Sequence[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": q[49], "p99": q[98], "mean": statistics.fmean(values)}


def print_table(
    title: str,
    rows: Sequence[Sequence[str]],
    notes: Sequence[str] = (),
    header: Sequence[str] = HEADER,
) -> None:
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    print(f"\n## {title}\n")
    for i, row in enumerate((header, *rows)):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for note in notes:
        print(f"  {note}")
    sys.stdout.flush()
