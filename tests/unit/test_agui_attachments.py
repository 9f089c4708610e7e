"""The AG-UI endpoint's file parts (``InputContent``: image, audio, document with a data or a
url source, and the older binary part): decoded and admitted exactly as the widget's uploads
are, reaching the scripted model; a URL is never fetched, and every refusal is a clear 422
or 415 before anything of the thread is kept."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from hostcall.agui import thread_conversation_id
from tests.support.harness import Harness, write_agent
from tests.unit.test_attachments import HTML, PNG, SVG, attaching_agent


@pytest.fixture
def h(tmp_path: Path, agents_dir: Path) -> Iterator[Harness]:
    write_agent(agents_dir, attaching_agent())
    harness = Harness(tmp_path, agents_dir)
    yield harness
    harness.stop()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image(data: bytes, mime: str = "image/png", **metadata: Any) -> dict[str, Any]:
    source = {"type": "data", "value": b64(data), "mimeType": mime}
    part: dict[str, Any] = {"type": "image", "source": source}
    return part | ({"metadata": metadata} if metadata else {})


def run(h: Harness, thread: str, content: Any, agent: str = "attaching") -> Any:
    body = {"threadId": thread, "runId": "r1", "tools": [],
            "messages": [{"id": "m1", "role": "user", "content": content}]}  # fmt: skip
    return h.http.post(f"/agui/{agent}", json=body)


def nothing_kept(h: Harness, thread: str, agent: str = "attaching") -> None:
    cid = thread_conversation_id(agent, thread)
    assert h.call(h.runtime.store.get_conversation, cid) is None
    assert h.call(h.runtime.store.conversation_attachments, cid) == []


def refused(r: Any, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code, error
    return str(error["message"])


def test_an_image_part_reaches_the_scripted_model_and_is_kept(h: Harness) -> None:
    r = run(h, "t-1", [{"type": "text", "text": "look"}, image(PNG, filename="cat.png")])
    assert r.status_code == 200 and "A PNG: cat.png" in r.text, r.text
    cid = thread_conversation_id("attaching", "t-1")
    [mine, _] = h.call(h.runtime.store.list_messages, cid)
    [ref] = mine.attachments
    assert (mine.text, ref.name, ref.type, ref.size) == ("look", "cat.png", "image/png", len(PNG))
    [kept] = h.call(h.runtime.store.conversation_attachments, cid)
    assert kept.message_id == mine.id
    assert h.call(h.runtime.store.attachment_bytes, kept.id) == PNG


def test_the_older_binary_part_and_an_unnamed_part_are_taken(h: Harness) -> None:
    binary = {"type": "binary", "mimeType": "image/png", "data": b64(PNG)}
    r = run(h, "t-2", [binary])  # files alone: no text
    assert r.status_code == 200 and "A PNG: binary-1.png" in r.text, r.text
    document = {
        "type": "document",
        "source": {"type": "data", "value": b64(b"a,b\n1,2\n"), "mimeType": "text/csv"},
    }
    assert run(h, "t-3", [document, {"type": "text", "text": "hello"}]).status_code == 200
    cid = thread_conversation_id("attaching", "t-3")
    [kept] = h.call(h.runtime.store.conversation_attachments, cid)
    assert (kept.name, kept.type) == ("document-1.txt", "text/plain")


class _Counting(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.end_headers()
        self.wfile.write(PNG)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_url_source_is_refused_before_any_connection(h: Harness) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/cat.png"
        part = {"type": "image", "source": {"type": "url", "value": url, "mimeType": "image/png"}}
        message = refused(run(h, "t-4", [{"type": "text", "text": "x"}, part]), 422,
                          "attachment_url_refused")  # fmt: skip
        assert "never fetched" in message
        binary = {"type": "binary", "mimeType": "image/png", "url": url}
        refused(run(h, "t-4", [binary]), 422, "attachment_url_refused")
        # Another conversation's file of this server is no better.
        other = "/api/conversations/c_0123456789abcdef/attachments/f_0123456789abcdef"
        part = {"type": "image", "source": {"type": "url", "value": other}}
        refused(run(h, "t-4", [part]), 422, "attachment_url_refused")
    finally:
        server.shutdown()
        thread.join()
    assert _Counting.hits == []
    nothing_kept(h, "t-4")


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        ([image(SVG, "image/svg+xml")], 415, "attachment_type_refused"),
        ([image(HTML, filename="cat.png")], 415, "attachment_type_refused"),
        ([image(PNG, "text/plain", filename="notes.txt")], 415, "attachment_type_refused"),
        ([image(PNG + bytes(2048))], 413, "attachment_too_large"),
        ([image(PNG)] * 3, 422, "bad_attachment"),
        ([{"type": "binary", "mimeType": "image/png", "id": "f_0123456789abcdef"}], 422,
         "bad_attachment"),
        ([image(PNG, filename="../x.png")], 400, "bad_attachment_name"),
        ([{"type": "image", "source": {"type": "data", "value": "%%%", "mimeType": "image/png"}}],
         400, "bad_request"),
    ],
)  # fmt: skip
def test_a_refused_part_is_refused_as_an_upload_and_keeps_nothing(
    h: Harness, content: Any, status: int, code: str
) -> None:
    refused(run(h, "t-5", content), status, code)
    nothing_kept(h, "t-5")


def test_an_agent_without_the_block_refuses_file_parts(h: Harness) -> None:
    refused(run(h, "t-6", [image(PNG)], agent="planner"), 422, "attachments_not_allowed")
    nothing_kept(h, "t-6", agent="planner")


def test_a_url_naming_this_threads_own_upload_sends_it_without_a_fetch(h: Harness) -> None:
    from hostcall.store.records import Attachment

    assert run(h, "t-7", "hello").status_code == 200
    cid = thread_conversation_id("attaching", "t-7")
    kept = Attachment("f_00000000000000aa", cid, "cat.png", "image/png", len(PNG), "0", h.clock())
    assert h.call(h.runtime.store.add_attachment, kept, PNG, max_total=2**20)
    url = f"http://testserver/api/conversations/{cid}/attachments/{kept.id}"
    part = {"type": "image", "source": {"type": "url", "value": url}}
    r = run(h, "t-7", [part])
    assert r.status_code == 200 and "A PNG: cat.png" in r.text, r.text
    [stored] = h.call(h.runtime.store.conversation_attachments, cid)
    assert stored.message_id is not None
    # Sent once: the same URL again is refused, and nothing more is kept.
    refused(run(h, "t-7", [part]), 422, "bad_attachment")
