"""A refused change names the path it was refused on, over the real `fsnotes serve` on
stdio (both resolvers): `notes_move b.md` to `mnt/b.md`, where `mnt` is a symlink, a tmpfs
or a bind mount, is refused because of the destination, and says so; a source refused
names the source; create and delete name theirs. Nothing changes in any case.

Mounts are made in a private mount namespace (`unshare -m`) that only the server lives in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.wire import Wire, meta

LINK = (
    "'mnt/b.md' goes through a symbolic link or another filesystem at 'mnt', which fsnotes "
    "never follows; use a path to a regular note."
)


def _tree(top: Path) -> dict[str, str]:
    """Everything below ``top`` but the server's state: file contents, link targets, folders
    (links not followed)."""
    out: dict[str, str] = {}
    for here, dirs, files in os.walk(top):
        if here == str(top) and "state" in dirs:
            dirs.remove("state")
        for name in dirs + files:
            p = Path(here) / name
            out[str(p.relative_to(top))] = (
                "-> " + os.readlink(p) if p.is_symlink() else "dir" if p.is_dir() else p.read_text()
            )
    return out


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "notes"
    (path / "real").mkdir(parents=True)
    (path / "real" / "x.md").write_text("# X\n")
    (path / "b.md").write_text("# B\n")
    (path / "a.md").write_text("# A\n")
    (tmp_path / "outside").mkdir()
    return path


def _error(w: Wire, name: str, arguments: dict[str, object]) -> str:
    response = w.call(
        "tools/call",
        {"_meta": meta({"elicitation": {"form": {}}}), "name": name, "arguments": arguments},
    )
    result = response["result"]
    assert result.get("isError") is True, result
    return str(result["content"][0]["text"])


def _move_refused(w: Wire, ws: Path, new_path: str) -> str:
    before = _tree(ws.parent)
    text = _error(w, "notes_move", {"uri": (ws / "b.md").as_uri(), "newPath": new_path})
    assert _tree(ws.parent) == before
    assert str(ws) not in text
    return text


@pytest.fixture
def linked(ws: Path, tmp_path: Path, resolver: str) -> Iterator[tuple[Wire, Path]]:
    os.symlink("real", ws / "mnt")
    os.symlink(tmp_path / "outside", ws / "out")
    w = Wire(ws, tmp_path / "state")
    yield w, ws
    w.close()


def test_a_move_into_a_symlinked_folder_names_the_destination(linked: tuple[Wire, Path]) -> None:
    w, ws = linked
    assert _move_refused(w, ws, "mnt/b.md") == LINK
    assert _move_refused(w, ws, "out/b.md") == LINK.replace("mnt", "out")
    assert _move_refused(w, ws, "mnt/sub/b.md") == LINK.replace("mnt/b.md", "mnt/sub/b.md")


def test_a_move_below_a_file_names_the_destination_and_the_file(
    linked: tuple[Wire, Path],
) -> None:
    w, ws = linked
    assert _move_refused(w, ws, "a.md/b.md") == "'a.md' in 'a.md/b.md' is a file, not a folder."


def test_a_move_of_a_note_behind_a_symlink_names_the_source(linked: tuple[Wire, Path]) -> None:
    w, ws = linked
    before = _tree(ws.parent)
    text = _error(w, "notes_move", {"uri": (ws / "mnt" / "x.md").as_uri(), "newPath": "y.md"})
    assert text == LINK.replace("b.md", "x.md")
    assert _tree(ws.parent) == before


def test_create_and_delete_through_a_symlink_name_their_path(linked: tuple[Wire, Path]) -> None:
    w, ws = linked
    before = _tree(ws.parent)
    text = _error(w, "notes_create", {"path": "mnt/new.md", "content": "# New\n"})
    assert text == LINK.replace("b.md", "new.md")
    text = _error(w, "notes_create", {"path": "out/d/new.md", "content": "# New\n"})
    assert text == LINK.replace("mnt/b.md", "out/d/new.md").replace("'mnt'", "'out'")
    text = _error(w, "notes_delete", {"uri": (ws / "mnt" / "x.md").as_uri()})
    assert text == LINK.replace("b.md", "x.md")
    assert _tree(ws.parent) == before


# --- mounts -------------------------------------------------------------------------------


def _can_unshare_mounts() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


def _served_with_a_mount(ws: Path, state: Path, mount: list[str]) -> Wire:
    """The server alone in a mount namespace where ``mount`` (its arguments, with ``$MNT`` for
    the workspace's 'mnt' folder) was run first."""
    if not _can_unshare_mounts():
        pytest.skip("needs `unshare -m` (root or user namespaces) to mount inside the workspace")
    (ws / "mnt").mkdir()
    args = [a.replace("$MNT", str(ws / "mnt")) for a in mount]
    launcher = [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'mount {" ".join(_quote(a) for a in args)} && exec "$0" "$@"',
        sys.executable,
        "-m",
        "fsnotes",
    ]
    return Wire(ws, state, launcher=launcher)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


@pytest.mark.parametrize("kind", ["tmpfs", "bind"])
def test_a_move_onto_another_mount_names_the_destination(
    ws: Path, tmp_path: Path, resolver: str, kind: str
) -> None:
    (tmp_path / "elsewhere").mkdir()
    mount = (
        ["-t", "tmpfs", "-o", "size=1m", "none", "$MNT"]
        if kind == "tmpfs"
        else ["--bind", str(tmp_path / "elsewhere"), "$MNT"]
    )
    w = _served_with_a_mount(ws, tmp_path / "state", mount)
    try:
        text = _move_refused(w, ws, "mnt/b.md")
        if kind == "bind" and resolver == "walk":
            # A bind mount of the same filesystem shares st_dev: the walk only learns of it
            # from the rename itself (EXDEV), which names no component.
            assert text == LINK.replace(" at 'mnt'", ""), text
        else:
            assert text == LINK, text
        if not (kind == "bind" and resolver == "walk"):  # there a create goes in (documented)
            created = _error(w, "notes_create", {"path": "mnt/new.md", "content": "# New\n"})
            assert created == LINK.replace("b.md", "new.md"), created
    finally:
        w.close()
    assert (ws / "b.md").read_text() == "# B\n"
    assert list((tmp_path / "elsewhere").iterdir()) == []
