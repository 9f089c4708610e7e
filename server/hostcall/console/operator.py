"""The person signed in to the console, as every console module sees them.

Its own module, below both session.py (which finds the operator of a request) and render.py
(which shows them on every page), so neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hostcall.console.accounts import Role


@dataclass(frozen=True, slots=True)
class Operator:
    """The person signed in to the console (whatever their role)."""

    name: str
    role: Role
    sid: str
    csrf: str
