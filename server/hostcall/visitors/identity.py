"""An agent's ``identity`` block: how the site's own backend says who the visitor is.

The site signs a short-lived JWT for its signed-in visitor; the page hands it to the widget
(``Hostcall('identify', ...)``); the server verifies it with what this block names and no
other key (docs/identity.md)::

    "identity": {"issuer": "https://shop.example", "audience": "hostcall",
                 "secret_env": "SHOP_IDENTITY_SECRET",          (HS256, a shared secret)
              or "public_key": "-----BEGIN PUBLIC KEY-----...", (RS/PS/ES/EdDSA)
              or "jwks_url": "https://shop.example/jwks.json",  (on an allowed host)
                 "algorithms": ["RS256"], "required": false,
                 "max_lifetime": 3600, "leeway": 30}

Exactly one key source. The algorithms a token may name are an allow-list that follows the
key: HMAC ones for a secret, public-key ones for a PEM key or a JWKS, never ``none``, so a
token cannot make the server use a public key as an HMAC secret (the HS/RS confusion).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from hostcall import envvars
from hostcall.blocks.http_request import host_port
from hostcall.visitors.visitor import Visitor

IDENTITY_KEYS = {
    "issuer", "audience", "secret_env", "public_key", "jwks_url", "algorithms", "required",
    "max_lifetime", "leeway",
}  # fmt: skip
SOURCES = ("secret_env", "public_key", "jwks_url")
HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
PUBLIC_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip
# What a JWKS may sign with unless the block narrows it.
JWKS_DEFAULT_ALGORITHMS = ("RS256", "ES256", "EdDSA")
# The longest a token may still be valid when it arrives: "short-lived", by default an hour;
# a block may ask for less, or up to a day.
DEFAULT_MAX_LIFETIME = 3600
MAX_LIFETIME = 86400
# Clock skew allowed between the site's server and this one, on exp, nbf and iat.
DEFAULT_LEEWAY = 30
MAX_LEEWAY = 300
# A shorter HMAC secret can be guessed offline from one token (RFC 7518 3.2: at least the
# hash's size).
MIN_SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class IdentityConfig:
    issuer: str
    audience: str
    algorithms: tuple[str, ...]
    required: bool = False
    max_lifetime: int = DEFAULT_MAX_LIFETIME
    leeway: int = DEFAULT_LEEWAY
    # The key: exactly one of these. The secret is read from the environment at load and
    # never written anywhere (not even repr).
    secret: bytes | None = field(default=None, repr=False)
    public_key: str | None = None
    jwks_url: str | None = None


@dataclass(frozen=True, slots=True)
class Identity(Visitor):
    """A visitor verified at the door: who they are, and until when the token says so."""

    # The token's ``exp`` (seconds since the epoch): the widget refreshes before it. Not
    # part of what a run keeps (``Visitor.to_json``).
    expires_at: float

    @property
    def visitor(self) -> Visitor:
        """Who a run started now acts for: the visitor, without the token's expiry."""
        return Visitor(self.sub, self.claims)


def parse_identity(
    raw: Any,
    where: str,
    environ: Mapping[str, str],
    *,
    allowed_env: Collection[str] | None = None,
    allowed_hosts: Callable[[], Collection[str]] | None = None,
) -> tuple[IdentityConfig | None, list[str]]:
    """The block checked; ``allowed_env`` and ``allowed_hosts`` (the platform's) None when a
    frozen definition is read again, whose lists are held to at use instead."""
    where = f"{where}: identity"
    if not isinstance(raw, dict):
        return None, [f"{where}: must be a JSON object"]
    problems = [f"{where}: unknown key {k!r}" for k in sorted(set(raw) - IDENTITY_KEYS)]
    for key in ("issuer", "audience"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            problems.append(f"{where}: {key!r} is required (the token's {key[:3]} claim)")
    sources = [k for k in SOURCES if k in raw]
    if len(sources) != 1:
        problems.append(f"{where}: give exactly one of 'secret_env', 'public_key', 'jwks_url'")
    required = raw.get("required", False)
    if not isinstance(required, bool):
        problems.append(f"{where}: 'required' must be true or false")
    max_lifetime = _seconds(raw, "max_lifetime", DEFAULT_MAX_LIFETIME, MAX_LIFETIME, where,
                            problems)  # fmt: skip
    leeway = _seconds(raw, "leeway", DEFAULT_LEEWAY, MAX_LEEWAY, where, problems, least=0)
    secret = public_key = jwks_url = None
    allowed: tuple[str, ...] = ()
    source = sources[0] if len(sources) == 1 else None
    if source == "secret_env":
        allowed = HMAC_ALGORITHMS
        secret = _secret(raw["secret_env"], where, environ, allowed_env, problems)
    elif source == "public_key":
        allowed = PUBLIC_ALGORITHMS
        public_key = _public_key(raw["public_key"], where, problems)
    elif source == "jwks_url":
        allowed = PUBLIC_ALGORITHMS
        jwks_url = _jwks_url(raw["jwks_url"], where, allowed_hosts, problems)
    algorithms = _algorithms(raw, source, allowed, public_key, where, problems)
    if problems:
        return None, problems
    return IdentityConfig(
        issuer=raw["issuer"],
        audience=raw["audience"],
        algorithms=algorithms,
        required=required,
        max_lifetime=max_lifetime,
        leeway=leeway,
        secret=secret,
        public_key=public_key,
        jwks_url=jwks_url,
    ), []


def _seconds(
    raw: Mapping[str, Any],
    key: str,
    default: int,
    most: int,
    where: str,
    problems: list[str],
    *,
    least: int = 1,
) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        problems.append(
            f"{where}: {key!r} must be a whole number of seconds from {least} to {most}"
        )
        return default
    return value


def _secret(
    name: Any,
    where: str,
    environ: Mapping[str, str],
    allowed_env: Collection[str] | None,
    problems: list[str],
) -> bytes | None:
    if not envvars.valid_name(name):
        problems.append(f"{where}: 'secret_env' must name an environment variable")
        return None
    why = envvars.refusal(name, allowed_env)
    if why is not None:
        problems.append(f"{where}: 'secret_env': {why}")
        return None
    value = environ.get(name)
    if value is None:
        problems.append(f"{where}: 'secret_env' reads ${name}, which is not set")
        return None
    if len(value.encode()) < MIN_SECRET_BYTES:
        problems.append(
            f"{where}: ${name} is too short for an HMAC secret (at least {MIN_SECRET_BYTES} "
            "bytes: a shorter one can be guessed from a single token)"
        )
        return None
    return value.encode()


def _public_key(pem: Any, where: str, problems: list[str]) -> str | None:
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    if not isinstance(pem, str) or "-----BEGIN PUBLIC KEY-----" not in pem:
        problems.append(f"{where}: 'public_key' must be a PEM public key (BEGIN PUBLIC KEY)")
        return None
    try:
        load_pem_public_key(pem.encode())
    except (ValueError, TypeError) as exc:
        problems.append(f"{where}: 'public_key' cannot be read: {exc}")
        return None
    return pem


def _jwks_url(
    url: Any,
    where: str,
    allowed_hosts: Callable[[], Collection[str]] | None,
    problems: list[str],
) -> str | None:
    try:
        if not isinstance(url, str):
            raise ValueError
        target = host_port(url)
    except ValueError:
        problems.append(f"{where}: 'jwks_url' must be an http(s) URL")
        return None
    if allowed_hosts is not None and target not in allowed_hosts():
        problems.append(
            f"{where}: 'jwks_url' goes to {target}, which is not in the 'allowed_hosts' of the "
            "agent's environment (_platform.json)"
        )
        return None
    return url


def _algorithms(
    raw: Mapping[str, Any],
    source: str | None,
    allowed: tuple[str, ...],
    public_key: str | None,
    where: str,
    problems: list[str],
) -> tuple[str, ...]:
    if "algorithms" not in raw:
        if source == "secret_env":
            return ("HS256",)
        if source == "public_key" and public_key is not None:
            return (_algorithm_of(public_key),)
        return JWKS_DEFAULT_ALGORITHMS
    value = raw["algorithms"]
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        problems.append(f"{where}: 'algorithms' must be a non-empty list of JWS algorithms")
        return ()
    refused = [a for a in value if a not in allowed]
    if refused and source is not None:
        kind = "a secret" if source == "secret_env" else "a public key"
        problems.append(
            f"{where}: 'algorithms': {refused[0]!r} cannot be used with {kind} "
            f"(allowed: {', '.join(allowed)})"
        )
    return tuple(dict.fromkeys(value))


def _algorithm_of(pem: str) -> str:
    """The usual algorithm for a PEM key's type: RS256, ES256/384/512 by curve, EdDSA."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    key = load_pem_public_key(pem.encode())
    if isinstance(key, ec.EllipticCurvePublicKey):
        return {"secp384r1": "ES384", "secp521r1": "ES512"}.get(key.curve.name, "ES256")
    if isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return "EdDSA"
    return "RS256"
