"""The files of the user message an AG-UI run starts with (its ``InputContent`` parts:
hostcall/protocol/run_input.py), admitted under the agent's ``attachments`` block exactly as
the widget's uploads are: the same types decided by content, the same sizes, the same count.

A part's bytes come in the request (a ``data`` source, or a binary part's ``data``). A part
that points elsewhere (a ``url`` source, a binary part's ``url`` or ``id``) is never
fetched: it may only name a file of this thread uploaded to this server and not sent yet
(its URL as this server gives it, or its id); any other is ``attachment_url_refused``. So
no request makes the server reach a host a client chose.

Everything is checked before anything is kept (``admit``); the bytes are kept once the
thread's conversation exists (``keep``), and the run's message takes the files.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request

from hostcall.attachments.admission import check_name, decide
from hostcall.attachments.policy import AttachmentPolicy
from hostcall.attachments.sniff import CSV, GIF, JPEG, PDF, PNG, TEXT, WEBP
from hostcall.errors import Unprocessable
from hostcall.protocol.codes import ErrorCode
from hostcall.protocol.run_input import InputFile, InputMessage
from hostcall.services.attachments import AttachmentService
from hostcall.store.records import AttachmentRef, Conversation

# A part with no name is named for its kind and its content: "image-1.png".
_EXTENSIONS = {PNG: "png", JPEG: "jpg", GIF: "gif", WEBP: "webp", PDF: "pdf", TEXT: "txt",
               CSV: "csv"}  # fmt: skip
_OWN = re.compile(r"/api/conversations/(?P<cid>[^/]+)/attachments/(?P<id>[A-Za-z0-9_-]{1,64})")


@dataclass(frozen=True, slots=True)
class Upload:
    name: str
    data: bytes


def body_limit(max_body_bytes: int, policy: AttachmentPolicy | None) -> int:
    """How large an AG-UI request may be: its files come inside it, in base64."""
    if policy is None:
        return max_body_bytes
    return max_body_bytes + math.ceil(policy.max_files * policy.largest() * 4 / 3)


async def admit(
    files: AttachmentService,
    policy: AttachmentPolicy | None,
    conversation_id: str,
    message: InputMessage,
    request: Request,
) -> tuple[Upload | AttachmentRef, ...]:
    """The message's files, each checked: bytes to keep, or a file of the thread's already.
    Raises the upload's refusal (nothing kept) for the first that is refused."""
    if not message.files:
        return ()
    if policy is None:
        raise Unprocessable(
            "this agent takes no attachments (its file has no attachments block)",
            code=ErrorCode.ATTACHMENTS_NOT_ALLOWED,
        )
    if len(message.files) > policy.max_files:
        raise Unprocessable(
            f"a message may carry {policy.max_files} files at most; this has {len(message.files)}",
            code=ErrorCode.BAD_ATTACHMENT,
        )
    admitted: list[Upload | AttachmentRef] = []
    for number, part in enumerate(message.files, 1):
        if part.data is None:
            attachment_id = _own(part, conversation_id, request)
            [ref] = await files.sendable(conversation_id, policy, [attachment_id])
            admitted.append(ref)
            continue
        name = check_name(part.name) if part.name is not None else f"{part.kind}-{number}"
        kind = decide(policy, name, part.data)
        if part.name is None:
            name = f"{name}.{_EXTENSIONS[kind]}"
        admitted.append(Upload(name, part.data))
    return tuple(admitted)


def _own(part: InputFile, conversation_id: str, request: Request) -> str:
    """The id of the thread's own file a part points to; refused if it points anywhere else."""
    if part.url is None:
        assert part.id is not None, "a file part without data has a url or an id"
        return part.id
    url = urlsplit(part.url)
    root = request.scope.get("root_path", "")
    ours = url.scheme in ("", "http", "https") and url.netloc in ("", request.url.netloc)
    found = _OWN.fullmatch(url.path.removeprefix(root)) if ours else None
    if found is None or found["cid"] != conversation_id:
        raise Unprocessable(
            f"{part.where}: a file is taken from the request's data only, or from this"
            " thread's own uploads; a URL is never fetched",
            code=ErrorCode.ATTACHMENT_URL_REFUSED,
            field=part.where,
        )
    return found["id"]


async def keep(
    files: AttachmentService,
    policy: AttachmentPolicy | None,
    conversation: Conversation,
    admitted: tuple[Upload | AttachmentRef, ...],
) -> tuple[AttachmentRef, ...]:
    """Keep the admitted bytes in the thread's conversation: the files its message sends."""
    if not admitted:
        return ()
    assert policy is not None, "admit refused files for an agent that takes none"
    refs: list[AttachmentRef] = []
    for item in admitted:
        if isinstance(item, Upload):
            item = (await files.upload(conversation, policy, item.name, item.data)).ref()
        refs.append(item)
    return tuple(refs)
