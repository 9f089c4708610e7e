"""Identity tokens for tests: a site's signing keys, its JWTs, and its JWKS on loopback."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
