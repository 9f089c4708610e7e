"""``hostcall users add|list|remove|passwd|role``: the console's accounts are managed on the
server. Removing a user, changing their role or their password ends their console sessions
(the store does it in the same transaction), and each change is in the audit log."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
import time
from pathlib import Path
from typing import Protocol

from hostcall.console import accounts
from hostcall.console.accounts import AccountError
from hostcall.console.audit import record
from hostcall.store import is_database_url, open_store
from hostcall.store.interfaces import Accounts, Audit

# The audit log's actor for a change made with this command.
COMMAND_LINE = "command line"


def _password() -> str:
    if sys.stdin.isatty():
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise AccountError("the two passwords differ")
        return first
    # Piped in (scripts, containers): the first line, without its newline.
    return sys.stdin.readline().rstrip("\r\n")


def users_command(args: argparse.Namespace) -> int:
    # A command of its own, before any event loop runs.
    return asyncio.run(_users(args))


async def _users(args: argparse.Namespace) -> int:
    # Beside a running server: SQLite allows a second, brief writer; PostgreSQL any number.
    target = str(args.db) if is_database_url(str(args.db)) else Path(args.db)
    store = open_store(target, serving=False)
    try:
        print(await _run(store, args))
    except AccountError as exc:
        print(f"hostcall: {exc}", file=sys.stderr)
        return 1
    finally:
        await store.close()
    return 0


class _UsersStore(Accounts, Audit, Protocol):
    """The console's users, and the audit entry for each change."""


async def _run(store: _UsersStore, args: argparse.Namespace) -> str:
    action = args.users_command
    if action == "list":
        users = await store.list_users()
        if not users:
            return "no users; add one with: hostcall users add NAME --role ROLE"
        width = max(len(u.name) for u in users)
        return "\n".join(
            f"{u.name:<{width}}  {u.role:<8}  since "
            f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(u.created_at))} UTC"
            for u in users
        )
    name = args.name
    if action == "add":
        user = await accounts.add_user(store, name, args.role, _password())
        # The command line runs outside any server: the wall clock is the only one it has.
        await record(store, time.time, COMMAND_LINE, "user.add", name=user.name, role=user.role)
        # The whole address: a path alone is a link nobody can open from a terminal.
        return f"ok: {user.name} ({user.role}) can sign in at {args.url}/console/login"
    if action == "remove":
        await accounts.remove_user(store, name)
        await record(store, time.time, COMMAND_LINE, "user.remove", name=name)
        return f"ok: {name} is removed and signed out of the console"
    if action == "passwd":
        if await store.get_user(name) is None:  # before asking for a password
            raise AccountError(f"there is no user called {name[:80]!r}")
        await accounts.set_password(store, name, _password())
        await record(store, time.time, COMMAND_LINE, "user.password", name=name)
        return f"ok: {name} has a new password; their console sessions are ended"
    assert action == "role", action
    await accounts.set_role(store, name, args.role)
    await record(store, time.time, COMMAND_LINE, "user.role", name=name, role=args.role)
    return f"ok: {name} is now {args.role}; their console sessions are ended"
