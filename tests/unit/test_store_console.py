"""The store's console records: users, audit log, conversation list, agent versions.

Real SQLite files and a real PostgreSQL schema (conftest's ``store`` runs each test on both).
"""

from __future__ import annotations

from dataclasses import replace

from hostcall.store import Store
from hostcall.store.console_records import (
    AgentVersion,
    AuditEntry,
    ConsoleSession,
    ConversationQuery,
    User,
)
from hostcall.store.records import Call, CallState, Conversation, Run, RunStatus, StoredMessage


async def _conversation(store: Store, cid: str, at: float, agent: str = "planner") -> None:
    await store.create_conversation(Conversation(cid, agent, at))


async def _call(store: Store, cid: str, call_id: str, state: CallState, route: str) -> None:
    await store.add_call(Call(call_id, cid, f"r_{cid}", 1, "t", state, {}, "{}", 0.0, route=route))


async def test_user_names_are_unique_and_the_first_account_stays(store: Store) -> None:
    assert await store.add_user(User("ada", "admin", "hash-1", 1.0))
    assert not await store.add_user(User("ada", "operator", "hash-2", 2.0))
    assert await store.get_user("ada") == User("ada", "admin", "hash-1", 1.0)
    assert await store.get_user("nobody") is None
    await store.add_user(User("bob", "operator", "h", 3.0))
    assert [u.name for u in await store.list_users()] == ["ada", "bob"]


async def test_user_changes_end_that_users_sessions_only(store: Store) -> None:
    await store.add_user(User("ada", "admin", "hash-1", 1.0))
    await store.add_user(User("bob", "operator", "h", 1.0))
    for digest, user in (("a1", "ada"), ("a2", "ada"), ("b1", "bob")):
        await store.add_session(ConsoleSession(digest, user, 10.0, 100.0))
    assert await store.session_user("a1", 50.0) == "ada"
    assert await store.session_user("a1", 100.0) is None  # expired
    assert await store.set_user_role("ada", "operator")
    assert (await store.get_user("ada")) == User("ada", "operator", "hash-1", 1.0)
    assert await store.session_user("a1", 50.0) is None
    assert await store.session_user("a2", 50.0) is None
    assert await store.session_user("b1", 50.0) == "bob"
    await store.add_session(ConsoleSession("a3", "ada", 20.0, 100.0))
    assert await store.set_user_password("ada", "hash-2")
    assert (await store.get_user("ada")) == User("ada", "operator", "hash-2", 1.0)
    assert await store.session_user("a3", 50.0) is None
    await store.add_session(ConsoleSession("b2", "bob", 20.0, 100.0))
    assert await store.end_session("b2") and not await store.end_session("b2")
    assert await store.session_user("b1", 50.0) == "bob"
    assert await store.remove_user("bob")
    assert await store.get_user("bob") is None and await store.session_user("b1", 50.0) is None
    for change in (store.remove_user("nobody"), store.set_user_role("nobody", "admin"),
                   store.set_user_password("nobody", "h")):  # fmt: skip
        assert not await change
    # Adding a session drops the expired ones.
    await store.add_session(ConsoleSession("old", "ada", 30.0, 40.0))
    await store.add_session(ConsoleSession("new", "ada", 50.0, 90.0))
    assert await store.session_user("old", 35.0) is None
    assert [u.name for u in await store.list_users()] == ["ada"]


async def test_audit_entries_get_increasing_ids_and_list_newest_first(store: Store) -> None:
    first = await store.add_audit(AuditEntry(1.0, "ada", "login"))
    second = await store.add_audit(
        AuditEntry(2.0, "ada", "call.answer", conversation_id="c1", call_id="k1",
                   details={"output": {"ok": True}})
    )  # fmt: skip
    await store.add_audit(AuditEntry(3.0, "bob", "agent.save", agent_id="planner"))
    assert 0 < first.id < second.id
    assert [e.action for e in await store.list_audit()] == ["agent.save", "call.answer", "login"]
    assert await store.list_audit(conversation_id="c1") == [second]
    assert [e.action for e in await store.list_audit(agent_id="planner")] == ["agent.save"]
    assert [e.id for e in await store.list_audit(before=second.id)] == [first.id]
    assert len(await store.list_audit(limit=1)) == 1


async def test_conversations_list_newest_first_with_status_waiting_and_preview(
    store: Store,
) -> None:
    await _conversation(store, "c_old", 1.0)
    await _conversation(store, "c_mid", 2.0, agent="other")
    await _conversation(store, "c_new", 3.0)
    await store.create_run(Run("r_c_new", "c_new", {}, RunStatus.WAITING))
    await store.add_message(StoredMessage("m1", "c_new", "r_c_new", "user", "Add a task 100%_done"))
    await _call(store, "c_new", "k1", CallState.DELIVERED, "form")
    await _call(store, "c_new", "k2", CallState.AWAITING_CONFIRMATION, "handler")
    await _call(store, "c_new", "k3", CallState.DISPATCHED, "handler")  # the page answers this one
    await store.create_run(Run("r_c_mid", "c_mid", {}, RunStatus.FINISHED))
    await _call(store, "c_mid", "k4", CallState.ANSWERED, "form")

    everything = await store.list_conversations(ConversationQuery())
    assert [s.conversation.id for s in everything] == ["c_new", "c_mid", "c_old"]
    newest = everything[0]
    assert (newest.run_status, newest.waiting_calls, newest.first_message) == (
        RunStatus.WAITING, 2, "Add a task 100%_done",
    )  # fmt: skip
    assert (everything[2].run_status, everything[2].waiting_calls) == (None, 0)

    async def ids(**query: object) -> list[str]:
        found = await store.list_conversations(ConversationQuery(**query))  # type: ignore[arg-type]
        return [s.conversation.id for s in found]

    assert await ids(waiting=True) == ["c_new"]
    assert await ids(agent_id="other") == ["c_mid"]
    assert await ids(run_status=RunStatus.FINISHED) == ["c_mid"]
    assert await ids(text="A TASK") == ["c_new"]
    assert await ids(text="100%_d") == ["c_new"]
    assert await ids(text="%") == ["c_new"]  # a literal percent sign, not a wildcard
    assert await ids(text="c_ol") == ["c_old"]
    assert await ids(limit=2, offset=1) == ["c_mid", "c_old"]
    assert await ids(agent_id="planner", waiting=True, text="nothing like this") == []


async def test_agent_versions_count_from_one_per_agent(store: Store) -> None:
    one = await store.add_agent_version(
        AgentVersion("planner", 99, '{"a":1}', "ada", 1.0, "created")
    )
    two = await store.add_agent_version(AgentVersion("planner", 0, '{"a":2}', "bob", 2.0))
    other = await store.add_agent_version(AgentVersion("other", 0, "{}", "ada", 3.0))
    assert (one.version, two.version, other.version) == (1, 2, 1)
    assert await store.list_agent_versions("planner") == [two, one]
    assert await store.get_agent_version("planner", 1) == one
    assert await store.get_agent_version("planner", 3) is None


async def test_runs_of_a_conversation_list_oldest_first(store: Store) -> None:
    await _conversation(store, "c1", 1.0)
    await _conversation(store, "c2", 2.0)
    await store.create_run(Run("r1", "c1", {}, RunStatus.FINISHED))
    await store.create_run(Run("r2", "c2", {}, RunStatus.RUNNING))
    await store.create_run(Run("r3", "c1", {}, RunStatus.WAITING))
    assert [(r.id, r.status) for r in await store.list_runs("c1")] == [
        ("r1", RunStatus.FINISHED), ("r3", RunStatus.WAITING),
    ]  # fmt: skip
    assert await store.list_runs("nobody") == []


async def test_a_noted_audit_entry_is_stored_with_its_transaction_or_not_at_all(
    store: Store,
) -> None:
    visitor = AuditEntry(1.0, "visitor", "call.approve", conversation_id="c1", call_id="k1",
                         details={"edited": False, "scope": "once"})  # fmt: skip
    await store.note_audit(visitor)  # outside a transaction: on its own
    async with store.transaction():
        await store.add_message(StoredMessage("m1", "c1", "r1", "user", "hi"))
        await store.note_audit(AuditEntry(2.0, "visitor", "call.answer", "c1", "k2"))
    try:
        async with store.transaction():
            await store.note_audit(AuditEntry(3.0, "visitor", "call.reject", "c1", "k3"))
            raise RuntimeError("the move failed")
    except RuntimeError:
        pass
    found = await store.list_audit()
    assert [(e.action, e.call_id) for e in found] == [("call.answer", "k2"), ("call.approve", "k1")]
    assert found[1] == replace(visitor, id=found[1].id)
    assert found[0].id > found[1].id


async def test_known_people_are_the_signed_in_persons_last_active_first(store: Store) -> None:
    for cid, agent, person, at in [("c1", "planner", "ann", 10.0), ("c2", "planner", "bob", 20.0),
                                   ("c3", "planner", "ann", 30.0), ("c4", "desk", "ann", 15.0),
                                   ("c5", "planner", None, 40.0)]:  # fmt: skip
        await store.create_conversation(Conversation(cid, agent, at, person=person))
        await store.touch_conversation(cid, at)
    everyone = await store.known_people()
    assert [(p.agent_id, p.person, p.conversations, p.last_at) for p in everyone] == [
        ("planner", "ann", 2, 30.0),
        ("planner", "bob", 1, 20.0),
        ("desk", "ann", 1, 15.0),
    ]
    assert [p.person for p in await store.known_people("planner", limit=1, offset=1)] == ["bob"]
    assert [p.agent_id for p in await store.known_people("desk")] == ["desk"]
    assert await store.known_people("nobody") == []
