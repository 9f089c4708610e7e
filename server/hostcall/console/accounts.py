"""Console accounts: roles, and passwords hashed with argon2id (argon2-cffi).

Roles are ranked: an admin may do what a designer may, a designer what an operator may.
    operator  conversations, calls and runs (instance management)
    designer  + agents (the designer)
    admin     + the audit log
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum
from typing import Protocol

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from hostcall.store.console_records import User
from hostcall.store.interfaces import Accounts

MIN_PASSWORD = 10
MAX_PASSWORD = 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_hasher = PasswordHasher()
# Verified when a name is unknown, so a wrong name costs as long as a wrong password. Made on
# the first sign-in rather than at import (every process that imports the app, each CLI call
# and test server included, paid half a second for it), and made by whichever hasher is in
# use, so its parameters, and with them the cost of verifying it, are those of real hashes.
_dummy: tuple[PasswordHasher, str] | None = None
# Hashing takes tens of milliseconds of CPU and 64 MiB a hash: off the event loop (argon2's C
# code releases the GIL), and at most two at a time, so a burst of sign-ins queues here
# instead of stalling every other request or exhausting memory. The sign-in rate limits are
# checked before a hash is ever queued.
_HASHING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hostcall-argon2")


def _hash(password: str) -> str:
    return _hasher.hash(password)


def _dummy_hash() -> str:
    global _dummy
    if _dummy is None or _dummy[0] is not _hasher:
        _dummy = (_hasher, _hasher.hash("not a password of anyone"))
    return _dummy[1]


def _verify(password_hash: str | None, password: str) -> bool:
    """Whether ``password`` matches; None (an unknown name) is checked against the dummy.

    Do not "optimise" the dummy to be made only for unknown names: made here for every
    sign-in, the first one costs the same extra hash whether the name is known or not, so even
    that one says nothing about which names exist."""
    dummy = _dummy_hash()
    try:
        return bool(_hasher.verify(dummy if password_hash is None else password_hash, password))
    except (VerificationError, InvalidHashError):
        return False


async def hash_password(password: str) -> str:
    return await asyncio.get_running_loop().run_in_executor(_HASHING, _hash, password)


async def verify_password(password_hash: str | None, password: str) -> bool:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_HASHING, _verify, password_hash, password)


class Role(StrEnum):
    OPERATOR = "operator"
    DESIGNER = "designer"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    def allows(self, needed: Role) -> bool:
        return self.rank >= needed.rank


class AccountError(ValueError):
    """A user that cannot be created; the message says why."""


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise AccountError(
            f"user name {name[:80]!r} must be 1-64 letters, digits, '_', '.', '@' or '-' "
            "(starting with a letter or digit)"
        )


def _check_role(role: str) -> None:
    if role not in set(Role):
        raise AccountError(f"role {role!r} must be one of {', '.join(Role)}")


def _check_password(password: str) -> None:
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise AccountError(f"the password must be {MIN_PASSWORD} to {MAX_PASSWORD} characters")


async def add_user(
    store: Accounts,
    name: str,
    role: str,
    password: str,
    *,
    # The app's clock where there is an app (``Runtime.clock``); ``hostcall users`` adds
    # accounts from the command line, outside any server, on the wall clock.
    clock: Callable[[], float] = time.time,
) -> User:
    _check_name(name)
    _check_role(role)
    _check_password(password)
    user = User(name, role, await hash_password(password), clock())
    if not await store.add_user(user):
        raise AccountError(f"there is already a user called {name!r}")
    return user


# Each change below ends every console session of that user (the store does it in the same
# transaction): a removed user, a demoted one or one whose password leaked is signed out.


async def remove_user(store: Accounts, name: str) -> None:
    if not await store.remove_user(name):
        raise AccountError(f"there is no user called {name[:80]!r}")


async def set_role(store: Accounts, name: str, role: str) -> None:
    _check_role(role)
    if not await store.set_user_role(name, role):
        raise AccountError(f"there is no user called {name[:80]!r}")


async def set_password(store: Accounts, name: str, password: str) -> None:
    _check_password(password)
    if await store.get_user(name) is None:
        raise AccountError(f"there is no user called {name[:80]!r}")
    if not await store.set_user_password(name, await hash_password(password)):
        raise AccountError(f"there is no user called {name[:80]!r}")


class _Users(Protocol):
    async def get_user(self, name: str) -> User | None: ...


async def authenticate(store: _Users, name: str, password: str) -> User | None:
    """The user, if ``password`` is theirs; None otherwise (same cost either way)."""
    user = await store.get_user(name) if _NAME.fullmatch(name) else None
    good = await verify_password(user.password_hash if user else None, password[:MAX_PASSWORD])
    return user if good else None
