"""Runs the cases and prints the table: ``hostcall conformance URL``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TextIO

from hostcall.conformance.cases import CASES, Failed, Skipped, Target
from hostcall.conformance.client import Endpoint

PROMPT = "create a task named conformance"


@dataclass(frozen=True, slots=True)
class Result:
    name: str
    verdict: str  # PASS, FAIL or SKIP
    detail: str


def run_cases(target: Target, only: list[str] | None = None) -> list[Result]:
    results = []
    for name, case in CASES:
        if only and name not in only:
            continue
        try:
            results.append(Result(name, "PASS", case(target)))
        except Failed as exc:
            results.append(Result(name, "FAIL", str(exc)))
        except Skipped as exc:
            results.append(Result(name, "SKIP", str(exc)))
        except Exception as exc:  # a case that broke on the endpoint's answer is a failure
            results.append(Result(name, "FAIL", f"{type(exc).__name__}: {exc}"))
    return results


def table(results: list[Result]) -> str:
    width = max(len(r.name) for r in results)
    lines = [f"{'case':<{width}}  result  detail", f"{'-' * width}  ------  ------"]
    lines += [f"{r.name:<{width}}  {r.verdict:<6}  {r.detail}" for r in results]
    passed = sum(r.verdict == "PASS" for r in results)
    lines.append(f"{passed}/{len(results)} passed")
    return "\n".join(lines)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "conformance",
        help="check an AG-UI endpoint's human-in-the-loop guarantees (docs/testing.md)",
    )
    parser.add_argument("url", help="the AG-UI endpoint, e.g. http://127.0.0.1:8000/agui/planner")
    parser.add_argument(
        "--prompt", default=PROMPT,
        help="a message that makes the agent call a tool needing approval (default: %(default)r)",
    )  # fmt: skip
    parser.add_argument(
        "--expiring-prompt", default=None, metavar="PROMPT",
        help="the same, for an approval that expires within --max-wait (default: --prompt)",
    )  # fmt: skip
    parser.add_argument(
        "--write-prompt",
        default=None,
        metavar="PROMPT",
        help="the same, for a write still in flight a moment after its approval, which the "
        "client aborts (default: --prompt)",
    )
    parser.add_argument(
        "--max-wait", type=float, default=15.0, metavar="S",
        help="wait at most this long for an interrupt's expiresAt (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--case", action="append", default=None, metavar="NAME", help="run only this case"
    )
    parser.add_argument("--strict", action="store_true", help="a skipped case fails the run too")


def conformance_command(args: argparse.Namespace, out: TextIO) -> int:
    endpoint, other = Endpoint(args.url), Endpoint(args.url)
    try:
        target = Target(endpoint, args.prompt, args.expiring_prompt or args.prompt,
                        args.max_wait, other, args.write_prompt or args.prompt)  # fmt: skip
        results = run_cases(target, args.case)
    finally:
        endpoint.close()
        other.close()
    print(table(results), file=out)
    bad = {"FAIL", "SKIP"} if args.strict else {"FAIL"}
    return 1 if any(r.verdict in bad for r in results) else 0
