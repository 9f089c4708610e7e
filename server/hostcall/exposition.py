"""``GET /metrics``: the Prometheus exposition (hostcall/metrics.py), for the operator's
scraper only.

With ``HOSTCALL_METRICS_TOKEN`` set, a request must carry ``Authorization: Bearer <it>``.
Without it, only a request from the machine itself is answered: its peer is a loopback
address and it came through no proxy (no ``Forwarded`` or ``X-Forwarded-For`` header: with
``--forwarded-allow-ips`` the peer is the address the proxy reports, which a client can
write). Everything else gets ``401``/``403`` (docs/operations.md).
"""

from __future__ import annotations

import hmac
import ipaddress

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall import metrics
from hostcall.errors import Forbidden, Unauthorized
from hostcall.protocol.codes import ErrorCode

TOKEN_VARIABLE = "HOSTCALL_METRICS_TOKEN"


async def scrape(request: Request) -> Response:
    _check_access(request)
    return Response(metrics.collect(), media_type=metrics.CONTENT_TYPE)


def _check_access(request: Request) -> None:
    token = request.app.state.hostcall.settings.environ.get(TOKEN_VARIABLE, "")
    if token:
        sent = request.headers.get("authorization", "")
        scheme, _, value = sent.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            value.strip().encode(), token.encode()
        ):
            raise Unauthorized(
                f"/metrics needs 'Authorization: Bearer' with the token in {TOKEN_VARIABLE}",
                code=ErrorCode.BAD_TOKEN,
            )
        return
    proxied = "forwarded" in request.headers or "x-forwarded-for" in request.headers
    if proxied or not _loopback(request.client.host if request.client else ""):
        raise Forbidden(
            f"/metrics answers only this machine unless {TOKEN_VARIABLE} is set",
            code=ErrorCode.WRONG_TOKEN,
        )


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return host == "localhost"


def metrics_routes() -> list[BaseRoute]:
    return [Route("/metrics", scrape, methods=["GET"])]
