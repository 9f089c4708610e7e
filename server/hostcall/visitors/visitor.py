"""The signed-in visitor a run acts for: the one type from the door to ``$user``.

The site's backend signs a token for its visitor; ``identity_tokens`` verifies it into an
``Identity`` (this, and the token's expiry); a run keeps the ``Visitor`` in its row (the
``identity`` column, as ``{"sub", "claims"}``) and its tools' ``{{ $user.… }}`` templates and
guardrails' ``$user/…`` paths read it. Nothing the model says changes it (docs/identity.md).

This module imports nothing of Hostcall's, so the store can read a run back into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Visitor:
    """A signed-in visitor: the token's ``sub`` and every claim it carried."""

    sub: str
    claims: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        """What a run keeps of it; do not change the shape: stored runs are read back."""
        return {"sub": self.sub, "claims": dict(self.claims)}

    @staticmethod
    def from_json(raw: Any) -> Visitor:
        """A run's stored visitor, as ``to_json`` wrote it (always a ``Visitor``, even read
        from an ``Identity``'s JSON: the expiry is the token's, never stored)."""
        if not isinstance(raw, Mapping):
            raise ValueError(f"a stored visitor must be a JSON object, not {raw!r}")
        claims = raw.get("claims")
        return Visitor(str(raw.get("sub")), dict(claims) if isinstance(claims, Mapping) else {})

    def view(self) -> dict[str, Any]:
        """What ``$user`` names in a template or a guardrail's path: ``sub`` and ``claims``."""
        return self.to_json()
