"""What a console reader reads when something is refused: every error code the console can
answer has a sentence in each of its four languages, and pages use it (the role error read
in Japanese is Japanese)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import hostcall.console
from hostcall import errors
from hostcall.console.agent_files import AgentRejected
from hostcall.console.text import CONSOLE_ERRORS, LOCALES, TEXT, error_sentence
from tests.support.harness import Harness
from tests.unit.console_client import ConsoleClient, fast_passwords

pytestmark = pytest.mark.usefixtures(fast_passwords.__name__)

CONSOLE = Path(hostcall.console.__file__).parent
#: The ledger's refusals the console's actions meet (answer, approve, reject, expire).
LEDGER_CODES = {"call_already_settled", "call_not_awaiting_decision", "invalid_input",
                "invalid_result", "call_expired", "bad_request"}  # fmt: skip


def raised_codes() -> set[str]:
    """The error codes the console's modules raise: an explicit ``code=``, else the class's."""
    classes = {name: getattr(errors, name) for name in dir(errors)}
    classes["AgentRejected"] = AgentRejected
    found: set[str] = set()
    for path in CONSOLE.glob("*.py"):
        if path.name in ("accounts.py", "users_command.py"):  # the command line's, not a page's
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                continue
            func = node.exc.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            explicit = [k.value for k in node.exc.keywords if k.arg == "code"]
            if explicit and isinstance(explicit[0], ast.Attribute):
                found.add(errors.ErrorCode[explicit[0].attr].value)
            elif isinstance(classes.get(name), type) and issubclass(classes[name], Exception):
                found.add(classes[name].code.value)
    return found


def test_every_error_the_console_raises_has_a_sentence_in_every_language() -> None:
    codes = raised_codes() | LEDGER_CODES
    assert {"role_required", "csrf_failed", "not_signed_in", "agent_invalid"} <= codes
    assert codes - {c.value for c in CONSOLE_ERRORS} == set(), "add them to CONSOLE_ERRORS"
    for lang in LOCALES:
        for code in CONSOLE_ERRORS:
            assert TEXT[lang].get(f"error_{code}"), (lang, code)


def test_the_role_error_names_the_roles_in_the_readers_language() -> None:
    details = {"role": "designer", "account": "olga", "current": "operator"}
    assert error_sentence("ja", "role_required", details) == (
        "この操作にはデザイナーの役割が必要です。olga はオペレーターです。"
    )
    assert error_sentence("fr", "role_required", details) == (
        "Il faut le rôle concepteur ; olga a le rôle opérateur."
    )
    assert error_sentence("en", "bad_request", {"field": "scope"}) == (
        "The request was not valid: check “scope”."
    )
    assert error_sentence("es", "no_such_code", {}) is None  # the server's words, then


@pytest.mark.parametrize(
    ("lang", "said"),
    [("ja", "この操作にはデザイナーの役割が必要です。olga はオペレーターです。"),
     ("es", "Esto necesita el rol diseñador; olga tiene el rol operador."),
     ("en", "This needs the designer role; olga is operator.")],
)  # fmt: skip
def test_a_page_refused_for_its_role_says_so_in_the_readers_language(
    harness: Harness, lang: str, said: str
) -> None:
    olga = ConsoleClient(harness.app, harness.runtime, "olga", "operator")
    r = olga.http.get("/console/agents", params={"lang": lang})
    assert r.status_code == 403
    assert said in r.text
    if lang != "en":
        assert "this needs the designer role" not in r.text
    # The API keeps the code and the server's own words, with what a page needs to say it.
    api = olga.post("/console/api/agents/planner/check", {"agent": {}})
    assert api.status_code == 403
    error = api.json()["error"]
    assert error["code"] == "role_required"
    assert error["details"] == {"role": "designer", "account": "olga", "current": "operator"}


def _cells(html: str, tag: str) -> list[str]:
    """The text of each ``tag`` element (its own and its children's), spaces folded."""
    found = re.findall(rf"<{tag}\b[^>]*>(.*?)</{tag}>", html, flags=re.S)
    texts = [" ".join(re.sub(r"<[^>]+>", " ", f).split()) for f in found]
    return [t for t in texts if t]


@pytest.mark.parametrize("lang", LOCALES)
def test_the_conversation_lists_filters_and_columns_each_have_their_own_name(
    harness: Harness, lang: str
) -> None:
    """The handoff's state, the signed-in visitor and the calls waiting for an answer are three
    things: a reader who sees two filters of the same name cannot tell which one filters what."""
    olga = ConsoleClient(harness.app, harness.runtime, "olga", "operator")
    html = olga.http.get("/console/conversations", params={"lang": lang}).text
    form = html.split('data-part="filters"', 1)[1].split("</form>", 1)[0]
    filters = _cells(re.sub(r"<select\b.*?</select>", "", form, flags=re.S), "label")
    columns = _cells(html, "th")
    assert len(filters) >= 7 and len(columns) >= 9, (filters, columns)
    assert len(set(filters)) == len(filters), filters
    assert len(set(columns)) == len(columns), columns
    t = TEXT[lang]
    assert t["filter_handoff"] != t["filter_person"] and t["col_handoff"] != t["col_person"]
    if lang == "en":
        # The box keeps the conversations with a call to answer, not those asking for a person.
        assert "Calls waiting for an answer" in filters
        assert "Waiting for a person" not in html
