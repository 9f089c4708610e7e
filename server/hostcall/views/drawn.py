"""A view's data, built from a tool's result: what the widget and the console draw.

Bounded whatever the result holds: at most ``MAX_ITEMS`` items (``more`` counts the rest),
every text cut to ``MAX_TEXT_CHARS`` (a message to ``MAX_MESSAGE_CHARS``), a value that is
not text shown as compact JSON. Nothing here is markup: the widget puts every string in a
text node and the console's templates escape it. An image's address is kept only if its
origin is one the view allows (``"self"``: a path on the Hostcall server); otherwise only
its description is, so a result cannot make the visitor's browser fetch from a host the
agent file did not name (a tracker's pixel)::

    {"type": "list", "title": "Tasks", "items": [{"title": "Write docs", "subtitle": "todo",
      "buttons": [{"label": "Done", "message": "Mark Write docs as done"}]}], "more": 0}
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from hostcall.origins import BadOrigin, normalize_origin
from hostcall.views.paths import Path, Template
from hostcall.views.spec import SELF, Button, ViewSpec

MAX_ITEMS = 50
MAX_TEXT_CHARS = 200
MAX_MESSAGE_CHARS = 500
MAX_URL_CHARS = 2000


def draw(spec: ViewSpec, result: Any) -> dict[str, Any]:
    """The view of ``result`` as ``spec`` says; keys without a value are left out."""
    view: dict[str, Any] = {"type": spec.type}
    _put(view, "title", _text(spec.title, result))
    _put(view, "subtitle", _text(spec.subtitle, result))
    if spec.items is not None:
        found = spec.items.read(result)
        rows = found if isinstance(found, list) else []
        drawn = [_item(spec, result, row) for row in rows[:MAX_ITEMS]]
        view["items"] = drawn
        view["more"] = max(0, len(rows) - MAX_ITEMS)
    if spec.columns:
        view["columns"] = [c.label for c in spec.columns]
    if spec.fields:
        view["fields"] = [
            {"label": f.label, "value": _text(f.value, result) or ""} for f in spec.fields
        ]
    if spec.image is not None:
        alt = _text(spec.image.alt, result) or ""
        src = image_address(spec.image.src.read(result), spec.image_hosts)
        view["image"] = {"alt": alt, "src": src} if src else {"alt": alt}
    _put(view, "buttons", _buttons(spec.buttons, result, None))
    return view


def _item(spec: ViewSpec, result: Any, row: Any) -> dict[str, Any]:
    item: dict[str, Any] = {}
    if spec.columns:
        item["cells"] = [_text(c.value, result, row) or "" for c in spec.columns]
    elif spec.item is not None:
        if title := _text(spec.item.title, result, row):
            item["title"] = title
        if subtitle := _text(spec.item.subtitle, result, row):
            item["subtitle"] = subtitle
    if spec.item is not None and spec.item.buttons:
        if buttons := _buttons(spec.item.buttons, result, row):
            item["buttons"] = buttons
    return item


def _put(view: dict[str, Any], key: str, value: Any) -> None:
    if value:
        view[key] = value


def shown(value: Any, limit: int = MAX_TEXT_CHARS) -> str:
    """A value as the text a person reads: text as it is, anything else as compact JSON;
    cut to ``limit`` characters."""
    if value is None:
        return ""
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return value if len(value) <= limit else value[: limit - 1] + "…"


# A view draws every item of up to MAX_ITEMS rows, on the way to the result's event: the
# helpers below test a value's class before calling ``shown`` (text, the common case, needs
# no call) and build a message in a loop rather than a generator.


def _text(path: Path | None, result: Any, row: Any = None) -> str | None:
    if path is None:
        return None
    value = path.read(result, row)
    if value.__class__ is not str:
        return shown(value) or None
    return (value if len(value) <= MAX_TEXT_CHARS else shown(value)) or None


def _message(template: Template, result: Any, row: Any) -> str:
    words = []
    for part in template.parts:
        if part.__class__ is str:
            words.append(part)
        else:
            assert isinstance(part, Path)
            value = part.read(result, row)
            words.append(value if value.__class__ is str and len(value) <= MAX_TEXT_CHARS
                         else shown(value))  # fmt: skip
    return shown("".join(words).strip(), MAX_MESSAGE_CHARS)


def _buttons(buttons: tuple[Button, ...], result: Any, row: Any) -> list[dict[str, str]]:
    drawn = []
    for b in buttons:
        message = _message(b.message, result, row)
        if message:  # a button whose message came out empty would send nothing
            drawn.append(
                {"label": b.label, "message": message, "tool": b.tool}
                if b.tool
                else {"label": b.label, "message": message}
            )
    return drawn


def image_address(value: Any, hosts: tuple[str, ...]) -> str | None:
    """``value`` if it is an image address the view allows, else None: a path on this
    server (``/…``, not ``//…``) when ``"self"`` is allowed, or an http(s) address without
    credentials whose origin is listed."""
    if not isinstance(value, str) or not value or len(value) > MAX_URL_CHARS:
        return None
    if not value.isprintable() or any(c.isspace() or c == "\\" for c in value):
        return None
    if value.startswith("/"):
        return value if SELF in hosts and not value.startswith("//") else None
    try:
        parts = urlsplit(value)
        origin = normalize_origin(f"{parts.scheme}://{parts.netloc}")
    except (ValueError, BadOrigin):
        return None
    if parts.username is not None or parts.password is not None or origin not in hosts:
        return None
    return value
