"""A real `fsnotes serve --http` driven by the TypeScript SDK v2 client
(@modelcontextprotocol/client) over Streamable HTTP in versionNegotiation auto, pin and legacy
modes, through tests/peers/ts_http_driver.mjs: a read, and a delete confirmed in the form."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.interop.interop_support import REPO
from tests.transport.http_support import add_token, make_workspace, start_fsnotes

PEERS = REPO / "tests" / "peers"
DRIVER = PEERS / "ts_http_driver.mjs"
CLIENT_PACKAGE = PEERS / "node_modules" / "@modelcontextprotocol" / "client" / "package.json"

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

NODE = shutil.which("node")
if NODE is None:
    pytest.skip("node is not installed: TypeScript interop tests skipped", allow_module_level=True)
if not CLIENT_PACKAGE.exists():
    pytest.skip(
        "@modelcontextprotocol/client is not installed: run `make peers`", allow_module_level=True
    )


@pytest.mark.parametrize(("mode", "era"), [("auto", "modern"), ("pin", "modern"),
                                           ("legacy", "legacy")])  # fmt: skip
def test_typescript_client_reads_and_confirms_a_delete_over_http(
    tmp_path: Path, mode: str, era: str
) -> None:
    assert NODE is not None
    workspace, state = make_workspace(tmp_path), tmp_path / "state"
    token = add_token(state, "ada")
    with start_fsnotes(workspace, state) as server:
        proc = subprocess.run(
            [NODE, str(DRIVER), mode, server.url, token, (workspace / "plan.md").as_uri(),
             workspace.as_uri()],
            cwd=PEERS, capture_output=True, text=True, timeout=90,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    events: list[dict[str, Any]] = [
        json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")
    ]
    assert events[0]["era"] == era
    assert "notes_delete" in events[1]["tools"]
    calls = {e["call"]: e for e in events if "call" in e}
    assert calls["notes_read"]["structured"]["title"] == "Plan"
    assert len([e for e in events if "elicit" in e]) == 1
    assert calls["notes_delete"]["structured"]["deleted"] is True
    assert not (workspace / "groceries.md").exists()
    assert (workspace / "garden/groceries-list.md").exists()
    assert events[-1] == {"done": True}
