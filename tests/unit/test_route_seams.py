"""Routes write only through services: no module outside the store, the services and the
wiring reaches the store or the engine through the runtime (docs/architecture.md, "Layout
and layers"). A use case's "write, then follow" lives in one service method, so no route
can forget the follow."""

import re
from pathlib import Path

import hostcall

PACKAGE = Path(hostcall.__file__).parent
# Where the whole store and the engine are at home: the store itself, the use cases, and the
# runtime that builds them.
HOME = ("store/", "services/", "runtime.py")
REACH = re.compile(r"\bruntime(?:_of\([^)]*\))?\.(?:store|engine|handoff)\b")


def test_no_route_reaches_the_store_or_the_engine() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not str(path.relative_to(PACKAGE)).startswith(HOME)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if REACH.search(line)
    ]
    assert found == [], "call a service (hostcall/services/) instead:\n" + "\n".join(found)
