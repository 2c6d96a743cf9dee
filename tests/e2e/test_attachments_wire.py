"""Attachments on the wire: listed as resources with their MIME type, read as base64 blobs,
over-cap ones refused with a clear error, in both eras, from the real server process."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.eras import EraWire
from fsnotes.notes.index.attachments import MAX_ATTACHMENT_BYTES

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))


@pytest.fixture(params=["legacy", "modern"])
def era_wire(request: pytest.FixtureRequest, workspace: Path, tmp_path: Path) -> Iterator[EraWire]:
    (workspace / "media").mkdir()
    (workspace / "media" / "shed.png").write_bytes(PNG)
    (workspace / "media" / "plans.pdf").write_bytes(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    (workspace / "media" / "huge.pdf").write_bytes(b"%" * (MAX_ATTACHMENT_BYTES + 1))
    w = EraWire(workspace, tmp_path / "state", request.param)
    yield w
    w.close()


def _listed(w: EraWire) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    while True:
        result = w.result("resources/list", {} if cursor is None else {"cursor": cursor})
        out.update({r["name"]: r for r in result["resources"]})
        cursor = result.get("nextCursor")
        if cursor is None:
            return out


def test_attachments_are_listed_and_read_as_blobs(era_wire: EraWire, workspace: Path) -> None:
    listed = _listed(era_wire)
    assert listed["media/shed.png"]["mimeType"] == "image/png"
    assert listed["media/shed.png"]["size"] == len(PNG)
    assert listed["media/plans.pdf"]["mimeType"] == "application/pdf"
    assert listed["plan.md"]["mimeType"] == "text/markdown"
    uri = (workspace / "media" / "shed.png").as_uri()
    result = era_wire.result("resources/read", {"uri": uri})
    assert result["contents"] == [
        {"uri": uri, "mimeType": "image/png", "blob": base64.b64encode(PNG).decode("ascii")}
    ]
    if era_wire.era == "modern":
        assert result["cacheScope"] == "private"
    # Attachments are not notes: the notes tools never list, search or read them.
    notes = era_wire.tool("notes_list", {})["structuredContent"]["notes"]
    assert all(not n["path"].startswith("media/") for n in notes)
    read = era_wire.tool("notes_read", {"uri": uri})
    assert read["isError"] is True and "so it is not a note" in read["content"][0]["text"]


def test_an_over_cap_attachment_is_refused_with_a_clear_error(
    era_wire: EraWire, workspace: Path
) -> None:
    uri = (workspace / "media" / "huge.pdf").as_uri()
    error = era_wire.error("resources/read", {"uri": uri})
    assert error["code"] == -32602
    assert error["message"] == (
        "'media/huge.pdf' is larger than 4,194,304 bytes (4 MiB), the most fsnotes serves as "
        "an attachment; it was not read."
    )
    assert error["data"] == {"uri": uri, "maxBytes": MAX_ATTACHMENT_BYTES}
    missing = era_wire.error("resources/read", {"uri": (workspace / "media" / "no.png").as_uri()})
    assert missing["code"] == (-32002 if era_wire.era == "legacy" else -32602)
    assert missing["message"] == "Resource not found"


def test_an_attachment_added_or_removed_outside_is_seen_by_the_watcher(
    era_wire: EraWire, workspace: Path
) -> None:
    # The rescan runs every 60 s: seen within 5 s, the change came through the watcher.
    assert "media/new.webp" not in _listed(era_wire)  # the first build is done
    (workspace / "media" / "new.webp").write_bytes(b"RIFF\x00\x00\x00\x00WEBP")
    deadline = time.monotonic() + 5
    while "media/new.webp" not in (listed := _listed(era_wire)):
        assert time.monotonic() < deadline, "the watcher did not report the new attachment"
        time.sleep(0.1)
    assert listed["media/new.webp"]["mimeType"] == "image/webp"
    (workspace / "media" / "new.webp").unlink()
    deadline = time.monotonic() + 5
    while "media/new.webp" in _listed(era_wire):
        assert time.monotonic() < deadline
        time.sleep(0.1)
