"""What a file's bytes are, decided by its content: a small closed list, never the name or
the ``Content-Type`` the browser guessed (an HTML page renamed ``.png`` is still HTML).

Only the types an agent file may admit are recognised (``KNOWN``): PNG, JPEG, GIF and WebP
images by their signature, PDF by its header, and text (valid UTF-8 without a NUL, which is
``text/csv`` when the name ends ``.csv``). Anything else is ``None``: refused. Markup (an
HTML page, an SVG image, XML) is never text here, even when it is valid UTF-8: it is the
active content a browser might run, and nothing a visitor needs to send an agent.
"""

from __future__ import annotations

import re

PNG = "image/png"
JPEG = "image/jpeg"
GIF = "image/gif"
WEBP = "image/webp"
PDF = "application/pdf"
TEXT = "text/plain"
CSV = "text/csv"

# Every type an agent file may admit; image/svg+xml and text/html are never among them.
KNOWN = (PNG, JPEG, GIF, WEBP, PDF, TEXT, CSV)
IMAGES = frozenset({PNG, JPEG, GIF, WEBP})
TEXTS = frozenset({TEXT, CSV})

_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", PNG),
    (b"\xff\xd8\xff", JPEG),
    (b"GIF87a", GIF),
    (b"GIF89a", GIF),
    (b"%PDF-", PDF),
)

# What a name's extension says a file is: a name that says one type of a file whose bytes
# are another is refused (the visitor meant to send something else, or someone disguised a
# file). An extension not listed says nothing; the content decides.
EXTENSIONS = {
    "png": PNG,
    "jpg": JPEG,
    "jpeg": JPEG,
    "jfif": JPEG,
    "gif": GIF,
    "webp": WEBP,
    "pdf": PDF,
    "txt": TEXT,
    "text": TEXT,
    "md": TEXT,
    "log": TEXT,
    "csv": CSV,
}
# Names of active content: refused whatever the bytes are, so nothing stored is ever named
# as a page or a script a browser would run if it were saved and opened.
ACTIVE = frozenset({"svg", "svgz", "html", "htm", "xhtml", "xht", "xml", "js", "mjs", "hta"})

# The start of markup, after a byte order mark and blank space.
_MARKUP = re.compile(rb"\s*(<\?xml|<!doctype|<html|<svg|<head|<body|<script|<!--)", re.I)


def extension(name: str) -> str:
    """The name's extension, lower case, without the dot ("" if none)."""
    stem, dot, ext = name.rpartition(".")
    return ext.lower() if dot and stem else ""


def sniff(data: bytes, name: str) -> str | None:
    """The type of ``data`` from the closed list, or None (not one of them)."""
    for signature, kind in _SIGNATURES:
        if data.startswith(signature):
            return kind
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return WEBP
    if _is_text(data):
        return CSV if extension(name) == "csv" else TEXT
    return None


def _is_text(data: bytes) -> bool:
    body = data.removeprefix(b"\xef\xbb\xbf")
    if b"\0" in body or _MARKUP.match(body[:1024]):
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def named_type(name: str) -> str | None:
    """What the name's extension says the file is, if it says."""
    return EXTENSIONS.get(extension(name))
