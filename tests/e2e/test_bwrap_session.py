"""`fsnotes serve` inside the bubblewrap launcher: a real MCP session, and nothing outside."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.wire import Wire, meta

LAUNCHER = Path(__file__).resolve().parents[2] / "sandbox" / "fsnotes-bwrap.sh"


def _bwrap_works() -> str | None:
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (make test installs it when run as root)"
    probe = subprocess.run(
        ["bwrap", "--unshare-user", "--ro-bind", "/", "/", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if probe.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {probe.stderr.strip()}"
    return None


@pytest.mark.skipif(_bwrap_works() is not None, reason=_bwrap_works() or "")
def test_session_through_the_bwrap_launcher(tmp_path: Path) -> None:
    ws, state = tmp_path / "notes", tmp_path / "state"
    ws.mkdir()
    state.mkdir()
    (ws / "a.md").write_text("# A\nhello\n")
    (tmp_path / "secret.md").write_text("# Secret\nOUTSIDE SECRET\n")
    os.symlink(tmp_path / "secret.md", ws / "link.md")
    launcher = [
        str(LAUNCHER),
        "--workspace",
        str(ws),
        "--state-dir",
        str(state),
        "--",
        sys.executable,
        "-m",
        "fsnotes",
    ]
    w = Wire(ws, state, launcher=launcher)
    try:
        listed = w.call(
            "tools/call", {"_meta": meta(), "name": "notes_list", "arguments": {}}, timeout=60
        )["result"]
        assert [n["path"] for n in listed["structuredContent"]["notes"]] == ["a.md"]
        read = w.call(
            "tools/call",
            {
                "_meta": meta(),
                "name": "notes_read",
                "arguments": {"uri": (ws / "link.md").as_uri()},
            },
        )["result"]
        assert read["isError"] is True
        assert "OUTSIDE SECRET" not in read["content"][0]["text"]
        made = w.call(
            "tools/call",
            {
                "_meta": meta(),
                "name": "notes_create",
                "arguments": {"path": "b.md", "content": "# B\n"},
            },
        )["result"]
        assert made.get("isError") is not True, made
        assert (ws / "b.md").read_text() == "# B\n"
    finally:
        err = w.close()
    assert "Traceback" not in err
