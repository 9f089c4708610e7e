"""A tool's ``view``, checked when the agent file loads (docs/agents.md "Views").

The catalog is closed: ``card``, ``list``, ``table``, ``keyvalue`` and ``image``; each
type takes the keys below and no other, and every problem names the tool and the field.
Values are paths into the result (``paths.py``); labels are the file's own text; a button
sends the visitor's message, written by its template, and may name the tool it asks the
model for (which must be one of the agent's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hostcall.origins import BadOrigin, normalize_origin
from hostcall.views.paths import Path, PathError, Template, parse_path, parse_template

TYPES = ("card", "list", "table", "keyvalue", "image")
# What each type may set besides ``type``.
KEYS: dict[str, frozenset[str]] = {
    "card": frozenset({"title", "subtitle", "fields", "image", "image_hosts", "buttons"}),
    "list": frozenset({"title", "items", "item", "buttons"}),
    "table": frozenset({"title", "items", "columns", "item", "buttons"}),
    "keyvalue": frozenset({"title", "fields", "buttons"}),
    "image": frozenset({"title", "image", "image_hosts", "buttons"}),
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "card": (),
    "list": ("items", "item"),
    "table": ("items", "columns"),
    "keyvalue": ("fields",),
    "image": ("image", "image_hosts"),
}
MAX_FIELDS = 12
MAX_COLUMNS = 6
MAX_BUTTONS = 3
MAX_LABEL_CHARS = 40
MAX_IMAGE_HOSTS = 8
# A view may show images from the Hostcall server itself: ``"self"`` in ``image_hosts``.
SELF = "self"


@dataclass(frozen=True, slots=True)
class Labelled:
    label: str
    value: Path


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    message: Template
    tool: str | None = None


@dataclass(frozen=True, slots=True)
class Image:
    src: Path
    alt: Path | None


@dataclass(frozen=True, slots=True)
class Item:
    title: Path | None
    subtitle: Path | None
    buttons: tuple[Button, ...]


@dataclass(frozen=True, slots=True)
class ViewSpec:
    type: str
    title: Path | None = None
    subtitle: Path | None = None
    items: Path | None = None
    item: Item | None = None
    fields: tuple[Labelled, ...] = ()
    columns: tuple[Labelled, ...] = ()
    image: Image | None = None
    image_hosts: tuple[str, ...] = ()
    buttons: tuple[Button, ...] = ()

    @property
    def tools(self) -> set[str]:
        """The tools its buttons ask the model for."""
        mine = list(self.buttons) + (list(self.item.buttons) if self.item else [])
        return {b.tool for b in mine if b.tool}


class _Problems:
    def __init__(self, where: str, name: str) -> None:
        self.where = where
        self.name = name
        self.found: list[str] = []

    def add(self, field: str, problem: str) -> None:
        self.found.append(f"{self.where}: '{self.name}{field}' {problem}")


def parse_view(raw: Any, where: str, name: str = "view") -> tuple[ViewSpec | None, list[str]]:
    """A tool's ``view`` (``where`` names the tool, ``name`` the field that holds the view);
    every problem found, or none."""
    problems = _Problems(where, f"{name}.")
    if not isinstance(raw, dict):
        return None, [f"{where}: '{name}' must be an object with a 'type' ({', '.join(TYPES)})"]
    kind = raw.get("type")
    if kind not in TYPES:
        return None, [f"{where}: '{name}.type' must be one of {', '.join(TYPES)} (got {kind!r})"]
    for key in sorted(set(raw) - KEYS[kind] - {"type"}):
        problems.add(
            key, f"is not a key of a {kind} view (it takes {', '.join(sorted(KEYS[kind]))})"
        )
    raw = {k: v for k, v in raw.items() if k in KEYS[kind]}  # what it may set, checked below
    for key in REQUIRED[kind]:
        if key not in raw:
            problems.add(key, f"is required in a {kind} view")
    table = kind == "table"
    spec = ViewSpec(
        type=kind,
        title=_path(raw, "title", problems),
        subtitle=_path(raw, "subtitle", problems),
        items=_path(raw, "items", problems),
        item=_item(raw.get("item"), problems, table=table) if "item" in raw else None,
        fields=_labelled(raw, "fields", MAX_FIELDS, problems, item=False),
        columns=_labelled(raw, "columns", MAX_COLUMNS, problems, item=True),
        image=_image(raw.get("image"), problems) if "image" in raw else None,
        image_hosts=_hosts(raw, problems),
        buttons=_buttons(raw, "buttons", problems, item=False),
    )
    if kind == "card" and "image" in raw and "image_hosts" not in raw:
        problems.add("image_hosts", "is required with an image: the origins it may come from")
    return (None, problems.found) if problems.found else (spec, [])


def _path(raw: dict[str, Any], key: str, problems: _Problems, *, field: str | None = None,
          item: bool = False) -> Path | None:  # fmt: skip
    if key not in raw:
        return None
    try:
        return parse_path(raw[key], item=item)
    except PathError as exc:
        problems.add(field or key, str(exc))
        return None


def _label(raw: dict[str, Any], field: str, problems: _Problems) -> str:
    label = raw.get("label")
    if not isinstance(label, str) or not label.strip() or len(label) > MAX_LABEL_CHARS:
        problems.add(f"{field}.label", f"must be text of 1 to {MAX_LABEL_CHARS} characters")
        return ""
    return label.strip()


def _entries(raw: dict[str, Any], key: str, most: int, problems: _Problems) -> list[Any]:
    value = raw.get(key, [])
    if not isinstance(value, list) or len(value) > most or (key in raw and not value):
        problems.add(key, f"must be a list of 1 to {most} entries")
        return []
    return value


def _labelled(raw: dict[str, Any], key: str, most: int, problems: _Problems, *, item: bool
              ) -> tuple[Labelled, ...]:  # fmt: skip
    found: list[Labelled] = []
    for index, entry in enumerate(_entries(raw, key, most, problems)):
        field = f"{key}[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"label", "value"}:
            problems.add(field, "must be an object with exactly 'label' and 'value'")
            continue
        label = _label(entry, field, problems)
        value = _path(entry, "value", problems, field=f"{field}.value", item=item)
        if label and value is not None:
            found.append(Labelled(label, value))
    return tuple(found)


def _buttons(raw: dict[str, Any], key: str, problems: _Problems, *, item: bool
             ) -> tuple[Button, ...]:  # fmt: skip
    found: list[Button] = []
    prefix = "item." if item else ""
    for index, entry in enumerate(_entries(raw, key, MAX_BUTTONS, problems)):
        field = f"{prefix}{key}[{index}]"
        if not isinstance(entry, dict) or not {"label", "message"} <= set(entry) <= {
            "label", "message", "tool"
        }:  # fmt: skip
            problems.add(field, "must be an object with 'label' and 'message' (and 'tool', if any)")
            continue
        label = _label(entry, field, problems)
        tool = entry.get("tool")
        if tool is not None and (not isinstance(tool, str) or not tool):
            problems.add(f"{field}.tool", "must name one of the agent's tools")
            tool = None
        try:
            message = parse_template(entry["message"], item=item)
        except PathError as exc:
            problems.add(f"{field}.message", str(exc))
            continue
        if label:
            found.append(Button(label, message, tool))
    return tuple(found)


def _item(raw: Any, problems: _Problems, *, table: bool) -> Item | None:
    allowed = {"buttons"} if table else {"title", "subtitle", "buttons"}
    if not isinstance(raw, dict):
        problems.add("item", f"must be an object with {', '.join(sorted(allowed))}")
        return None
    for key in sorted(set(raw) - allowed):
        problems.add(f"item.{key}", "is not a key of an item" + (" of a table" if table else ""))
    if not table and "title" not in raw:
        problems.add("item.title", 'is required: what each item shows, such as "@.title"')
    return Item(
        title=_path(raw, "title", problems, field="item.title", item=True),
        subtitle=_path(raw, "subtitle", problems, field="item.subtitle", item=True),
        buttons=_buttons(raw, "buttons", problems, item=True),
    )


def _image(raw: Any, problems: _Problems) -> Image | None:
    if not isinstance(raw, dict) or "src" not in raw or not set(raw) <= {"src", "alt"}:
        problems.add("image", "must be an object with 'src' and 'alt' paths")
        return None
    src = _path(raw, "src", problems, field="image.src")
    alt = _path(raw, "alt", problems, field="image.alt")
    if "alt" not in raw:
        problems.add("image.alt", "is required: what a screen reader says of the image")
    return Image(src, alt) if src is not None else None


def _hosts(raw: dict[str, Any], problems: _Problems) -> tuple[str, ...]:
    if "image_hosts" not in raw:
        return ()
    value = raw["image_hosts"]
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_IMAGE_HOSTS:
        problems.add("image_hosts", f'must list 1 to {MAX_IMAGE_HOSTS} origins, or "self"')
        return ()
    hosts: list[str] = []
    for index, host in enumerate(value):
        if host == SELF:
            hosts.append(SELF)
            continue
        try:
            hosts.append(normalize_origin(host))
        except BadOrigin as exc:
            problems.add(f"image_hosts[{index}]", f"{host!r} is not an origin: {exc.reason}")
    return tuple(dict.fromkeys(hosts))
