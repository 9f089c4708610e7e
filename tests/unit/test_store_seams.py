"""Each consumer of the store names the slice it uses (a protocol of
hostcall/store/interfaces.py, or its own union of a few): the whole ``Store`` is held only by
the composition root, hostcall/runtime.py and the wiring it builds its parts with
(hostcall/wiring.py), which hand each part its slice
(docs/architecture.md, "Layout and layers"). A part that took the whole store, or reached it
through another part (``journal.store``), could grow into any aggregate unseen."""

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

import hostcall
from hostcall.store import Store, rows
from hostcall.store.postgres import PostgresStore
from hostcall.store.sqlite import SQLiteStore

PACKAGE = Path(hostcall.__file__).parent
# The store itself, and the composition root that opens it and hands out its slices.
HOME = ("store/", "runtime.py", "wiring.py")


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(PACKAGE))
        if not name.startswith(HOME):
            yield name, ast.parse(path.read_text(encoding="utf-8"), name)


def _annotations(tree: ast.Module) -> Iterator[ast.expr]:
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            yield node.annotation
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            yield node.returns


def _names_store(annotation: ast.expr) -> bool:
    for node in ast.walk(annotation):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                if _names_store(ast.parse(node.value, mode="eval").body):
                    return True
            except SyntaxError:
                continue
        if (isinstance(node, ast.Name) and node.id == "Store") or (
            isinstance(node, ast.Attribute) and node.attr == "Store"
        ):
            return True
    return False


def test_no_consumer_outside_the_root_takes_the_whole_store() -> None:
    found = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "hostcall.store"
                and any(alias.name == "Store" for alias in node.names)
            ):
                found.append(f"{name}:{node.lineno}: imports Store")
        for annotation in _annotations(tree):
            if _names_store(annotation):
                found.append(f"{name}:{annotation.lineno}: {ast.unparse(annotation)}")
    assert found == [], "take the protocol of the slice you use instead:\n" + "\n".join(found)


def test_no_part_reaches_the_store_through_the_journal() -> None:
    """The journal holds only what a unit needs (transactions, events); a part that needs more
    is handed its slice by the root instead of borrowing the journal's."""
    found = [
        f"{name}:{node.lineno}: {ast.unparse(node)}"
        for name, tree in _modules()
        if name != "journal.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "store"
        and isinstance(node.value, ast.Attribute | ast.Name)
        and (node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id)
        == "journal"
    ]
    assert found == [], "take a store slice in the constructor instead:\n" + "\n".join(found)


@pytest.mark.parametrize("dialect", [SQLiteStore, PostgresStore], ids=["sqlite", "postgres"])
def test_every_store_method_reaches_a_part_not_its_protocols_stub(dialect: type) -> None:
    """A dialect that subclasses the protocols and misses a method inherits the protocol's
    ``...`` body, which returns None instead of failing: each method must be the dialect's
    own or a ``forward`` to one of its parts (hostcall/store/composed.py)."""
    stubs = [
        f"{aggregate.__name__}.{name}"
        for aggregate in Store.__mro__
        if aggregate.__module__ == "hostcall.store.interfaces"
        for name, member in vars(aggregate).items()
        if inspect.isfunction(member) and inspect.getattr_static(dialect, name) is member
    ]
    assert stubs == []


def test_an_empty_object_or_list_read_back_is_a_new_one_each_time() -> None:
    # Read without a parse (the settling unit's row, a history's tool calls): still never
    # one shared value that a caller's change would leak into every later read.
    found = rows.load("{}")
    found["changed"] = True
    assert rows.load("{}") == {} and rows.load(" {}") == {}
    listed = rows.load("[]")
    listed.append(1)
    assert rows.load("[]") == [] and rows.load('["a"]') == ["a"]
