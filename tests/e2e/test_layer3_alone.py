"""Layer 3 on its own: with layer 2 switched off (test-only server), Landlock still refuses.

The server under test is `tests/servers/layer2_disabled.py`: the real `fsnotes serve`, but
note reads open ``<workspace>/<path>`` by name and follow symlinks. Layer 1 and
authorization still stand, so the escapes go through symlinks planted in the workspace.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from e2e.wire import Wire, meta
from sandbox.jail import landlock_abi

SERVER = Path(__file__).resolve().parents[1] / "servers" / "layer2_disabled.py"
LAUNCHER = [sys.executable, str(SERVER)]


def _plant(tmp_path: Path) -> Path:
    ws = tmp_path / "notes"
    ws.mkdir()
    (ws / "ok.md").write_text("# Fine\ninside\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("# Secret\nOUTSIDE SECRET\n")
    os.symlink("/etc/passwd", ws / "passwd.md")
    os.symlink(tmp_path / "outside" / "secret.md", ws / "planted.md")
    return ws


def _read(w: Wire, ws: Path, name: str) -> dict[str, object]:
    resp = w.call(
        "tools/call",
        {"_meta": meta(), "name": "notes_read", "arguments": {"uri": (ws / name).as_uri()}},
    )
    return dict(resp["result"])


@pytest.mark.skipif(landlock_abi() is None, reason="Landlock is not available on this kernel")
def test_jailed_server_without_layer2_gets_eacces(tmp_path: Path) -> None:
    ws = _plant(tmp_path)
    w = Wire(ws, tmp_path / "state", launcher=LAUNCHER)
    try:
        ok = _read(w, ws, "ok.md")
        assert ok.get("isError") is not True and "inside" in str(ok["structuredContent"])
        for name in ("passwd.md", "planted.md"):
            result = _read(w, ws, name)
            text = str(result["content"][0]["text"])  # type: ignore[index]
            assert result["isError"] is True, result
            assert "(EACCES)" in text, text
            assert "root:" not in text and "OUTSIDE SECRET" not in text
    finally:
        w.close()


def test_without_landlock_the_same_server_leaks(tmp_path: Path) -> None:
    # The control: the switch really disables layer 2, so only layer 3 stood in the way.
    ws = _plant(tmp_path)
    w = Wire(ws, tmp_path / "state", "--no-landlock", launcher=LAUNCHER)
    try:
        leaked = _read(w, ws, "planted.md")
        assert "OUTSIDE SECRET" in str(leaked["structuredContent"])
    finally:
        w.close()
