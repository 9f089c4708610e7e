"""``hostcall person export|erase PERSON --agent ID``: a person's data from the server's
command line, as the console's person page does it (hostcall/console/people.py), audited
with the actor ``command line``.

``export`` writes one JSON document (to ``--out``, else standard output); ``erase`` deletes
every conversation of the person with the agent, whole, and asks for ``--yes``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Protocol

from hostcall.errors import HostcallError
from hostcall.store import is_database_url, open_store
from hostcall.visitors.personal_data import (
    AuditedExport,
    PersonErasure,
    erase_person,
    export_person,
)

# The audit log's actor for what this command does.
COMMAND_LINE = "command line"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], default_db: Path) -> None:
    person = sub.add_parser("person", help="a signed-in person's data: export it, or erase it")
    actions = person.add_subparsers(dest="person_command", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="write all of a person's data as one JSON document")
    erase = actions.add_parser("erase", help="delete all of a person's data for good (audited)")
    for action in (export, erase):
        action.add_argument("person", help="the person's id (the 'sub' of their identity token)")
        action.add_argument("--agent", required=True, help="the agent's id")
        action.add_argument(
            "--db", default=str(default_db), metavar="FILE|URL",
            help="the server's SQLite database or postgresql:// URL (default: %(default)s)",
        )  # fmt: skip
    export.add_argument("--out", type=Path, metavar="FILE", help="write here, not to stdout")
    erase.add_argument("--yes", action="store_true", help="really erase (nothing is kept)")


class _PersonStore(AuditedExport, PersonErasure, Protocol):
    """A person's data exported, or erased."""


def person_command(args: argparse.Namespace) -> int:
    if args.person_command == "erase" and not args.yes:
        print(
            f"hostcall: this erases every conversation of {args.person!r} with "
            f"{args.agent!r}, for good; run it again with --yes",
            file=sys.stderr,
        )
        return 2
    return asyncio.run(_person(args))


async def _person(args: argparse.Namespace) -> int:
    # Beside a running server: SQLite allows a second, brief writer; PostgreSQL any number.
    target = str(args.db) if is_database_url(str(args.db)) else Path(args.db)
    store = open_store(target, serving=False)
    try:
        return await _run(store, args)
    finally:
        await store.close()


async def _run(store: _PersonStore, args: argparse.Namespace) -> int:
    if args.person_command == "export":
        document = await export_person(store, args.agent, args.person, actor=COMMAND_LINE)
        text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
        if args.out is None:
            sys.stdout.write(text)
        else:
            args.out.write_text(text, encoding="utf-8")
            count = len(document["conversations"])
            print(f"ok: {count} conversations of {args.person!r} written to {args.out}")
        return 0
    try:
        erased = await erase_person(store, args.agent, args.person, actor=COMMAND_LINE)
    except HostcallError as exc:
        print(f"hostcall: {exc.message}", file=sys.stderr)
        return 1
    print(
        f"ok: {erased.conversations} conversations of {args.person!r} with {args.agent!r} "
        f"erased ({sum(erased.rows.values())} rows)"
    )
    return 0
