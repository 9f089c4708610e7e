"""The designer's saved versions of an agent file: listed, read, added (the file itself is
written by hostcall/console/agent_files.py)."""

from __future__ import annotations

from hostcall.store.console_records import AgentVersion
from hostcall.store.interfaces import AgentVersions


class AgentVersionService:
    def __init__(self, store: AgentVersions) -> None:
        self.store = store

    async def list(self, agent_id: str) -> list[AgentVersion]:
        """The agent's versions, newest first."""
        return await self.store.list_agent_versions(agent_id)

    async def get(self, agent_id: str, version: int) -> AgentVersion | None:
        return await self.store.get_agent_version(agent_id, version)

    async def add(self, version: AgentVersion) -> AgentVersion:
        """The version, stored under the agent's next number."""
        return await self.store.add_agent_version(version)
