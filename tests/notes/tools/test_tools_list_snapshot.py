"""``tools/list`` on the wire, byte for byte, in both eras, against snapshots taken from main.

The tools' names, titles, descriptions, schemas and annotations are what hosts and models
read; a change to how tools are declared must not change them by accident. The snapshots
were written by this test (``FSNOTES_WRITE_SNAPSHOTS=1``) from the code as it was before the
tools were declared by their functions; an intended change of a descriptor rewrites them in
the same commit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.protocol.framing import encode_message
from fsnotes.runtime.connection import ServerConnection
from tests.protocol.protocol_harness import meta, request, sends

SNAPSHOTS = Path(__file__).parent / "snapshots"


@pytest.fixture
def every_tool(tmp_path: Path) -> Iterator[Server]:
    """A server with every tool on (notes_setup needs an allowlisted parent)."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "shared").mkdir()
    cfg = load(
        workspaces=[str(tmp_path / "notes")],
        state_dir=str(tmp_path / "state"),
        principal="ada",
        setup_allow=[str(tmp_path / "shared")],
        env={},
    )
    srv = build(cfg)
    yield srv
    srv.close()


def listed(conn: ServerConnection, params: dict[str, Any] | None) -> list[bytes]:
    """Every page of ``tools/list`` as the line the transport writes."""
    lines: list[bytes] = []
    cursor = None
    for page in range(50):  # far more pages than tools: a cursor loop fails the test
        sent = dict(params or {})
        if cursor is not None:
            sent["cursor"] = cursor
        out = sends(conn.receive_message(request(page + 1, "tools/list", sent or None)))
        assert len(out) == 1 and "result" in out[0], out
        lines.append(encode_message(out[0]))
        cursor = out[0]["result"].get("nextCursor")
        if cursor is None:
            return lines
    raise AssertionError("tools/list did not end")


def check(name: str, lines: list[bytes]) -> None:
    path = SNAPSHOTS / name
    got = b"".join(lines)
    if os.environ.get("FSNOTES_WRITE_SNAPSHOTS") == "1":
        path.write_bytes(got)
    want = path.read_bytes()
    if got != want:  # show which tool differs first, then fail on the bytes
        tools = [t for line in lines for t in json.loads(line)["result"]["tools"]]
        old = [t for line in want.splitlines() for t in json.loads(line)["result"]["tools"]]
        for new_tool, old_tool in zip(tools, old, strict=False):
            assert new_tool == old_tool
    assert got == want


def test_tools_list_2026_07_28_is_byte_identical_to_the_snapshot(every_tool: Server) -> None:
    conn = ServerConnection(every_tool.app, principal="ada")
    check("tools_list.2026-07-28.jsonl", listed(conn, {"_meta": meta()}))


def test_tools_list_2025_11_25_is_byte_identical_to_the_snapshot(every_tool: Server) -> None:
    conn = ServerConnection(every_tool.app, principal="ada")
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "snapshot", "version": "1"},
    }
    assert "result" in sends(conn.receive_message(request(0, "initialize", init)))[0]
    check("tools_list.2025-11-25.jsonl", listed(conn, None))
