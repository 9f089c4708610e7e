"""What a model step is given of the files in its history: an image's bytes (an
OpenAI-compatible model reads them as an ``image_url`` part), a file whose type the agent
gives as text (``extract_text``) as that text, cut at ``MAX_TEXT_CHARS``, and any other
file named only (name, type, size: the model can say it cannot read it).

A step reads the bytes from the store each time (a model has no memory between steps), the
newest messages first, up to ``MAX_STEP_BYTES`` in all: older files past it are named only,
so a long conversation of photos costs a step no more than a few of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from hostcall.attachments.policy import MB, AttachmentPolicy
from hostcall.attachments.sniff import IMAGES
from hostcall.models.base import Attached
from hostcall.store.interfaces import Attachments
from hostcall.store.records import AttachmentRef, StoredMessage

MAX_TEXT_CHARS = 20_000
MAX_STEP_BYTES = 20 * MB


async def model_files(
    store: Attachments, policy: AttachmentPolicy | None, history: Sequence[StoredMessage]
) -> dict[str, tuple[Attached, ...]]:
    """Message id -> its files as the model is given them, for each message with files."""
    budget = MAX_STEP_BYTES
    given: dict[str, tuple[Attached, ...]] = {}
    for message in reversed(history):
        if not message.attachments:
            continue
        files: list[Attached] = []
        for ref in message.attachments:
            readable = _readable(policy, ref)
            data = await store.attachment_bytes(ref.id) if readable and ref.size <= budget else None
            if data is None:
                files.append(Attached(ref.name, ref.type, ref.size))
                continue
            budget -= len(data)
            if ref.type in IMAGES:
                files.append(Attached(ref.name, ref.type, ref.size, data=data))
            else:
                text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
                cut = len(text) > MAX_TEXT_CHARS
                files.append(Attached(ref.name, ref.type, ref.size, text=text[:MAX_TEXT_CHARS],
                                      cut=cut))  # fmt: skip
        given[message.id] = tuple(files)
    return given


def _readable(policy: AttachmentPolicy | None, ref: AttachmentRef) -> bool:
    return ref.type in IMAGES or (policy is not None and ref.type in policy.extract_text)


def as_text(file: Attached) -> str:
    """A file in words, for a model that reads text only: its extracted text, delimited so
    the file's words cannot pass for the visitor's, or one line naming it."""
    if file.text is not None:
        note = (
            f"\n[cut: the first {MAX_TEXT_CHARS} characters of {file.size} bytes]"
            if file.cut
            else ""
        )
        return f"Attached file {file.name} ({file.type}):\n<<<\n{file.text}\n>>>{note}"
    return f"[Attached file {file.name} ({file.type}, {file.size} bytes): not readable here]"
