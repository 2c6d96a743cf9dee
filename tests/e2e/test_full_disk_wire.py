"""notes_create on a full disk, on the wire: a clear error, and nothing left behind.

The real `fsnotes serve` runs in a private mount namespace whose workspace is a 1 MiB
tmpfs; the test looks at that filesystem through /proc/<pid>/root.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.wire import Wire

SERVE_ON_SMALL_TMPFS = (
    'mount --make-rprivate / && mount -t tmpfs -o size=1m tmpfs "$1" && '
    'exec "$2" -m fsnotes serve --workspace "$1" --state-dir "$3" --principal ada'
)


def _can_unshare_mounts() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


def test_a_note_that_does_not_fit_leaves_no_file_no_temp_and_no_folder(
    tmp_path: Path, resolver: str
) -> None:
    if not _can_unshare_mounts():
        pytest.skip("needs `unshare -m` (root or user namespaces) to mount a small tmpfs")
    ws = tmp_path / "notes"
    ws.mkdir()
    wire = Wire.spawn(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            SERVE_ON_SMALL_TMPFS,
            "sh",
            str(ws),
            sys.executable,
            str(tmp_path / "state"),
        ]
    )
    try:
        made = wire.tool("notes_create", {"path": "keep.md", "content": "# small\n"})
        assert made["result"].get("isError") is not True, made
        inside = Path(f"/proc/{wire.proc.pid}/root{ws}")  # the tmpfs, as the server sees it
        big = wire.tool("notes_create", {"path": "a/b/c/big.md", "content": "x" * 2_000_000})
        result = big["result"]
        assert result["isError"] is True
        text = result["content"][0]["text"]
        assert "'a/b/c/big.md'" in text and "No space left on device" in text
        assert str(tmp_path) not in text
        assert sorted(p.name for p in inside.iterdir()) == ["keep.md"]
        # And the disk is usable again at once (nothing of the failed note holds space).
        again = wire.tool("notes_create", {"path": "a/fits.md", "content": "y" * 500_000})
        assert again["result"].get("isError") is not True, again
        assert sorted(p.relative_to(inside).as_posix() for p in inside.rglob("*")) == [
            "a",
            "a/fits.md",
            "keep.md",
        ]
    finally:
        err = wire.close()
    assert "Traceback" not in err
