"""Console accounts: roles, and passwords hashed with argon2id (argon2-cffi).

Roles are ranked: an admin may do what a designer may, a designer what an operator may.
    operator  conversations, calls and runs (instance management)
    designer  + agents (the designer)
    admin     + the audit log
"""

from __future__ import annotations

import re
import time
from enum import StrEnum

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from hostcall.store import Store
from hostcall.store.records import User

MIN_PASSWORD = 10
MAX_PASSWORD = 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_hasher = PasswordHasher()
# Verified when a name is unknown, so a wrong name costs as long as a wrong password.
_DUMMY_HASH = _hasher.hash("not a password of anyone")


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


async def add_user(store: Store, name: str, role: str, password: str) -> User:
    if not _NAME.fullmatch(name):
        raise AccountError(
            f"user name {name[:80]!r} must be 1-64 letters, digits, '_', '.', '@' or '-' "
            "(starting with a letter or digit)"
        )
    if role not in set(Role):
        raise AccountError(f"role {role!r} must be one of {', '.join(Role)}")
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise AccountError(f"the password must be {MIN_PASSWORD} to {MAX_PASSWORD} characters")
    user = User(name, role, _hasher.hash(password), time.time())
    if not await store.add_user(user):
        raise AccountError(f"there is already a user called {name!r}")
    return user


async def authenticate(store: Store, name: str, password: str) -> User | None:
    """The user, if ``password`` is theirs; None otherwise (same cost either way)."""
    user = await store.get_user(name) if _NAME.fullmatch(name) else None
    try:
        _hasher.verify(user.password_hash if user else _DUMMY_HASH, password[:MAX_PASSWORD])
    except (VerificationError, InvalidHashError):
        return None
    return user
