"""How the console sets a cookie: for its own path only, never readable by scripts.

Below session.py (the session and login cookies) and render.py (the language and theme),
which both set cookies, so neither imports the other for it.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response


def set_cookie(response: Response, request: Request, name: str, value: str, age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=age,
        path="/console",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
