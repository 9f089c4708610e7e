"""Widget sessions: a server-set, script-proof cookie, bound to the page's key, rotated on
every resume.

Before, the widget kept its session token in a cookie it wrote itself: any page on another
port of Hostcall's host could read it with ``document.cookie`` (cookies ignore ports) and
act as the visitor, or plant its own so the visitor's chat went into its conversation.

Now the server sets the cookie, ``HttpOnly; Secure; SameSite=None; Partitioned`` (CHIPS),
with ``Path`` narrowed to the agent's endpoints that read it, ``/api/agents/{agent}/``
(resume, identify, create, open). No script can read it; the widget holds its tokens in
memory only. The cookie is named for the embedding page's origin, so two sites (or two
ports) that embed one agent never share a conversation. (A script of the embedding page
cannot make its own fetches carry it with the key: the API answers no CORS preflight and
takes only ``application/json`` bodies, hostcall/protocol/reading.py.)

A cookie alone never authorizes. It still reaches any server on another port of the host
(cookies ignore ports: a neighbour there gets it with every request the visitor's browser
sends it), so it is not a session token (its own purpose, ``resume``) and it resumes only
with the page's *resume key*: a random secret the page keeps where only its own origin reads
it (the embedding page's storage, through the loader; the widget's own storage standalone),
sent in the body, whose digest the cookie binds. A neighbour replaying a cookie it caught
has no key and gets ``no_session``, with nothing changed.

Fixation: a same-host neighbour with its own server can still *set* a cookie (HTTP
``Set-Cookie`` ignores ports too), holding a session it got for a conversation of its own.
Bound to the planter's key, it does not resume with the visitor's. And resuming moves the
conversation to its next *session generation*: every token of the previous one (a copy
anyone kept included) is refused from then on with ``session_replaced``. Resuming is only
for the widget's own page: a request from any other origin is refused.

Tabs: every tab of the browser shares the cookie, so one tab's resume replaces the
session the others hold. Such a tab resumes again, and sends the token it held with the
cookie: the current cookie *and* a session token of the same conversation prove a tab
that was already in it, so it gets the current generation without another rotation.
Rotating there replaced its sibling in turn, whose resume replaced it back, a churn in
which two tabs sooner or later resumed with the same cookie at once and the loser, its
cookie now one generation behind, was refused. This keeps the fixation guarantee: once the
visitor has resumed, the current cookie exists only in the visitor's HttpOnly jar, so no
planter can present it; a cookie of any older generation is refused, with or without a
token. A page that presents only the cookie (a new page, a reload) still rotates.

Browsers: a visitor's anonymous history is the conversations of their *browser*, a random id
the server makes on the browser's first conversation and keeps in this cookie (and in the
session tokens it hands out, so that routes the cookie is not sent to can set it again). It
is never derived from the resume key: the key sits in the host page's storage, where any
script of the page, an extension or the next person at the computer reads it, so a key
alone must open nothing. A new conversation joins this browser's history only with the
cookie *and* the key it binds (``this_browser``); with either alone it starts a new, empty
history. Conversations stored before browsers had such an id keep a digest of the key as
their browser, which no id made now equals: they no longer appear in any history.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import replace
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hostcall.agents import Agent
from hostcall.errors import (
    BadRequest,
    Forbidden,
    HostcallError,
    NotFound,
    NothingToResume,
    Unauthorized,
)
from hostcall.origins import check_request_origin
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.requests import ResumeSession, read_body
from hostcall.protocol.responses import AgentCard, ConversationOpened, ToolCard
from hostcall.responses import WireResponse
from hostcall.store.interfaces import Conversations
from hostcall.store.interfaces import Sessions as SessionRows
from hostcall.store.records import Conversation
from hostcall.tokens import Claims, Purpose, Tokens


class _SessionStore(Conversations, SessionRows, Protocol):
    """A session's conversation, and its generation to rotate."""


class Sessions:
    def __init__(self, tokens: Tokens, store: _SessionStore, *, max_age: int) -> None:
        self.tokens = tokens
        self.store = store
        self.max_age = max_age

    # ---- tokens ---------------------------------------------------------------------------

    def token(
        self,
        conversation: Conversation,
        generation: int | None = None,
        *,
        browser: str | None = None,
    ) -> str:
        gen = conversation.session_generation if generation is None else generation
        claims = Claims(
            conversation.id, generation=gen, person=conversation.person, browser=browser
        )
        return self.tokens.sign(Purpose.SESSION, claims)

    def stream_ticket(
        self, conversation_id: str, generation: int, person: str | None = None
    ) -> str:
        """A stream token that opens one stream, once, within ``stream_max_age``: it
        travels in a URL, so whoever sees it later (a log, a proxy) can do nothing. It
        belongs to one session generation, like the session token it was got with."""
        nonce = secrets.token_urlsafe(12)
        claims = Claims(conversation_id, nonce=nonce, generation=generation, person=person)
        return self.tokens.sign(Purpose.STREAM, claims)

    def check_generation(self, conversation: Conversation, claims: Claims) -> None:
        if claims.generation != conversation.session_generation:
            raise Unauthorized(
                "this session was resumed elsewhere since this token was issued; resume it again",
                code=ErrorCode.SESSION_REPLACED,
            )
        if conversation.person is not None and claims.person != conversation.person:
            # Adoption moves a conversation to its next generation, so a token from before
            # it fails above; this holds the line whatever the generation.
            raise Forbidden(
                "this session token was not issued to the person this conversation belongs to",
                code=ErrorCode.WRONG_PERSON,
            )

    def opened(
        self,
        conversation: Conversation,
        agent: Agent,
        *,
        browser: str | None,
        generation: int | None = None,
    ) -> ConversationOpened:
        """What a widget needs to run a conversation: its tokens and the agent. ``browser``:
        the browser the session token is issued to (its history), None for none."""
        tools = tuple(
            ToolCard(
                name=t.name,
                kind=t.kind,
                description=t.description,
                input_schema=t.input_schema,
                output_schema=t.output_schema,
                require_confirmation=t.require_confirmation,
                title=t.title or t.name,
                effect=t.effect,
                rerunnable=t.rerunnable,
            )
            for t in agent.tools
        )
        return ConversationOpened(
            conversation_id=conversation.id,
            session_token=self.token(conversation, generation, browser=browser),
            stream_token=self.stream_ticket(
                conversation.id,
                conversation.session_generation if generation is None else generation,
                conversation.person,
            ),
            agent=AgentCard(agent.id, agent.name, agent.greeting, tools),
            person=conversation.person,
        )

    # ---- the cookie ------------------------------------------------------------------------

    @staticmethod
    def parent_origin(parent: str, agent: Agent) -> str:
        """The page the widget is embedded in (``""`` standalone): names the cookie."""
        if parent and parent not in agent.allowed_origins:
            raise BadRequest(
                "field 'parentOrigin' must be one of the agent's allowed origins",
                field="parentOrigin",
            )
        return parent

    @staticmethod
    def binding(key: str) -> str:
        """What a cookie keeps of the page's key: a digest (the cookie never holds the key)."""
        return hashlib.sha256(key.encode()).hexdigest()[:32]

    @staticmethod
    def new_browser() -> str:
        """A browser's id, made on its first conversation: random, so only its cookie has it."""
        return secrets.token_hex(16)

    def this_browser(
        self, request: Request, parent: str, key: str, *, held: Claims | None = None
    ) -> str:
        """The browser a request comes from: the one its cookie carries, if that cookie binds
        the page's ``key``; else the one of the current session token this tab ``held``;
        else a new browser, with an empty history. The key alone names none (see the
        module's docstring), and neither does a cookie caught without its key."""
        claims = self._claims(request.cookies.get(self.cookie_name(parent)), Purpose.RESUME)
        if (
            claims is not None
            and claims.browser is not None
            and claims.binding is not None
            and key
            and hmac.compare_digest(claims.binding, self.binding(key))
        ):
            return claims.browser
        if held is not None and held.browser is not None:
            return held.browser
        return self.new_browser()

    @staticmethod
    def cookie_name(parent: str) -> str:
        return "hc_session_" + hashlib.sha256(parent.encode()).hexdigest()[:16]

    def set_cookie(
        self,
        response: Response,
        conversation: Conversation,
        agent: Agent,
        parent: str,
        *,
        binding: str,
        browser: str,
        generation: int | None = None,
    ) -> None:
        gen = conversation.session_generation if generation is None else generation
        claims = Claims(conversation.id, generation=gen, binding=binding, browser=browser)
        value = self.tokens.sign(Purpose.RESUME, claims)
        # Do not loosen these attributes: HttpOnly keeps it from every script, Partitioned
        # (CHIPS) keeps it to this embedding site, the Path to the agent's endpoints that
        # read it (resume, identify, create, open; never the conversation's own API).
        response.headers.append(
            "set-cookie",
            f"{self.cookie_name(parent)}={value}; Max-Age={self.max_age}; "
            f"Path=/api/agents/{agent.id}; HttpOnly; Secure; SameSite=None; Partitioned",
        )

    # ---- resuming --------------------------------------------------------------------------

    async def resume(
        self,
        cookie: str | None,
        agent: Agent,
        key: str,
        *,
        held: str | None = None,
        person: str | None = None,
    ) -> tuple[Conversation, Claims]:
        """The conversation the cookie names and the cookie's claims to hand out, or NotFound.
        The claims keep the cookie's browser (a cookie from before browsers had ids gets a
        new one: see the module's docstring).

        ``key`` is the page's resume key: the cookie resumes only with the one it binds.
        ``held`` is the session token the resuming tab held, if any: with the current
        cookie it keeps the generation (see the module's docstring); otherwise the
        conversation moves to its next one. ``person``: the verified ``sub`` the page
        identified its visitor as, if it did; a person's conversation resumes only for them
        (after ``logout``, or for someone else in this browser, the cookie opens nothing).
        """
        gone = NothingToResume("no conversation to resume in this browser")
        claims = self._claims(cookie, Purpose.RESUME)
        # Checked first, before the store is read: a cookie without its key says nothing.
        if claims is None or not key or claims.binding is None:
            raise gone
        if not hmac.compare_digest(claims.binding, self.binding(key)):
            raise gone
        conversation = await self.store.get_conversation(claims.conversation_id)
        if conversation is None or conversation.agent_id != agent.id:
            raise gone
        if conversation.person is not None and conversation.person != person:
            raise gone  # before anything changes: the conversation is someone else's
        if conversation.person is None and agent.identity and agent.identity.required:
            raise gone  # an agent that now requires identity keeps no anonymous visitor
        # A cookie of an older generation is refused, whoever sends it; said so, because a
        # tab that resumed at the same instant as another sent the same cookie: once the
        # other's new cookie has landed in the browser, asking again succeeds (api.js does).
        superseded = NotFound(
            "this browser's session was resumed since this cookie was set",
            code=ErrorCode.NO_SESSION,
            superseded=True,
        )
        if claims.generation != conversation.session_generation:
            raise superseded
        claims = replace(claims, browser=claims.browser or self.new_browser())
        if self._was_in(conversation, self._claims(held, Purpose.SESSION)):
            return conversation, claims
        if not await self.store.rotate_session(conversation.id, claims.generation):
            raise superseded
        # Do not "fix" this by ending the conversation's open streams: the visitor's other
        # tabs share the conversation, and each of their resumes would end the rest, a storm
        # that never settles. Old tokens and tickets are refused for every new request; a
        # stream already open runs until it disconnects.
        return conversation, replace(claims, generation=claims.generation + 1)

    def _claims(self, token: str | None, purpose: Purpose) -> Claims | None:
        if not token:
            return None
        try:
            return self.tokens.verify(purpose, token)
        except HostcallError:
            return None

    @staticmethod
    def _was_in(conversation: Conversation, held: Claims | None) -> bool:
        """A tab already in this conversation: a session token of it, of this generation or
        an earlier one (an expired or foreign token, or none, proves nothing)."""
        return (
            held is not None
            and held.conversation_id == conversation.id
            and 0 <= held.generation <= conversation.session_generation
        )


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer`` header, if there is one."""
    header = request.headers.get("authorization", "")
    return (header[7:].strip() or None) if header.lower().startswith("bearer ") else None


async def resume_session(request: Request) -> Response:
    runtime = request.app.state.hostcall
    agent_id = request.path_params["agent_id"]
    agent = runtime.agents.get(agent_id)
    if agent is None:
        raise NotFound(f"no agent {agent_id!r}", code=ErrorCode.UNKNOWN_AGENT)
    # Only the widget's own page resumes: its fetches carry Hostcall's own origin.
    check_request_origin(request, (), required=True)
    body = await read_body(request, ResumeSession, runtime.settings.max_body_bytes)
    sessions: Sessions = runtime.sessions
    parent = sessions.parent_origin(body.parent_origin, agent)
    cookie = request.cookies.get(sessions.cookie_name(parent))
    identity = await runtime.identities.of_request(request, agent)
    try:
        conversation, claims = await sessions.resume(
            cookie,
            agent,
            body.resume_key,
            held=bearer_token(request),
            person=identity.sub if identity else None,
        )
    except NothingToResume:
        return Response(status_code=204)  # a first visit: nothing changed, nothing to say
    generation, browser = claims.generation, claims.browser
    response = WireResponse(
        sessions.opened(conversation, agent, browser=browser, generation=generation)
    )
    assert claims.binding is not None and browser is not None  # resume checked and set them
    sessions.set_cookie(
        response,
        conversation,
        agent,
        parent,
        binding=claims.binding,
        browser=browser,
        generation=generation,
    )
    return response


def session_routes() -> list[BaseRoute]:
    return [Route("/api/agents/{agent_id}/session", resume_session, methods=["POST"])]
