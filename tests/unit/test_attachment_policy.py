"""An agent file's ``attachments`` block: checked whole at load and by ``hostcall check``
(unknown keys, a type outside the closed list, a size past the hard cap, extraction of a
type that is no text), and handed to the widget's config; and the content sniffer that
decides a file's type whatever its name or the browser says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hostcall.agents import load_agents
from hostcall.attachments.policy import HARD_CAP_BYTES, parse_size
from hostcall.attachments.sniff import sniff
from hostcall.cli import main
from tests.support.harness import Harness, planner_definition, write_agent
from tests.unit.test_agent_files import agents_folder, problems_of
from tests.unit.test_embedding import widget_config


def _with(block: Any) -> dict[str, Any]:
    return {**planner_definition(), "id": "files", "attachments": block}


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ({"max_file": 4}, "files.json: attachments: unknown key 'max_file'"),
        ({"types": {"image/svg+xml": "1MB"}}, "types: 'image/svg+xml' cannot be attached"),
        ({"types": {"text/html": "1MB"}}, "types: 'text/html' cannot be attached"),
        ({"types": {"image/png": "26MB"}}, "'26MB' is over the 25 MB every file is held to"),
        ({"types": {"image/png": "5 GB"}}, "'5 GB' is not a size"),
        ({"types": {"image/png": 0}}, "0 is not a size"),
        ({"types": {}}, "'types' must be an object of sizes per type"),
        ({"max_files": 11}, "'max_files' must be a whole number from 1 to 10"),
        ({"max_files": True}, "'max_files' must be a whole number from 1 to 10"),
        ({"max_total_mb": 0}, "'max_total_mb' must be a whole number of MB"),
        ({"extract_text": ["application/pdf"]}, "'application/pdf' cannot be given as text"),
        ({"types": {"image/png": "1MB"}, "extract_text": ["text/plain"]},
         "'text/plain' is not one of the block's types"),
        ([], "files.json: attachments must be an object"),
    ],
)  # fmt: skip
def test_a_bad_block_stops_loading_with_a_line_saying_why(
    tmp_path: Path, block: Any, problem: str
) -> None:
    write_agent(agents_folder(tmp_path), _with(block), name="files.json")
    problems = problems_of(tmp_path)
    assert len(problems) == 1 and problem in problems[0], problems


def test_hostcall_check_refuses_a_bad_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_agent(agents_folder(tmp_path), _with({"types": {"image/svg+xml": "1MB"}}), "files.json")
    assert main(["check", "--agents", str(tmp_path)]) == 1
    assert "'image/svg+xml' cannot be attached" in capsys.readouterr().err
    write_agent(agents_folder(tmp_path), _with({"max_files": 2}), "files.json")
    assert main(["check", "--agents", str(tmp_path)]) == 0


def test_a_block_reaches_the_widget_config_and_none_gives_it_nothing(
    tmp_path: Path, agents_dir: Path, made: list[Harness]
) -> None:
    write_agent(agents_dir, _with({"max_files": 3, "types": {"image/png": "2MB",
                                                             "text/csv": 1000}}))  # fmt: skip
    agent = load_agents(agents_dir, {})["files"]
    assert agent.attachments is not None and agent.attachments.max_total_bytes == 50 * 2**20
    h = Harness(tmp_path, agents_dir)
    made.append(h)
    page = h.http.get("/widget/files")
    assert widget_config(page.text)["attachments"] == {
        "maxFiles": 3,
        "types": {"image/png": 2 * 2**20, "text/csv": 1000},
    }
    # Its attached images are drawn from object URLs of bytes fetched with the token.
    assert "img-src 'self' data: blob:" in page.headers["content-security-policy"]
    planner = h.http.get("/widget/planner")
    assert widget_config(planner.text)["attachments"] is None
    assert "blob:" not in planner.headers["content-security-policy"]
    # The block alone takes the default types and sizes.
    write_agent(agents_dir, _with({}))
    defaults = load_agents(agents_dir, {})["files"].attachments
    assert defaults is not None and defaults.max_files == 4
    assert defaults.types["application/pdf"] == 10 * 2**20 and "image/svg+xml" not in defaults.types


def test_sizes_are_kb_mb_or_bytes() -> None:
    assert parse_size("500KB") == 500 * 1024
    assert parse_size("5MB") == 5 * 2**20
    assert parse_size(1234) == 1234
    assert parse_size(HARD_CAP_BYTES) == HARD_CAP_BYTES
    for bad in ("5mb", "5", "-1KB", 1.5, None, True, "0KB"):
        assert parse_size(bad) is None, bad


@pytest.mark.parametrize(
    ("data", "name", "kind"),
    [
        (b"\x89PNG\r\n\x1a\n....", "x.txt", "image/png"),
        (b"\xff\xd8\xff\xdb....", "x", "image/jpeg"),
        (b"GIF89a....", "x", "image/gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "x", "image/webp"),
        (b"%PDF-1.4\n", "x", "application/pdf"),
        ("héllo\n".encode(), "notes", "text/plain"),
        (b"\xef\xbb\xbfa,b\n1,2\n", "table.csv", "text/csv"),
        (b"a,b\n", "table.txt", "text/plain"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "x.txt", None),
        (b"  <!doctype html><p>hi", "x.txt", None),
        (b"<?xml version='1.0'?><svg/>", "x.txt", None),
        (b"\xef\xbb\xbf<html>", "x.txt", None),
        (b"text\x00with a NUL", "x.txt", None),
        (b"\xff\xfe not utf-8", "x.txt", None),
        (b"RIFF\x00\x00\x00\x00WAVEfmt ", "x", None),
    ],
)
def test_the_content_decides_the_type(data: bytes, name: str, kind: str | None) -> None:
    assert sniff(data, name) == kind
