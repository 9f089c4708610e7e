"""What the designer offers to add as an installed node: the blocks this server's packages
provide (``hostcall blocks``), each with the schema its config is started from and checked
against. A block that cannot be loaded is left out; ``hostcall check`` names what is wrong."""

from __future__ import annotations

from typing import Any

from hostcall.blocks.installed import InstalledBlock, installed_blocks


def installed_for_designer() -> list[dict[str, Any]]:
    return [
        {
            "name": block.name,
            "package": block.package,
            "version": block.version,
            "description": block.description,
            "configSchema": dict(block.config_schema),
        }
        for block in installed_blocks().values()
        if isinstance(block, InstalledBlock)
    ]
