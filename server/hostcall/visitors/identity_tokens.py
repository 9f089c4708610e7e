"""Verifying a visitor's identity token against their agent's ``identity`` block.

PyJWT does the JOSE work (signatures, ``exp``/``nbf``/``iat`` with the block's leeway,
``aud``, ``iss``); this module decides what it may be given: a token of bounded size, an
algorithm from the block's allow-list (taken from the token's header only to be checked
against that list), the block's own key, and an ``exp`` no further away than the block
allows. A JWKS is fetched from an allowed host only (checked before any connection),
cached, and fetched again once when a token names a key id it does not hold; then the
token is refused (a forged ``kid`` costs one fetch per ``REFRESH_SECONDS``, not one each).

A slow or hanging JWKS host must cost visitors one fetch's wait at most, never a queue:
- one fetch per URL at a time, whole (connect to last byte) within ``JWKS_TIMEOUT_SECONDS``;
  every request that needs it waits for that fetch and takes its result;
- keys past their ``JWKS_TTL_SECONDS`` are still used while their refresh runs in the
  background (for up to ``JWKS_STALE_SECONDS`` while the host cannot be read);
- after a failed fetch none is tried for a back-off (``BACKOFF_SECONDS``, doubling with each
  failure in a row up to ``MAX_BACKOFF_SECONDS``); with no keys to use, a request meanwhile
  gets ``503 identity_unavailable`` at once, with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
from starlette.requests import Request

from hostcall import strictjson
from hostcall.agents import Agent
from hostcall.blocks.http_request import host_port
from hostcall.errors import BadRequest, Unauthorized, Unavailable
from hostcall.platform import Platform
from hostcall.protocol.codes import ErrorCode
from hostcall.visitors.identity import HMAC_ALGORITHMS, Identity, IdentityConfig

log = logging.getLogger("hostcall.identity")

# Where the widget's requests carry the page's identity token (``/agui`` takes it as its
# bearer token instead).
IDENTITY_HEADER = "hostcall-identity"
# A JWT the size of a few dozen claims; anything larger is refused before it is parsed.
MAX_TOKEN_BYTES = 8192
MAX_SUB_CHARS = 255
# A JWKS is read again after this long, and, for an unknown key id, at most this often.
JWKS_TTL_SECONDS = 300.0
REFRESH_SECONDS = 30.0
JWKS_TIMEOUT_SECONDS = 5.0
MAX_JWKS_BYTES = 64 * 1024
BACKOFF_SECONDS = 5.0
MAX_BACKOFF_SECONDS = JWKS_TTL_SECONDS
# Keys read this long ago are not used any more, even while the host cannot be read: a key
# the site withdrew (leaked, rotated out) must stop working some day without its host.
JWKS_STALE_SECONDS = 24 * 3600.0


class BadIdentity(Unauthorized):
    code = ErrorCode.BAD_IDENTITY


class ExpiredIdentity(Unauthorized):
    code = ErrorCode.EXPIRED_IDENTITY


class IdentityUnavailable(Unavailable):
    """The agent's JWKS could not be read, and no key it held fits the token."""

    code = ErrorCode.IDENTITY_UNAVAILABLE


@dataclass
class _KeySet:
    """One JWKS URL's keys, and the one fetch of it that may be under way."""

    # key id -> the key, and the algorithm its JWK names (None: any of the block's)
    keys: dict[str, tuple[jwt.PyJWK, str | None]] = field(default_factory=dict)
    tried_at: float = float("-inf")  # the last fetch started, whether it worked
    loaded_at: float = float("-inf")  # the last one that worked
    failures: int = 0  # in a row, since the last one that worked
    retry_at: float = float("-inf")  # no fetch before this: the back-off after a failure
    # The fetch under way: every request that needs it waits for this one, none starts its own.
    fetching: asyncio.Task[None] | None = None

    def usable(self, now: float) -> bool:
        return now - self.loaded_at <= JWKS_STALE_SECONDS

    @property
    def under_way(self) -> bool:
        # A task cancelled before it ran never cleared itself: done is done.
        return self.fetching is not None and not self.fetching.done()


class Identities:
    def __init__(
        self,
        *,
        # The app's clock (``Runtime.clock``): a token's lifetime and the JWKS cache's ages.
        clock: Callable[[], float] = time.time,
        client: Callable[[], httpx.AsyncClient] | None = None,
        platform: Callable[[], Platform] = Platform,
        fetch_timeout: float = JWKS_TIMEOUT_SECONDS,
    ) -> None:
        self.clock = clock
        self.fetch_timeout = fetch_timeout
        # The live platform (reloaded with the agents): the hosts a JWKS may be read from.
        self._platform = platform
        self._client = client or (
            # trust_env=False: no proxy from the environment sits between us and the keys.
            lambda: httpx.AsyncClient(trust_env=False, timeout=JWKS_TIMEOUT_SECONDS)
        )
        self._sets: dict[str, _KeySet] = {}
        # Fetches made, per URL: tests count the refreshes an unknown key id causes.
        self.fetches: dict[str, int] = {}

    async def of_request(
        self, request: Request, agent: Agent, *, token: str | None = None, needed: bool = False
    ) -> Identity | None:
        """The identity the request carries for ``agent`` (in ``Hostcall-Identity``, or
        ``token``), verified; None if it carries none and neither the agent nor the caller
        (``needed``) requires one."""
        token = token or request.headers.get(IDENTITY_HEADER) or None
        config = agent.identity
        if config is None:
            if token or needed:
                raise BadRequest(
                    f"agent {agent.id!r} takes no identity token (its file has no 'identity')"
                )
            return None
        if token is None:
            if needed or config.required:
                raise Unauthorized(
                    f"agent {agent.id!r} needs the visitor's identity token",
                    code=ErrorCode.IDENTITY_REQUIRED,
                )
            return None
        hosts = self._platform().environment(agent.environment).allowed_hosts
        try:
            return await self.verify(config, token, allowed_hosts=lambda: hosts)
        except Unauthorized as refused:
            # For the site's owner, who signs the tokens: why, never the token itself.
            log.warning("identity refused: agent=%s: %s", agent.id, refused.message)
            raise

    async def verify(
        self,
        config: IdentityConfig,
        token: Any,
        *,
        allowed_hosts: Callable[[], Collection[str]] = lambda: (),
    ) -> Identity:
        """The identity ``token`` proves, or ``BadIdentity`` / ``ExpiredIdentity`` (401),
        ``IdentityUnavailable`` (503: the keys could not be read)."""
        if not isinstance(token, str) or not token:
            raise BadIdentity("an identity token (a JWT) is required")
        if len(token.encode()) > MAX_TOKEN_BYTES:
            raise BadIdentity(f"the identity token is larger than {MAX_TOKEN_BYTES} bytes")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise BadIdentity("the identity token is not a JWT") from None
        alg = header.get("alg")
        if alg not in config.algorithms:
            raise BadIdentity(
                f"the identity token's algorithm {alg!r} is not allowed "
                f"(allowed: {', '.join(config.algorithms)})"
            )
        key = await self._key(config, alg, header.get("kid"), allowed_hosts)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=config.audience,
                issuer=config.issuer,
                leeway=config.leeway,
                options={"require": ["exp", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise ExpiredIdentity("the identity token has expired") from None
        except jwt.ImmatureSignatureError:
            raise BadIdentity("the identity token is not valid yet (nbf or iat)") from None
        except jwt.InvalidAudienceError:
            raise BadIdentity(
                f"the identity token is not for audience {config.audience!r}"
            ) from None
        except jwt.InvalidIssuerError:
            raise BadIdentity(f"the identity token was not issued by {config.issuer!r}") from None
        except jwt.MissingRequiredClaimError as exc:
            raise BadIdentity(f"the identity token has no {exc.claim!r} claim") from None
        except jwt.InvalidSignatureError:
            raise BadIdentity("the identity token's signature does not verify") from None
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise BadIdentity(f"the identity token is not valid ({type(exc).__name__})") from None
        exp = claims["exp"]
        if isinstance(exp, bool) or not isinstance(exp, int | float):
            raise BadIdentity("the identity token's 'exp' must be a number")
        # PyJWT checked exp and nbf on the wall clock (it reads no other); how far away exp
        # may be is ours to check, on the app's.
        if exp - self.clock() > config.max_lifetime + config.leeway:
            raise BadIdentity(
                f"the identity token is valid for too long (at most {config.max_lifetime} s "
                "from now: sign a short-lived one)"
            )
        sub = claims["sub"]
        if not isinstance(sub, str) or not sub or len(sub) > MAX_SUB_CHARS or not sub.isprintable():
            raise BadIdentity(f"the identity token's 'sub' must be printable text of 1 to "
                              f"{MAX_SUB_CHARS} characters")  # fmt: skip
        return Identity(sub, claims, float(exp))

    # ---- keys -----------------------------------------------------------------------------

    async def _key(
        self,
        config: IdentityConfig,
        alg: str,
        kid: Any,
        allowed_hosts: Callable[[], Collection[str]],
    ) -> Any:
        if config.secret is not None:
            assert alg in HMAC_ALGORITHMS  # the block's allow-list says so
            return config.secret
        if config.public_key is not None:
            return config.public_key
        assert config.jwks_url is not None
        jwk, named = await self._jwk(config.jwks_url, kid, allowed_hosts)
        if named not in (None, alg):
            raise BadIdentity(f"the key {kid!r} is for {named}, not {alg}")
        return jwk.key

    async def _jwk(
        self, url: str, kid: Any, allowed_hosts: Callable[[], Collection[str]]
    ) -> tuple[jwt.PyJWK, str | None]:
        if kid is not None and not isinstance(kid, str):
            raise BadIdentity("the identity token's 'kid' must be text")
        keyset = self._sets.setdefault(url, _KeySet())
        now = self.clock()
        if not keyset.usable(now):
            if now < keyset.retry_at and not keyset.under_way:
                raise self._unavailable(keyset, now)
            await self._fetched(url, keyset, allowed_hosts)
        elif now - keyset.loaded_at > JWKS_TTL_SECONDS and now >= keyset.retry_at:
            self._start_fetch(url, keyset, allowed_hosts)  # meanwhile, the keys we hold
        found = self._pick(keyset, kid) if keyset.usable(self.clock()) else None
        if found is None and keyset.usable(self.clock()):
            now = self.clock()
            if keyset.under_way or (
                now - keyset.tried_at >= REFRESH_SECONDS and now >= keyset.retry_at
            ):
                # Once: the site may have rotated its keys since we read them.
                await self._fetched(url, keyset, allowed_hosts)
                found = self._pick(keyset, kid)
        if found is not None:
            return found
        if not keyset.usable(self.clock()):
            raise self._unavailable(keyset, self.clock())
        raise BadIdentity(f"the identity token names a key id the site does not publish ({kid!r})")

    def _unavailable(self, keyset: _KeySet, now: float) -> IdentityUnavailable:
        wait = max(1, math.ceil(max(keyset.retry_at, now) - now))
        return IdentityUnavailable(
            "the identity keys (JWKS) could not be read; try again", retry_after=wait
        )

    def _start_fetch(
        self, url: str, keyset: _KeySet, allowed_hosts: Callable[[], Collection[str]]
    ) -> asyncio.Task[None]:
        """The fetch of ``url`` under way, started now if none is."""
        task = keyset.fetching
        if task is None or task.done():
            task = keyset.fetching = asyncio.create_task(self._fetch(url, keyset, allowed_hosts))
        return task

    async def _fetched(
        self, url: str, keyset: _KeySet, allowed_hosts: Callable[[], Collection[str]]
    ) -> None:
        """Wait for the fetch under way (or one started now), shared with every other request
        waiting for it. A request that goes away (its client gone) stops waiting; the fetch
        goes on for the others (``shield``)."""
        await asyncio.shield(self._start_fetch(url, keyset, allowed_hosts))

    async def close(self) -> None:
        """Stop the fetches under way (the server is stopping)."""
        tasks = [k.fetching for k in self._sets.values() if k.fetching is not None]
        for keyset in self._sets.values():
            keyset.fetching = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @staticmethod
    def _pick(keyset: _KeySet, kid: str | None) -> tuple[jwt.PyJWK, str | None] | None:
        if kid is None:
            # No key id: only a set of one key says which.
            return next(iter(keyset.keys.values())) if len(keyset.keys) == 1 else None
        return keyset.keys.get(kid)

    async def _fetch(
        self, url: str, keyset: _KeySet, allowed_hosts: Callable[[], Collection[str]]
    ) -> None:
        """Read the JWKS into ``keyset``; on failure, keep the keys it had (logged) and back
        off. Run as the one task for its URL (``_start_fetch``)."""
        try:
            keyset.tried_at = self.clock()
            try:
                keys = await self._read(url, allowed_hosts)
            except Exception:  # the site's data is outside: whatever it does, we back off
                log.exception("identity: reading the JWKS at %s failed", url)
                keys = None
            if keys is None:
                keyset.failures += 1
                backoff = BACKOFF_SECONDS * 2 ** min(keyset.failures - 1, 16)
                keyset.retry_at = self.clock() + min(backoff, MAX_BACKOFF_SECONDS)
            else:
                keyset.keys, keyset.loaded_at = keys, keyset.tried_at
                keyset.failures, keyset.retry_at = 0, float("-inf")
        finally:
            if keyset.fetching is asyncio.current_task():
                keyset.fetching = None

    async def _read(
        self, url: str, allowed_hosts: Callable[[], Collection[str]]
    ) -> dict[str, tuple[jwt.PyJWK, str | None]] | None:
        """The keys the JWKS at ``url`` publishes, or None if it could not be read."""
        target = host_port(url)
        if target not in allowed_hosts():
            # The platform is read live: a host removed since the agent loaded is refused
            # here, before any connection.
            log.warning("identity: JWKS host %s is not allowed; keys not fetched", target)
            return None
        self.fetches[url] = self.fetches.get(url, 0) + 1
        try:
            # The whole exchange within the timeout: httpx's own bounds each read, and a
            # host that drips a byte at a time would pass every one of them.
            async with asyncio.timeout(self.fetch_timeout), self._client() as http:
                async with http.stream("GET", url, follow_redirects=False) as response:
                    if response.status_code != 200:
                        raise ValueError(f"status {response.status_code}")
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_JWKS_BYTES:
                            raise ValueError(f"larger than {MAX_JWKS_BYTES} bytes")
            data = strictjson.loads(bytes(body))
            keys = {}
            for raw in data.get("keys", []) if isinstance(data, dict) else []:
                try:
                    jwk = jwt.PyJWK.from_dict(raw)
                except (jwt.PyJWTError, ValueError, TypeError, KeyError):
                    continue  # a key of a type we do not use: others may still serve
                named = raw.get("alg")
                keys[str(raw.get("kid", ""))] = (jwk, named if isinstance(named, str) else None)
        except TimeoutError:
            log.warning("identity: the JWKS at %s did not arrive within %g s", url,
                        self.fetch_timeout)  # fmt: skip
            return None
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("identity: could not read the JWKS at %s: %s", url, exc)
            return None
        return keys
