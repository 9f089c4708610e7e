"""The console's operators as its sign-in reaches them: a user by name, and the sessions a
signed-in user holds (hostcall/console/session.py; the users themselves are managed by
``hostcall users``, hostcall/console/users_command.py)."""

from __future__ import annotations

from hostcall.store.console_records import ConsoleSession, User
from hostcall.store.interfaces import Accounts


class OperatorService:
    def __init__(self, store: Accounts) -> None:
        self.store = store

    async def get_user(self, name: str) -> User | None:
        return await self.store.get_user(name)

    async def session_user(self, digest: str, now: float) -> str | None:
        """Whose session this is, while it lasts (None: ended, or expired)."""
        return await self.store.session_user(digest, now)

    async def add_session(self, session: ConsoleSession) -> None:
        await self.store.add_session(session)

    async def end_session(self, digest: str) -> bool:
        return await self.store.end_session(digest)
