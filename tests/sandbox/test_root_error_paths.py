"""Every refused mutation names the path it was refused on (``SandboxError.path``): the
operand at fault (a move's destination, not its source), or the leading part of it that is
a symlink, a mount or a file, for both resolvers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest

from sandbox.errors import AlreadyExists, Escape, NotADirectory, NotFound, SandboxError
from sandbox.root import FileIdentity, Resolver, Root, openat2_available
from sandbox.uri import Components


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest) -> Resolver:
    if request.param == "openat2" and not openat2_available():
        pytest.skip("openat2 is not usable on this kernel/seccomp profile")
    return cast(Resolver, request.param)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """b.md and a.md (files), real/x.md, mnt -> real (a link inside), out -> outside."""
    path = tmp_path / "ws"
    (path / "real" / "deeper").mkdir(parents=True)
    (path / "real" / "x.md").write_text("x")
    (path / "b.md").write_text("b")
    (path / "a.md").write_text("a")
    os.symlink("real", path / "mnt")
    os.symlink("deeper", path / "real" / "link")
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", path / "out")
    return path


@pytest.fixture
def root(ws: Path, resolver: Resolver) -> Iterator[Root]:
    with Root.open(ws, resolver=resolver) as r:
        yield r


def _tree(ws: Path) -> dict[str, str]:
    """Everything beside and below the workspace: file contents, link targets, folders."""
    out: dict[str, str] = {}
    for top, dirs, files in os.walk(ws.parent):  # links are listed, never followed
        for name in dirs + files:
            p = Path(top) / name
            rel = str(p.relative_to(ws.parent))
            out[rel] = (
                "-> " + os.readlink(p) if p.is_symlink() else "dir" if p.is_dir() else p.read_text()
            )
    return out


def _refused(
    ws: Path, kind: type[SandboxError], do: Callable[[], object], operand: str
) -> SandboxError:
    """``do`` raises ``kind`` naming ``operand`` or a leading part of it, changing nothing."""
    before = _tree(ws)
    with pytest.raises(kind) as info:
        do()
    exc = info.value
    assert exc.path is not None, exc
    named = tuple(exc.path.split("/"))
    wanted = tuple(operand.split("/"))
    assert wanted[: len(named)] == named, (exc.path, operand)
    assert f"'{exc.path}'" in str(exc), str(exc)
    assert _tree(ws) == before
    return exc


MOVES_REFUSED_AT_THE_DESTINATION: list[tuple[Components, bool, type[SandboxError], str]] = [
    (("mnt", "b.md"), False, Escape, "mnt"),
    (("mnt", "b.md"), True, Escape, "mnt"),
    (("mnt", "sub", "b.md"), True, Escape, "mnt"),
    (("out", "b.md"), True, Escape, "out"),
    (("real", "link", "b.md"), False, Escape, "real/link"),
    (("real", "link", "b.md"), True, Escape, "real/link"),
    (("a.md", "b.md"), False, NotADirectory, "a.md"),
    (("a.md", "b.md"), True, NotADirectory, "a.md"),
    (("a.md",), False, AlreadyExists, "a.md"),
    (("real", "x.md"), False, AlreadyExists, "real/x.md"),
]


@pytest.mark.parametrize(
    ("dst", "make_parents", "kind", "culprit"), MOVES_REFUSED_AT_THE_DESTINATION
)
def test_a_move_refused_at_its_destination_names_the_destination(
    root: Root,
    ws: Path,
    dst: Components,
    make_parents: bool,
    kind: type[SandboxError],
    culprit: str,
) -> None:
    exc = _refused(
        ws, kind, lambda: root.move(("b.md",), dst, make_parents=make_parents), "/".join(dst)
    )
    # Both resolvers find the culprit here: the leading part that is a link or a file.
    assert exc.path == culprit, exc
    assert "'b.md'" not in str(exc)


def test_a_link_before_the_last_folder_is_named_by_both_resolvers(root: Root, ws: Path) -> None:
    # openat2 resolves 'mnt/sub' in one call, and the kernel does not say which component
    # it refused; the component is looked up for the message (the walk knows it anyway).
    exc = _refused(ws, Escape, lambda: root.move(("b.md",), ("mnt", "sub", "b.md")), "mnt/sub/b.md")
    assert exc.path == "mnt"
    exc = _refused(
        ws, Escape, lambda: root.read(("real", "link", "x.md"), max_bytes=9), "real/link/x.md"
    )
    assert exc.path == "real/link"
    exc = _refused(ws, NotADirectory, lambda: root.stat(("a.md", "x", "y")), "a.md/x/y")
    assert exc.path == "a.md"


@pytest.mark.parametrize(
    ("src", "kind", "culprit"),
    [
        (("mnt", "x.md"), Escape, "mnt"),
        (("out", "x.md"), Escape, "out"),
        (("gone.md",), NotFound, "gone.md"),
        (("a.md", "x.md"), NotADirectory, "a.md"),
    ],
)
def test_a_move_refused_at_its_source_names_the_source(
    root: Root, ws: Path, src: Components, kind: type[SandboxError], culprit: str
) -> None:
    exc = _refused(ws, kind, lambda: root.move(src, ("new.md",)), "/".join(src))
    assert exc.path == culprit


def test_create_mkdir_update_and_delete_name_the_part_refused(root: Root, ws: Path) -> None:
    st = os.stat(ws / "real" / "x.md")
    same = FileIdentity(st.st_dev, st.st_ino)
    cases: list[tuple[type[SandboxError], Callable[[], object], str, str]] = [
        (Escape, lambda: root.create(("mnt", "n.md"), b"n"), "mnt/n.md", "mnt"),
        (
            Escape,
            lambda: root.create(("mnt", "d", "n.md"), b"n", make_parents=True),
            "mnt/d/n.md",
            "mnt",
        ),
        (
            NotADirectory,
            lambda: root.create(("a.md", "n.md"), b"n", make_parents=True),
            "a.md/n.md",
            "a.md",
        ),
        (AlreadyExists, lambda: root.create(("a.md",), b"n"), "a.md", "a.md"),
        (Escape, lambda: root.mkdir(("mnt", "d")), "mnt/d", "mnt"),
        (Escape, lambda: root.mkdir(("out", "d", "e"), parents=True), "out/d/e", "out"),
        (NotADirectory, lambda: root.mkdir(("a.md", "d"), parents=True), "a.md/d", "a.md"),
        (AlreadyExists, lambda: root.mkdir(("real",)), "real", "real"),
        (
            Escape,
            lambda: root.update(("mnt", "x.md"), lambda r: b"y", max_bytes=10),
            "mnt/x.md",
            "mnt",
        ),
        (Escape, lambda: root.remove(("mnt", "x.md"), same), "mnt/x.md", "mnt"),
        (Escape, lambda: root.unlink(("mnt", "x.md")), "mnt/x.md", "mnt"),
        (NotFound, lambda: root.remove(("real", "gone.md"), same), "real/gone.md", "real/gone.md"),
    ]
    for kind, do, operand, culprit in cases:
        exc = _refused(ws, kind, do, operand)
        assert exc.path == culprit, (operand, exc)
