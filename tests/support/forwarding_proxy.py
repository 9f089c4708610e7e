"""A small reverse proxy, run as its own process, for tests of trusted proxies: like nginx's
``proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for``, it appends the address it
was connected from to the request's ``X-Forwarded-For`` and passes the request on.

    python -m tests.support.forwarding_proxy --port 9000 --upstream http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

#: Headers that describe one connection or one encoding, not the request: never passed on.
HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding",
       "host", "upgrade", "te", "trailer", "proxy-connection"}  # fmt: skip
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def proxy_app(upstream: str) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=30)

    async def forward(request: Request) -> Response:
        peer = request.client.host if request.client else "unknown"
        headers = [(k, v) for k, v in request.headers.items() if k not in HOP]
        headers = [(k, v) for k, v in headers if k != "x-forwarded-for"]
        seen = request.headers.get("x-forwarded-for")
        headers.append(("x-forwarded-for", f"{seen}, {peer}" if seen else peer))
        url = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        answer = await client.request(
            request.method, url, headers=headers, content=await request.body()
        )
        response = Response(answer.content, status_code=answer.status_code)
        for key, value in answer.headers.multi_items():
            if key not in HOP:
                response.headers.append(key, value)
        return response

    return Starlette(routes=[Route("/{path:path}", forward, methods=METHODS)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    # Its own peer address is the one to pass on: believe no X-Forwarded-For itself.
    uvicorn.run(
        proxy_app(args.upstream), host="127.0.0.1", port=args.port, proxy_headers=False,
        log_level="warning", access_log=False,
    )  # fmt: skip


if __name__ == "__main__":
    main()
