"""``hostcall users add NAME --role ROLE``: the console's accounts are made on the server."""

from __future__ import annotations

import asyncio
import getpass
import sys
from pathlib import Path

from hostcall.console.accounts import AccountError, add_user
from hostcall.store import is_database_url, open_store


def _password() -> str:
    if sys.stdin.isatty():
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise AccountError("the two passwords differ")
        return first
    # Piped in (scripts, containers): the first line, without its newline.
    return sys.stdin.readline().rstrip("\r\n")


def add_user_command(name: str, role: str, db: Path | str) -> int:
    # A command of its own, before any event loop runs.
    return asyncio.run(_add_user(name, role, db))


async def _add_user(name: str, role: str, db: Path | str) -> int:
    # Beside a running server: SQLite allows a second, brief writer; PostgreSQL any number.
    target = str(db) if is_database_url(str(db)) else Path(db)
    store = open_store(target, serving=False)
    try:
        user = await add_user(store, name, role, _password())
    except AccountError as exc:
        print(f"hostcall: {exc}", file=sys.stderr)
        return 1
    finally:
        await store.close()
    print(f"ok: {user.name} ({user.role}) can sign in at /console/login")
    return 0
