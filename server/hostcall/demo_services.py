"""A small local service for the demo's server-side tool (public holidays, offline), and
where it listens: port 8002 if free (the address the demo's agent files name), else the port
``hostcall demo --services-port`` gives or a free one, with the demo's agent files copied and
pointed at it."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

HOLIDAYS: dict[str, list[tuple[str, str]]] = {
    "FR": [("2026-01-01", "Jour de l'an"), ("2026-04-06", "Lundi de Pâques"),
           ("2026-05-01", "Fête du Travail"), ("2026-05-08", "Victoire 1945"),
           ("2026-07-14", "Fête nationale"), ("2026-08-15", "Assomption"),
           ("2026-11-01", "Toussaint"), ("2026-11-11", "Armistice"), ("2026-12-25", "Noël")],
    "ES": [("2026-01-01", "Año Nuevo"), ("2026-01-06", "Epifanía del Señor"),
           ("2026-04-03", "Viernes Santo"), ("2026-05-01", "Fiesta del Trabajo"),
           ("2026-08-15", "Asunción de la Virgen"), ("2026-10-12", "Fiesta Nacional de España"),
           ("2026-12-08", "Inmaculada Concepción"), ("2026-12-25", "Navidad")],
    "JP": [("2026-01-01", "元日"), ("2026-02-11", "建国記念の日"), ("2026-04-29", "昭和の日"),
           ("2026-05-03", "憲法記念日"), ("2026-05-05", "こどもの日"), ("2026-11-03", "文化の日"),
           ("2026-11-23", "勤労感謝の日")],
    "US": [("2026-01-01", "New Year's Day"), ("2026-05-25", "Memorial Day"),
           ("2026-07-03", "Independence Day (observed)"), ("2026-09-07", "Labor Day"),
           ("2026-11-26", "Thanksgiving Day"), ("2026-12-25", "Christmas Day")],
}  # fmt: skip
NAMES = {"FRANCE": "FR", "SPAIN": "ES", "ESPAÑA": "ES", "JAPAN": "JP", "USA": "US",
         "UNITED STATES": "US"}  # fmt: skip


async def holidays(request: Request) -> JSONResponse:
    raw = request.path_params["country"].strip().upper()
    code = NAMES.get(raw, raw)
    if code not in HOLIDAYS:
        return JSONResponse({"error": f"unknown country {raw!r}"}, status_code=404)
    after = request.query_params.get("after", "")
    days = [{"date": d, "name": n} for d, n in HOLIDAYS[code] if d >= after]
    return JSONResponse({"country": code, "holidays": days})


def create_services_app() -> Starlette:
    return Starlette(routes=[Route("/holidays/{country}", holidays)])


#: The port the demo's agent files (demo/agents) name for the service.
SERVICES_PORT = 8002


class PortBusy(Exception):
    def __init__(self, port: int) -> None:
        super().__init__(f"port {port} of 127.0.0.1 is busy")
        self.port = port


def services_socket(port: int | None) -> socket.socket:
    """The service's listening socket on 127.0.0.1, bound now (nobody takes it meanwhile):
    on ``port``; ``None`` asks for 8002, else any free port; 0 for any free port. An explicit
    port that is busy raises ``PortBusy``."""
    wanted = SERVICES_PORT if port is None else port
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Listening at once: two demos starting together may both bind a port (SO_REUSEADDR),
    # but only one can listen on it; the other learns it here, not when its server starts.
    try:
        sock.bind(("127.0.0.1", wanted))
        sock.listen(128)
    except OSError:
        sock.close()
        if port is not None:
            raise PortBusy(wanted) from None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
    return sock


def agents_for_port(agents: Path, port: int, into: Path) -> Path:
    """A copy of the agents directory ``agents`` at ``into``, its agent files' service address
    (127.0.0.1:8002 and localhost:8002: tool URLs, allowed hosts) moved to ``port``."""
    shutil.copytree(agents, into, dirs_exist_ok=True)
    for path in into.glob("*.json"):
        text = path.read_text(encoding="utf-8")
        for host in ("127.0.0.1", "localhost"):
            text = text.replace(f"{host}:{SERVICES_PORT}", f"{host}:{port}")
        path.write_text(text, encoding="utf-8")
    return into
