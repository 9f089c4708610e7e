"""The identity block and the verification of visitors' identity tokens: every forgery and
mistake the site or an attacker can make is refused, with the reason, and a JWKS is read
only from an allowed host, once per rotation."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from hostcall.errors import HostcallError
from hostcall.visitors.identity import IdentityConfig, parse_identity
from hostcall.visitors.identity_tokens import (
    JWKS_STALE_SECONDS,
    JWKS_TIMEOUT_SECONDS,
    JWKS_TTL_SECONDS,
    MAX_TOKEN_BYTES,
    REFRESH_SECONDS,
    Identities,
)
from tests.support.clock import Clock as AppClock
from tests.support.harness import ORIGIN, Harness, allow_hosts
from tests.support.identity import (
    AUDIENCE,
    ISSUER,
    SECRET,
    SECRET_ENV,
    hmac_with_public_key,
    hs_token,
    jwks_server,
    public_pem,
    rs_token,
    rsa_key,
    slow_jwks,
    unsigned_token,
)
from tests.support.loopback import Trap

ENV = {SECRET_ENV: SECRET}
KEY = rsa_key()
OTHER_KEY = rsa_key()


class Clock:
    """The identities' clock, stopped where the test says: set at the wall clock, since a
    token's lifetime is read on it (the JWKS cache only counts the seconds between)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def config(raw: dict[str, Any], hosts: tuple[str, ...] = ()) -> IdentityConfig:
    block = {"issuer": ISSUER, "audience": AUDIENCE} | raw
    parsed, problems = parse_identity(
        block, "shop.json", ENV, allowed_env={SECRET_ENV}, allowed_hosts=lambda: hosts
    )
    assert parsed is not None, problems
    return parsed


def problems_of(raw: dict[str, Any], environ: dict[str, str] = ENV) -> list[str]:
    block = {"issuer": ISSUER, "audience": AUDIENCE} | raw
    parsed, problems = parse_identity(
        block, "shop.json", environ, allowed_env={SECRET_ENV}, allowed_hosts=lambda: ()
    )
    assert parsed is None
    return problems


HS = {"secret_env": SECRET_ENV}
RS = {"public_key": public_pem(KEY)}


async def refused(
    cfg: IdentityConfig,
    token: Any,
    code: str = "bad_identity",
    *,
    identities: Identities | None = None,
    allowed_hosts: Callable[[], Collection[str]] = lambda: (),
) -> str:
    with pytest.raises(HostcallError) as caught:
        await (identities or Identities()).verify(cfg, token, allowed_hosts=allowed_hosts)
    assert caught.value.code == code, caught.value.message
    return caught.value.message


# ---- the block -------------------------------------------------------------------------------


def test_a_block_names_exactly_one_key_source_and_what_it_needs() -> None:
    assert any("exactly one" in p for p in problems_of({}))
    assert any("exactly one" in p for p in problems_of(HS | RS))
    assert any("unknown key 'secret'" in p for p in problems_of(HS | {"secret": "x"}))
    assert any("'issuer' is required" in p for p in problems_of(HS | {"issuer": ""}))
    assert any("not set" in p for p in problems_of(HS, environ={}))
    assert any("too short" in p for p in problems_of(HS, environ={SECRET_ENV: "short"}))
    assert any("not listed" in p for p in problems_of({"secret_env": "OTHER_SECRET"}))
    assert any("server's own" in p for p in problems_of({"secret_env": "HOSTCALL_SECRET_KEYS"}))
    assert any("PEM public key" in p for p in problems_of({"public_key": "not a key"}))
    assert any("max_lifetime" in p for p in problems_of(HS | {"max_lifetime": 10**6}))
    assert any("leeway" in p for p in problems_of(HS | {"leeway": -1}))
    assert any("required" in p for p in problems_of(HS | {"required": "yes"}))


def test_algorithms_follow_the_key_and_none_is_never_one() -> None:
    assert config(HS).algorithms == ("HS256",)
    assert config(RS).algorithms == ("RS256",)
    assert any("'none'" in p for p in problems_of(HS | {"algorithms": ["none"]}))
    assert any(
        "'HS256' cannot be used with a public key" in p
        for p in problems_of(RS | {"algorithms": ["HS256"]})
    )
    assert any(
        "'RS256' cannot be used with a secret" in p
        for p in problems_of(HS | {"algorithms": ["RS256"]})
    )


def test_a_jwks_url_must_go_to_an_allowed_host() -> None:
    problems = problems_of({"jwks_url": "https://keys.example/jwks.json"})
    assert any("not in the 'allowed_hosts'" in p for p in problems)
    assert config({"jwks_url": "https://keys.example/jwks.json"}, ("keys.example:443",))


def test_the_secret_never_shows_in_the_config_s_text() -> None:
    assert SECRET not in repr(config(HS))


# ---- verifying -------------------------------------------------------------------------------


async def test_a_good_token_gives_its_sub_and_claims() -> None:
    found = await Identities().verify(config(HS), hs_token("ann", plan="pro"))
    assert (found.sub, found.claims["plan"]) == ("ann", "pro")
    found = await Identities().verify(config(RS), rs_token(KEY, "bob"))
    assert found.sub == "bob"


async def test_alg_none_is_refused() -> None:
    assert "'none' is not allowed" in await refused(config(HS), unsigned_token())
    assert "'none' is not allowed" in await refused(config(RS), unsigned_token())


async def test_a_public_key_is_never_used_as_an_hmac_secret() -> None:
    forged = hmac_with_public_key(KEY)
    assert "'HS256' is not allowed" in await refused(config(RS), forged)
    # Even a block that lists both families keeps the PEM key out of HMAC (PyJWT refuses).
    both = IdentityConfig(ISSUER, AUDIENCE, ("RS256", "HS256"), public_key=public_pem(KEY))
    await refused(both, forged)


async def test_a_wrong_key_is_refused() -> None:
    assert "signature" in await refused(config(HS), hs_token(secret="another-secret-" * 3))
    assert "signature" in await refused(config(RS), rs_token(OTHER_KEY))


async def test_expired_not_yet_valid_and_too_long_lived_tokens_are_refused() -> None:
    now = int(time.time())
    await refused(config(HS), hs_token(exp=now - 120), "expired_identity")
    assert "not valid yet" in await refused(config(HS), hs_token(nbf=now + 600))
    assert "too long" in await refused(config(HS), hs_token(exp=now + 2 * 86400))
    # Within the leeway, a little skew is forgiven both ways.
    await Identities().verify(config(HS), hs_token(exp=now - 5, nbf=now + 5))


async def test_a_tokens_lifetime_is_read_on_the_apps_clock() -> None:
    clock = AppClock()
    identities = Identities(clock=clock)
    token = hs_token(exp=int(time.time()) + 2 * 86400)
    assert "too long" in await refused(config(HS), token, identities=identities)
    # A day and more later by the app's clock, the same exp is within the block's lifetime.
    clock.advance(2 * 86400 - 60)
    assert (await identities.verify(config(HS), token)).sub == "ann"


async def test_a_missing_exp_or_sub_is_refused() -> None:
    no_exp = jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "ann"}, SECRET, algorithm="HS256")
    assert "'exp'" in await refused(config(HS), no_exp)
    no_sub = jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60}, SECRET, algorithm="HS256"
    )
    assert "'sub'" in await refused(config(HS), no_sub)
    assert "'sub'" in await refused(config(HS), hs_token("bad\nsub"))


async def test_a_wrong_audience_or_issuer_is_refused() -> None:
    assert "audience" in await refused(config(HS), hs_token(aud="someone-else"))
    assert "issued by" in await refused(config(HS), hs_token(iss="https://evil.example"))


async def test_an_oversized_or_malformed_token_is_refused_before_it_is_read() -> None:
    big = hs_token(padding="x" * MAX_TOKEN_BYTES)
    assert f"larger than {MAX_TOKEN_BYTES}" in await refused(config(HS), big)
    assert "not a JWT" in await refused(config(HS), "not.a.jwt")
    assert "required" in await refused(config(HS), None)


# ---- a JWKS ----------------------------------------------------------------------------------


async def test_a_jwks_is_read_once_and_refreshed_once_for_an_unknown_kid() -> None:
    with jwks_server(k1=KEY) as site:
        cfg = config({"jwks_url": site.url}, (f"127.0.0.1:{site.port}",))
        clock = Clock()
        identities = Identities(clock=clock)
        hosts = lambda: {f"127.0.0.1:{site.port}"}  # noqa: E731
        assert (
            await identities.verify(cfg, rs_token(KEY, kid="k1"), allowed_hosts=hosts)
        ).sub == "ann"
        await identities.verify(cfg, rs_token(KEY, "bob", kid="k1"), allowed_hosts=hosts)
        assert site.hits == 1  # cached

        clock.now += REFRESH_SECONDS
        forged = rs_token(OTHER_KEY, kid="k9")
        assert "k9" in await refused(cfg, forged, identities=identities, allowed_hosts=hosts)
        assert site.hits == 2  # one refresh, then refused
        assert "k8" in await refused(
            cfg, rs_token(OTHER_KEY, kid="k8"), identities=identities, allowed_hosts=hosts
        )
        assert site.hits == 2  # no refresh storm from forged key ids

        # The site rotates its keys: the new kid is found by the next refresh.
        site.keys["k2"] = OTHER_KEY
        clock.now += REFRESH_SECONDS
        assert (
            await identities.verify(cfg, rs_token(OTHER_KEY, kid="k2"), allowed_hosts=hosts)
        ).sub == "ann"
        assert site.hits == 3
        # A key of the set used with a token that another key signed: the signature fails.
        assert "signature" in await refused(
            cfg, rs_token(KEY, kid="k2"), identities=identities, allowed_hosts=hosts
        )


async def test_a_jwks_host_that_is_down_makes_identity_unavailable() -> None:
    trap = Trap()
    trap.close()  # nothing listens there any more
    url = f"http://127.0.0.1:{trap.port}/jwks.json"
    cfg = config({"jwks_url": url}, (f"127.0.0.1:{trap.port}",))
    hosts = lambda: {f"127.0.0.1:{trap.port}"}  # noqa: E731
    await refused(cfg, rs_token(KEY, kid="k1"), "identity_unavailable", allowed_hosts=hosts)


async def test_keys_already_read_serve_while_the_jwks_host_is_down() -> None:
    clock = Clock()
    identities = Identities(clock=clock)
    with jwks_server(k1=KEY) as site:
        cfg = config({"jwks_url": site.url}, (f"127.0.0.1:{site.port}",))
        hosts = lambda: {f"127.0.0.1:{site.port}"}  # noqa: E731
        await identities.verify(cfg, rs_token(KEY, kid="k1"), allowed_hosts=hosts)
    clock.now += 3600  # the cache is stale, and the host gone
    assert (await identities.verify(cfg, rs_token(KEY, kid="k1"), allowed_hosts=hosts)).sub == "ann"


async def test_a_jwks_host_no_longer_allowed_is_never_connected_to() -> None:
    trap = Trap()
    try:
        url = f"http://127.0.0.1:{trap.port}/jwks.json"
        cfg = config({"jwks_url": url}, (f"127.0.0.1:{trap.port}",))
        # The platform was tightened after the agent loaded: the host is no longer listed.
        await refused(
            cfg, rs_token(KEY, kid="k1"), "identity_unavailable", allowed_hosts=lambda: set()
        )
        assert trap.connections == 0
    finally:
        trap.close()


# ---- a JWKS host that hangs or fails ---------------------------------------------------------


def _short_client(seconds: float) -> Callable[[], httpx.AsyncClient]:
    return lambda: httpx.AsyncClient(trust_env=False, timeout=seconds)


async def _code_of(identities: Identities, cfg: IdentityConfig, token: str,
                   hosts: Callable[[], Collection[str]]) -> tuple[str, int | None]:  # fmt: skip
    try:
        await identities.verify(cfg, token, allowed_hosts=hosts)
    except HostcallError as exc:
        return exc.code, getattr(exc, "retry_after", None)
    return "ok", None


async def test_requests_waiting_for_a_hanging_jwks_host_share_one_fetch() -> None:
    clock = Clock()
    async with slow_jwks(k1=KEY) as site:
        # The host takes a whole fetch timeout to fail, by the identities' clock; the
        # client gives up after a fraction of a second of the test's.
        site.on_connect = lambda: setattr(clock, "now", clock.now + JWKS_TIMEOUT_SECONDS)
        identities = Identities(clock=clock, client=_short_client(0.5))
        cfg = config({"jwks_url": site.url}, (site.host,))
        hosts = lambda: {site.host}  # noqa: E731
        tokens = [rs_token(KEY, f"visitor-{i}", kid="k1") for i in range(12)]
        answers = await asyncio.gather(*(_code_of(identities, cfg, t, hosts) for t in tokens))
        # Every one answered by the one fetch: none waited behind another's.
        assert {code for code, _ in answers} == {"identity_unavailable"}
        assert site.connections == 1
        assert identities.fetches == {site.url: 1}
        await identities.close()


async def test_stale_keys_serve_while_their_refresh_hangs() -> None:
    clock = Clock()
    async with slow_jwks(k1=KEY) as site:
        identities = Identities(clock=clock)
        cfg = config({"jwks_url": site.url}, (site.host,))
        hosts = lambda: {site.host}  # noqa: E731
        site.answering.set()
        assert (await identities.verify(cfg, rs_token(KEY, kid="k1"), allowed_hosts=hosts)).sub
        # The keys' time is up and the host now hangs: visitors are not kept waiting.
        site.answering.clear()
        site.arrived.clear()
        clock.now += JWKS_TTL_SECONDS + 1
        tokens = [rs_token(KEY, f"visitor-{i}", kid="k1") for i in range(20)]
        answers = await asyncio.gather(*(_code_of(identities, cfg, t, hosts) for t in tokens))
        assert {code for code, _ in answers} == {"ok"}
        await site.arrived.wait()
        assert site.connections == 2  # one refresh for all twenty
        assert site.held == 1  # still hanging while they were answered
        # The site rotates its keys, and the hanging refresh comes back with them: a token
        # with the new key waits for that refresh, and no other fetch is made.
        site.keys["k2"] = OTHER_KEY
        site.answering.set()
        found = await identities.verify(cfg, rs_token(OTHER_KEY, kid="k2"), allowed_hosts=hosts)
        assert found.sub == "ann"
        assert site.connections == 2
        await identities.close()


async def test_a_failed_jwks_fetch_backs_off_and_fails_fast_meanwhile() -> None:
    clock = Clock()
    async with slow_jwks(k1=KEY) as site:
        site.status = 500
        identities = Identities(clock=clock)
        cfg = config({"jwks_url": site.url}, (site.host,))
        hosts = lambda: {site.host}  # noqa: E731
        token = rs_token(KEY, kid="k1")
        assert await _code_of(identities, cfg, token, hosts) == ("identity_unavailable", 5)
        assert site.connections == 1
        clock.now += 2  # within the back-off: answered at once, the host left alone
        assert await _code_of(identities, cfg, token, hosts) == ("identity_unavailable", 3)
        assert site.connections == 1
        clock.now += 3  # the back-off is over: one try, and a longer back-off after it fails
        assert await _code_of(identities, cfg, token, hosts) == ("identity_unavailable", 10)
        assert site.connections == 2
        clock.now += 9
        assert await _code_of(identities, cfg, token, hosts) == ("identity_unavailable", 1)
        assert site.connections == 2
        site.status = 200  # the host is back: the next try after the back-off reads the keys
        site.answering.set()
        clock.now += 1
        assert await _code_of(identities, cfg, token, hosts) == ("ok", None)
        assert site.connections == 3
        assert await _code_of(identities, cfg, token, hosts) == ("ok", None)
        assert site.connections == 3


async def test_a_jwks_host_that_drips_its_answer_is_cut_off_at_the_fetch_timeout() -> None:
    clock = Clock()
    async with slow_jwks(k1=KEY) as site:
        site.drip = True
        # Every byte comes well within httpx's read timeout: only a bound on the whole
        # exchange ends it.
        identities = Identities(clock=clock, fetch_timeout=0.3)
        cfg = config({"jwks_url": site.url}, (site.host,))
        hosts = lambda: {site.host}  # noqa: E731
        tokens = [rs_token(KEY, f"visitor-{i}", kid="k1") for i in range(5)]
        answers = await asyncio.gather(*(_code_of(identities, cfg, t, hosts) for t in tokens))
        assert answers == [("identity_unavailable", 5)] * 5
        assert site.connections == 1


async def test_keys_not_read_again_for_a_day_stop_working() -> None:
    clock = Clock()
    async with slow_jwks(k1=KEY) as site:
        identities = Identities(clock=clock)
        cfg = config({"jwks_url": site.url}, (site.host,))
        hosts = lambda: {site.host}  # noqa: E731
        site.answering.set()
        token = rs_token(KEY, kid="k1")
        assert await _code_of(identities, cfg, token, hosts) == ("ok", None)
        site.status = 500  # the host fails from now on
        clock.now += JWKS_TTL_SECONDS + 1
        assert await _code_of(identities, cfg, token, hosts) == ("ok", None)  # stale, served
        await identities.close()
        # A day on, the site may have withdrawn that key: without its host, nothing is used.
        clock.now += JWKS_STALE_SECONDS
        assert await _code_of(identities, cfg, token, hosts) == ("identity_unavailable", 5)
        assert site.connections >= 2


def test_visitors_behind_a_failing_jwks_host_get_one_fetch_and_a_back_off(
    tmp_path: Path, agents_dir: Path
) -> None:
    """Through the app: concurrent visitors share one fetch, get ``503`` with the wait in
    ``Retry-After``, and the back-off runs on the app's clock."""
    h = Harness(tmp_path, agents_dir)

    async def scenario() -> None:
        async with slow_jwks(k1=KEY) as site:
            path = agents_dir / "planner.json"
            data = json.loads(path.read_text())
            data["identity"] = {"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": site.url}
            path.write_text(json.dumps(data))
            allow_hosts(agents_dir, site.url)
            h.runtime.reload_agents()
            # The host takes a fetch timeout (by the app's clock) to fail.
            site.on_connect = lambda: h.clock.advance(JWKS_TIMEOUT_SECONDS)
            site.status = 500
            transport = httpx.ASGITransport(app=h.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:

                async def create(sub: str) -> httpx.Response:
                    headers = ORIGIN | {"Hostcall-Identity": rs_token(KEY, sub, kid="k1")}
                    return await c.post("/api/agents/planner/conversations", headers=headers)

                answers = await asyncio.gather(*(create(f"visitor-{i}") for i in range(12)))
                for r in answers:
                    assert r.status_code == 503, r.text
                    assert r.json()["error"]["code"] == "identity_unavailable"
                    assert r.headers["Retry-After"] == "5"
                assert site.connections == 1
                h.clock.advance(2)  # within the back-off: no connection
                assert (await create("ann")).headers["Retry-After"] == "3"
                assert site.connections == 1
                h.clock.advance(3)  # past it: one more try, which the host now answers
                site.status = 200
                site.answering.set()
                assert (await create("ann")).status_code == 201
                assert site.connections == 2
            await h.runtime.identities.close()

    try:
        h.call(scenario)
    finally:
        h.stop()
