"""Whether an uploaded file may be kept: its name, and its type as its content shows it,
checked against the agent's ``attachments`` block (hostcall/attachments/policy.py). Every
refusal says what was found and what the agent takes; nothing refused is stored.

    400 bad_attachment_name       no name, a path, a control character, too long
    413 attachment_too_large      past its type's size (or every type's, while reading)
    415 attachment_type_refused   none of the agent's types, active content by name, or
                                  content that is not what the name's extension says
"""

from __future__ import annotations

from hostcall.attachments.policy import MB, AttachmentPolicy
from hostcall.attachments.sniff import ACTIVE, extension, named_type, sniff
from hostcall.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from hostcall.protocol.codes import ErrorCode

MAX_NAME_CHARS = 255


def check_name(name: str | None) -> str:
    """The file's name as the visitor's browser gave it: shown in the thread and the
    console, and the name a download is saved under; never a path."""
    if name is None or not name.strip():
        raise _bad_name("an upload needs its file's name: ?name=<filename>")
    if len(name) > MAX_NAME_CHARS:
        raise _bad_name(f"the file's name is {len(name)} characters; at most {MAX_NAME_CHARS}")
    if any(c in name for c in "/\\") or name.strip() in (".", ".."):
        raise _bad_name(f"the file's name {name[:80]!r} is a path; send its last part only")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in name):
        raise _bad_name("the file's name holds a control character")
    return name.strip()


def _bad_name(message: str) -> BadRequest:
    return BadRequest(message, code=ErrorCode.BAD_ATTACHMENT_NAME, field="name")


def too_large(name: str, limit: int, kind: str | None = None) -> PayloadTooLarge:
    what = f"a {kind} file" if kind else "a file"
    return PayloadTooLarge(
        f"{name[:80]!r} is larger than {_size(limit)}, the most {what} may weigh here",
        code=ErrorCode.ATTACHMENT_TOO_LARGE,
        limit=limit,
    )


def decide(policy: AttachmentPolicy, name: str, data: bytes) -> str:
    """The file's type, from its content; refused if the agent does not take it."""
    takes = ", ".join(policy.types)
    ext = extension(name)
    if ext in ACTIVE:
        raise _refused(f"a .{ext} file is never accepted (it could run in a browser)", takes)
    if not data:
        raise _refused(f"{name[:80]!r} is empty", takes)
    kind = sniff(data, name)
    if kind is None:
        raise _refused(f"the content of {name[:80]!r} is none of the types this agent takes",
                       takes)  # fmt: skip
    named = named_type(name)
    if named is not None and named != kind:
        raise _refused(
            f"{name[:80]!r} is named as {named}, but its content is {kind}", takes, found=kind
        )
    if kind not in policy.types:
        raise _refused(f"{name[:80]!r} is {kind}, which this agent does not take", takes,
                       found=kind)  # fmt: skip
    if len(data) > policy.types[kind]:
        raise too_large(name, policy.types[kind], kind)
    return kind


def _refused(message: str, takes: str, **details: str) -> UnsupportedMediaType:
    return UnsupportedMediaType(
        f"{message}; it takes {takes}",
        code=ErrorCode.ATTACHMENT_TYPE_REFUSED,
        accepted=takes.split(", "),
        **details,
    )


def _size(size: int) -> str:
    if size % MB == 0:
        return f"{size // MB} MB"
    return f"{size // 1024} KB" if size % 1024 == 0 else f"{size} bytes"
