"""Identity tokens for tests: a site's signing keys, its JWTs, and its JWKS on loopback."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from hostcall.qa.servers import serve_in_thread

ISSUER = "https://shop.example"
AUDIENCE = "hostcall"
SECRET = "a-site-secret-of-thirty-two-bytes-or-more!"
SECRET_ENV = "SHOP_IDENTITY_SECRET"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_pem(key: rsa.RSAPrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def claims(sub: str = "ann", **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 600} | extra


def hs_token(sub: str = "ann", *, secret: str = SECRET, **extra: Any) -> str:
    return jwt.encode(claims(sub, **extra), secret, algorithm="HS256")


def rs_token(key: rsa.RSAPrivateKey, sub: str = "ann", *, kid: str | None = None,
             **extra: Any) -> str:  # fmt: skip
    headers = {"kid": kid} if kid else None
    return jwt.encode(claims(sub, **extra), key, algorithm="RS256", headers=headers)


def _part(data: dict[str, Any] | bytes) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsigned_token(sub: str = "ann") -> str:
    """``alg: none``: a header, the claims, and no signature."""
    return f"{_part({'alg': 'none', 'typ': 'JWT'})}.{_part(claims(sub))}."


def hmac_with_public_key(key: rsa.RSAPrivateKey, sub: str = "mallory") -> str:
    """The HS/RS confusion: HS256 keyed with the site's public key, which anyone can read
    (made by hand: PyJWT itself refuses to sign so)."""
    signing = f"{_part({'alg': 'HS256', 'typ': 'JWT'})}.{_part(claims(sub))}"
    mac = hmac.new(public_pem(key).encode(), signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{_part(mac)}"


def jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return data | {"kid": kid, "use": "sig", "alg": "RS256"}


@dataclass
class Jwks:
    """A site's JWKS endpoint: the keys it publishes now, and how often it was read."""

    keys: dict[str, rsa.RSAPrivateKey] = field(default_factory=dict)
    hits: int = 0
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/jwks.json"

    def app(self) -> Starlette:
        async def serve(request: Request) -> Response:
            self.hits += 1
            return JSONResponse({"keys": [jwk(k, kid) for kid, k in self.keys.items()]})

        return Starlette(routes=[Route("/jwks.json", serve)])


@contextmanager
def jwks_server(**keys: rsa.RSAPrivateKey) -> Iterator[Jwks]:
    site = Jwks(dict(keys))
    with serve_in_thread(site.app()) as port:
        site.port = port
        yield site


@dataclass
class SlowJwks:
    """A JWKS host on loopback in the test's own event loop, for faults: while ``answering``
    is clear it accepts each request and holds it (until the client gives up, or
    ``answering`` is set); ``status`` other than 200 answers that at once, without keys.
    ``on_connect`` runs as each connection arrives (a test moves its clock there). With
    ``drip``, it answers 200 and then a byte of body at a time, slowly, for ten seconds."""

    keys: dict[str, rsa.RSAPrivateKey] = field(default_factory=dict)
    status: int = 200
    drip: bool = False
    answering: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)  # a request was read
    on_connect: Callable[[], None] = lambda: None
    connections: int = 0
    held: int = 0  # connections open now, a request read and not answered
    port: int = 0
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/jwks.json"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        self.on_connect()
        try:
            await reader.readuntil(b"\r\n\r\n")
            if self.drip:
                await self._drip(writer)
                return
            holding = self.status == 200 and not self.answering.is_set()
            self.held += holding
            self.arrived.set()
            if holding:
                try:
                    # Until the test lets it answer, or the client hangs up (EOF).
                    waits = {asyncio.ensure_future(self.answering.wait()),
                             asyncio.ensure_future(reader.read(1))}  # fmt: skip
                    _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    for task in pending:
                        task.cancel()
                finally:
                    self.held -= 1
                if not self.answering.is_set():
                    return
            keys = {"keys": [jwk(k, kid) for kid, k in self.keys.items()]}
            body = json.dumps(keys).encode() if self.status == 200 else b"down"
            head = (f"HTTP/1.1 {self.status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")  # fmt: skip
            writer.write(head.encode() + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _drip(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n{")
        self.arrived.set()
        for _ in range(200):  # each read well within any client's read timeout
            await asyncio.sleep(0.05)
            writer.write(b" ")
            await writer.drain()


@asynccontextmanager
async def slow_jwks(**keys: rsa.RSAPrivateKey) -> AsyncIterator[SlowJwks]:
    site = SlowJwks(dict(keys))
    server = await asyncio.start_server(site.handle, "127.0.0.1", 0)
    site.port = server.sockets[0].getsockname()[1]
    try:
        yield site
    finally:
        server.close()
        site.answering.set()  # no handler is left holding its connection
        for writer in site._writers:
            writer.close()
        await server.wait_closed()
