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


# The session and sign-in cookies. Cookies ignore ports: a server on another port of this
# host receives them, and may set them. Over https they carry the ``__Host-`` prefix, which
# browsers only accept with ``Secure``, ``Path=/`` and no ``Domain``: a plain-http neighbour
# can neither read nor plant them, and no sibling subdomain can plant them either.
HOST_PREFIX = "__Host-"


def private_name(request: Request, name: str) -> str:
    """The name the cookie ``name`` has on this request's scheme."""
    return HOST_PREFIX + name if request.url.scheme == "https" else name


def set_private_cookie(
    response: Response, request: Request, name: str, value: str, age: int
) -> None:
    if request.url.scheme != "https":
        set_cookie(response, request, name, value, age)
        return
    response.set_cookie(
        HOST_PREFIX + name, value, max_age=age, path="/", httponly=True, samesite="strict",
        secure=True,
    )  # fmt: skip


def delete_private_cookie(response: Response, request: Request, name: str) -> None:
    if request.url.scheme == "https":
        response.delete_cookie(
            HOST_PREFIX + name, path="/", secure=True, httponly=True, samesite="strict"
        )
    else:
        response.delete_cookie(name, path="/console")


def read_private_cookie(request: Request, name: str) -> str | None:
    return request.cookies.get(private_name(request, name))
