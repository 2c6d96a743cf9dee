"""Behaviour of sandbox.root.Root on real files, for both resolvers (openat2 and the walk)."""

from __future__ import annotations

import contextlib
import errno
import multiprocessing
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from sandbox import _linux
from sandbox.errors import (
    AlreadyExists,
    DirectoryNotEmpty,
    HardLinked,
    IdentityMismatch,
    InvalidPath,
    LimitExceeded,
    NotADirectory,
    NotARegularFile,
    NotFound,
    SandboxError,
    TooLarge,
)
from sandbox.root import (
    REMOVE_PREFIX,
    RESOLVER_ENV,
    TEMP_PREFIX,
    FileIdentity,
    FileInfo,
    ReadResult,
    Resolver,
    Root,
    openat2_available,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest) -> Resolver:
    if request.param == "openat2" and not openat2_available():
        pytest.skip("openat2 is not usable on this kernel/seccomp profile")
    return cast(Resolver, request.param)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def root(ws: Path, resolver: Resolver) -> Iterator[Root]:
    with Root.open(ws, resolver=resolver) as r:
        yield r


def leftovers(path: Path) -> list[str]:
    """Our hidden temp / remove names anywhere below path."""
    return [
        p.name
        for p in path.rglob("*")
        if p.name.startswith(TEMP_PREFIX) or p.name.startswith(REMOVE_PREFIX)
    ]


# --- opening ------------------------------------------------------------------------------


def test_open_missing_directory_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound) as info:
        Root.open(tmp_path / "nope")
    assert str(tmp_path) not in str(info.value)


def test_open_file_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectory):
        Root.open(tmp_path / "f")


def test_open_records_identity_and_resolver(ws: Path, resolver: Resolver) -> None:
    st = ws.stat()
    with Root.open(ws, resolver=resolver) as r:
        assert r.identity == FileIdentity(st.st_dev, st.st_ino)
        assert r.resolver == resolver
        assert r.stat(()).identity == r.identity


def test_env_switch_forces_walk_resolver(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RESOLVER_ENV, "walk")
    with Root.open(ws) as r:
        assert r.resolver == "walk"


def test_env_switch_rejects_unknown_value(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RESOLVER_ENV, "magic")
    with pytest.raises(ValueError):
        Root.open(ws)


def test_auto_resolver_follows_probe(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RESOLVER_ENV, raising=False)
    with Root.open(ws) as r:
        assert r.resolver == ("openat2" if openat2_available() else "walk")


def test_probe_reports_a_bool_and_no_errno_when_available() -> None:
    assert isinstance(openat2_available(), bool)
    assert (_linux.openat2_probe_errno() is None) == openat2_available()


def test_closed_root_refuses_operations_and_close_is_idempotent(
    ws: Path, resolver: Resolver
) -> None:
    r = Root.open(ws, resolver=resolver)
    r.close()
    r.close()
    with pytest.raises(ValueError):
        r.stat(())


# --- stat and read ------------------------------------------------------------------------


def test_stat_reports_kinds_without_following(root: Root, ws: Path) -> None:
    (ws / "f.md").write_text("hello")
    (ws / "d").mkdir()
    os.symlink("f.md", ws / "l")
    os.mkfifo(ws / "p")
    assert root.stat(("f.md",)).kind == "file"
    assert root.stat(("f.md",)).size == 5
    assert root.stat(("d",)).kind == "dir"
    link = root.stat(("l",))
    assert link.kind == "symlink"
    assert link.identity.ino == os.lstat(ws / "l").st_ino
    assert root.stat(("p",)).kind == "other"
    with pytest.raises(NotFound):
        root.stat(("missing",))
    with pytest.raises(NotADirectory):
        root.stat(("f.md", "x"))


def test_read_returns_content_and_fstat_of_the_read_fd(root: Root, ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "n.md").write_bytes(b"# title\n")
    result = root.read(("d", "n.md"), max_bytes=100)
    assert isinstance(result, ReadResult)
    assert result.data == b"# title\n"
    st = os.stat(ws / "d" / "n.md")
    assert result.info.identity == FileIdentity(st.st_dev, st.st_ino)
    assert result.info.size == 8
    assert result.info.kind == "file"
    assert result.info.mtime_ns == st.st_mtime_ns


def test_read_empty_file(root: Root, ws: Path) -> None:
    (ws / "e").write_bytes(b"")
    assert root.read(("e",), max_bytes=0).data == b""


def test_read_at_exact_limit_succeeds_and_one_over_is_too_large(root: Root, ws: Path) -> None:
    (ws / "f").write_bytes(b"x" * 100)
    assert len(root.read(("f",), max_bytes=100).data) == 100
    with pytest.raises(TooLarge):
        root.read(("f",), max_bytes=99)


def test_read_larger_than_chunk_is_complete(root: Root, ws: Path) -> None:
    data = os.urandom(300_000)
    (ws / "big").write_bytes(data)
    assert root.read(("big",), max_bytes=1 << 20).data == data


def test_read_refuses_directory_and_missing(root: Root, ws: Path) -> None:
    (ws / "d").mkdir()
    with pytest.raises(NotARegularFile):
        root.read(("d",), max_bytes=10)
    with pytest.raises(NotFound):
        root.read(("nope",), max_bytes=10)
    with pytest.raises(InvalidPath):
        root.read((), max_bytes=10)


def test_read_many_checks_each_file_as_read_does_and_gives_what_read_gives(
    root: Root, ws: Path, tmp_path: Path, resolver: Resolver
) -> None:
    """Root.read_many opens each file as read does: a symlink (to outside or not), a
    directory, a FIFO (without blocking), a hard link, a missing file and a name layer 1
    refuses each give the error read raises, in their place, and the rest their content."""
    from sandbox.errors import Escape

    (ws / "note.md").write_text("words")
    (ws / "big.md").write_text("x" * 50)
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    os.symlink(secret, ws / "out.md")
    os.symlink("note.md", ws / "in.md")
    (ws / "d").mkdir()
    os.mkfifo(ws / "pipe.md")
    (ws / "shared.md").write_text("twice")
    os.link(ws / "shared.md", ws / "twin.md")
    names = ["out.md", "note.md", "in.md", "d", "pipe.md", "twin.md", "nope.md", "..", "big.md"]
    got = list(root.read_many((), names, max_bytes=10))
    assert [name for name, _ in got] == names
    for name, result in got:
        try:
            expected: object = root.read((name,), max_bytes=10)
        except SandboxError as exc:
            expected = exc
        if isinstance(expected, SandboxError):
            assert type(result) is type(expected), name
            assert str(result) == str(expected), name
        else:
            assert result == expected, name
    assert dict(got)["note.md"] == root.read(("note.md",), max_bytes=10)
    assert isinstance(dict(got)["out.md"], Escape)
    assert isinstance(dict(got)["big.md"], TooLarge)
    with Root.open(ws, resolver=resolver, allow_hardlinked_reads=True) as r:
        [(_, twin)] = list(r.read_many((), ["twin.md"], max_bytes=10))
        assert isinstance(twin, ReadResult) and twin.data == b"twice"


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_read_many_names_a_window_to_the_kernel_before_reading_and_closes_what_it_holds(
    root: Root, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file of a window is opened and hinted (posix_fadvise WILLNEED) before the
    first of them is read; at most a window of descriptors is held, and a caller that stops
    half-way leaves none open."""
    import sandbox.root as rootmod

    monkeypatch.setattr(rootmod, "READ_MANY_WINDOW", 3)
    for i in range(7):
        (ws / f"n{i}.md").write_text(f"note {i}")
    events: list[str] = []
    advise = rootmod._advise_willneed
    read_fd = rootmod.read_fd

    def hinting(fd: int, st: os.stat_result) -> None:
        events.append("hint")
        advise(fd, st)

    def reading(fd: int, st: os.stat_result, max_bytes: int, parts: tuple[str, ...]) -> bytes:
        events.append("read " + parts[-1])
        return read_fd(fd, st, max_bytes, parts)

    monkeypatch.setattr(rootmod, "_advise_willneed", hinting)
    monkeypatch.setattr(rootmod, "read_fd", reading)
    names = [f"n{i}.md" for i in range(7)]
    got = []
    for name, result in root.read_many((), names, max_bytes=100):
        assert isinstance(result, ReadResult)
        got.append((name, result.data))
    assert got == [(f"n{i}.md", f"note {i}".encode()) for i in range(7)]
    windows = [names[0:3], names[3:6], names[6:7]]
    assert events == [e for w in windows for e in ["hint"] * len(w) + [f"read {n}" for n in w]]

    before = _open_fds()
    many = root.read_many((), names, max_bytes=100)
    next(many)
    assert _open_fds() == before + 2  # the rest of the first window
    many.close()
    assert _open_fds() == before


def test_read_refuses_hard_linked_file_unless_allowed(ws: Path, resolver: Resolver) -> None:
    (ws / "a").write_text("shared")
    os.link(ws / "a", ws / "b")
    with Root.open(ws, resolver=resolver) as r, pytest.raises(HardLinked):
        r.read(("a",), max_bytes=100)
    with Root.open(ws, resolver=resolver, allow_hardlinked_reads=True) as r:
        assert r.read(("a",), max_bytes=100).data == b"shared"
        with pytest.raises(HardLinked):
            r.replace(("a",), b"new", max_bytes=100)
    assert (ws / "b").read_text() == "shared"


# --- create -------------------------------------------------------------------------------


def test_create_writes_new_file_with_umask_mode(root: Root, ws: Path) -> None:
    old = os.umask(0o022)
    try:
        info = root.create(("n.md",), b"content")
    finally:
        os.umask(old)
    assert (ws / "n.md").read_bytes() == b"content"
    assert stat.S_IMODE(os.stat(ws / "n.md").st_mode) == 0o644
    assert info.identity.ino == os.stat(ws / "n.md").st_ino
    assert info.size == 7


def test_create_refuses_existing_name(root: Root, ws: Path) -> None:
    (ws / "n.md").write_text("old")
    with pytest.raises(AlreadyExists):
        root.create(("n.md",), b"new")
    assert (ws / "n.md").read_text() == "old"


def test_create_without_parents_is_not_found_and_with_parents_makes_them(
    root: Root, ws: Path
) -> None:
    with pytest.raises(NotFound):
        root.create(("a", "b", "n.md"), b"x")
    root.create(("a", "b", "n.md"), b"x", make_parents=True)
    assert (ws / "a" / "b" / "n.md").read_bytes() == b"x"
    root.create(("a", "b", "m.md"), b"y", make_parents=True)  # existing parents are fine
    assert (ws / "a" / "b" / "m.md").read_bytes() == b"y"


def test_create_with_parents_stops_at_a_file(root: Root, ws: Path) -> None:
    (ws / "f").write_text("x")
    with pytest.raises(NotADirectory):
        root.create(("f", "n.md"), b"x", make_parents=True)


FAILING_WRITE = textwrap.dedent(
    """
    import resource, signal, sys
    from sandbox.root import Root
    from sandbox.errors import SandboxError
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # get EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
    r = Root.open(sys.argv[1], resolver=sys.argv[2])
    try:
        if sys.argv[3] == "create":
            r.create(("new.md",), b"x" * 5000)
        else:
            r.replace(("old.md",), b"y" * 5000, max_bytes=100)
    except SandboxError as exc:
        print(type(exc).__name__)
    """
)


@pytest.mark.parametrize("operation", ["create", "replace"])
def test_failed_write_leaves_no_new_file_and_no_temp(
    ws: Path, resolver: Resolver, operation: str
) -> None:
    # A real write failure: RLIMIT_FSIZE makes write(2) fail with EFBIG in a child process.
    (ws / "old.md").write_text("original")
    out = subprocess.run(
        [sys.executable, "-c", FAILING_WRITE, str(ws), resolver, operation],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "TooLarge"
    assert sorted(p.name for p in ws.iterdir()) == ["old.md"]
    assert (ws / "old.md").read_text() == "original"


# --- update / replace ---------------------------------------------------------------------


def test_replace_swaps_content_atomically_and_keeps_permission_bits(root: Root, ws: Path) -> None:
    target = ws / "n.md"
    target.write_text("old")
    os.chmod(target, 0o640)
    before = os.stat(target)
    info = root.replace(("n.md",), b"new", max_bytes=100)
    after = os.stat(target)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(after.st_mode) == 0o640
    assert after.st_ino != before.st_ino  # a new inode, renamed over the name
    assert info.identity == FileIdentity(after.st_dev, after.st_ino)
    assert leftovers(ws) == []


def test_replace_drops_setuid_bits(root: Root, ws: Path) -> None:
    target = ws / "n.md"
    target.write_text("old")
    os.chmod(target, 0o4755)
    root.replace(("n.md",), b"new", max_bytes=100)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o755


def test_replace_missing_file_is_not_found(root: Root) -> None:
    with pytest.raises(NotFound):
        root.replace(("n.md",), b"x", max_bytes=10)


def test_update_passes_current_content_and_writes_result(root: Root, ws: Path) -> None:
    (ws / "c").write_text("41")
    seen: list[ReadResult] = []

    def bump(current: ReadResult) -> bytes:
        seen.append(current)
        return str(int(current.data) + 1).encode()

    root.update(("c",), bump, max_bytes=10)
    assert (ws / "c").read_text() == "42"
    assert seen[0].data == b"41"


def test_update_transform_exception_propagates_and_nothing_is_written(root: Root, ws: Path) -> None:
    (ws / "c").write_text("keep")

    class Boom(Exception):
        pass

    def fail(_: ReadResult) -> bytes:
        raise Boom("no")

    with pytest.raises(Boom):
        root.update(("c",), fail, max_bytes=10)
    assert (ws / "c").read_text() == "keep"
    assert leftovers(ws) == []


def test_update_refuses_when_the_name_was_swapped_during_transform(root: Root, ws: Path) -> None:
    (ws / "c").write_text("v1")
    (ws / "other").write_text("someone else's")

    def swap_then_return(_: ReadResult) -> bytes:
        os.rename(ws / "other", ws / "c")  # another program replaces the file meanwhile
        return b"v2"

    with pytest.raises(IdentityMismatch):
        root.update(("c",), swap_then_return, max_bytes=10)
    assert (ws / "c").read_text() == "someone else's"
    assert leftovers(ws) == []


def test_update_too_large_reads_nothing_and_writes_nothing(root: Root, ws: Path) -> None:
    (ws / "c").write_bytes(b"x" * 50)
    with pytest.raises(TooLarge):
        root.replace(("c",), b"y", max_bytes=10)
    assert (ws / "c").read_bytes() == b"x" * 50
    assert leftovers(ws) == []


def _increment_many(ws: str, resolver: Resolver, times: int) -> None:
    r = Root.open(ws, resolver=resolver)
    for _ in range(times):
        r.update(("counter",), lambda cur: str(int(cur.data) + 1).encode(), max_bytes=20)
    r.close()


def test_concurrent_updaters_in_processes_lose_no_update(ws: Path, resolver: Resolver) -> None:
    (ws / "counter").write_text("0")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_increment_many, args=(str(ws), resolver, 40)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert (ws / "counter").read_text() == "120"
    assert leftovers(ws) == []


# --- listing ------------------------------------------------------------------------------


def test_listdir_is_sorted_with_lstat_kinds(root: Root, ws: Path) -> None:
    (ws / "b.md").write_text("b")
    (ws / "a").mkdir()
    os.symlink("/etc", ws / "c")
    entries = root.listdir(())
    assert [(e.name, e.info.kind) for e in entries] == [
        ("a", "dir"),
        ("b.md", "file"),
        ("c", "symlink"),
    ]
    assert entries[2].info.identity.ino == os.lstat(ws / "c").st_ino


def test_listdir_subdirectory_and_errors(root: Root, ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "x").write_text("x")
    (ws / "f").write_text("f")
    assert [e.name for e in root.listdir(("d",))] == ["x"]
    with pytest.raises(NotADirectory):
        root.listdir(("f",))
    with pytest.raises(NotFound):
        root.listdir(("missing",))


def test_listdir_raises_past_max_entries(root: Root, ws: Path) -> None:
    for name in ("a", "b", "c"):
        (ws / name).write_text(name)
    assert [e.name for e in root.listdir((), max_entries=3)] == ["a", "b", "c"]
    with pytest.raises(LimitExceeded):
        root.listdir((), max_entries=2)


# --- mkdir, unlink, rmdir -----------------------------------------------------------------


def test_mkdir_variants(root: Root, ws: Path) -> None:
    root.mkdir(("d",))
    assert (ws / "d").is_dir()
    with pytest.raises(AlreadyExists):
        root.mkdir(("d",))
    root.mkdir(("d",), exist_ok=True)
    with pytest.raises(NotFound):
        root.mkdir(("x", "y"))
    root.mkdir(("x", "y", "z"), parents=True)
    assert (ws / "x" / "y" / "z").is_dir()
    os.symlink("d", ws / "ld")
    with pytest.raises(AlreadyExists):
        root.mkdir(("ld",), exist_ok=True)  # a symlink to a directory is not a directory


def test_unlink_file_and_symlink_but_not_directory(root: Root, ws: Path) -> None:
    (ws / "f").write_text("x")
    (ws / "d").mkdir()
    os.symlink("d", ws / "l")
    root.unlink(("f",))
    root.unlink(("l",))
    assert not (ws / "f").exists()
    assert not os.path.lexists(ws / "l")
    assert (ws / "d").is_dir()
    with pytest.raises(NotARegularFile):
        root.unlink(("d",))
    with pytest.raises(NotFound):
        root.unlink(("f",))


def test_rmdir_empty_only(root: Root, ws: Path) -> None:
    (ws / "e").mkdir()
    (ws / "full").mkdir()
    (ws / "full" / "x").write_text("x")
    (ws / "f").write_text("x")
    os.symlink("e", ws / "l")
    root.rmdir(("e",))
    assert not (ws / "e").exists()
    with pytest.raises(DirectoryNotEmpty):
        root.rmdir(("full",))
    with pytest.raises(NotADirectory):
        root.rmdir(("f",))
    with pytest.raises(NotADirectory):
        root.rmdir(("l",))
    with pytest.raises(InvalidPath):
        root.rmdir(())


# --- move ---------------------------------------------------------------------------------


def test_move_renames_and_returns_info(root: Root, ws: Path) -> None:
    (ws / "a.md").write_text("a")
    ino = os.stat(ws / "a.md").st_ino
    (ws / "d").mkdir()
    info = root.move(("a.md",), ("d", "b.md"))
    assert (ws / "d" / "b.md").read_text() == "a"
    assert not (ws / "a.md").exists()
    assert info.identity.ino == ino


def test_move_never_replaces_destination(root: Root, ws: Path) -> None:
    (ws / "a").write_text("a")
    (ws / "b").write_text("b")
    with pytest.raises(AlreadyExists):
        root.move(("a",), ("b",))
    assert (ws / "a").read_text() == "a"
    assert (ws / "b").read_text() == "b"


def test_move_make_parents_and_directories(root: Root, ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "x").write_text("x")
    root.move(("d",), ("p", "q", "d2"), make_parents=True)
    assert (ws / "p" / "q" / "d2" / "x").read_text() == "x"
    with pytest.raises(InvalidPath):
        root.move(("p",), ("p", "q", "inside"))


def test_move_with_expect_refuses_another_inode(root: Root, ws: Path) -> None:
    (ws / "a").write_text("a")
    st = os.stat(ws / "a")
    with pytest.raises(IdentityMismatch):
        root.move(("a",), ("b",), expect=FileIdentity(st.st_dev, st.st_ino + 1))
    assert (ws / "a").exists()
    root.move(("a",), ("b",), expect=FileIdentity(st.st_dev, st.st_ino))
    assert (ws / "b").read_text() == "a"


def _no_renameat2(*args: object) -> None:
    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))


def test_move_fallback_without_renameat2_still_never_replaces(
    root: Root, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection of the one syscall: ENOSYS as on kernels older than 3.15.
    monkeypatch.setattr(_linux, "renameat2", _no_renameat2)
    (ws / "a").write_text("a")
    (ws / "b").write_text("b")
    os.symlink("/etc/passwd", ws / "l")
    (ws / "d").mkdir()
    (ws / "e").mkdir()
    with pytest.raises(AlreadyExists):
        root.move(("a",), ("b",))
    with pytest.raises(AlreadyExists):
        root.move(("d",), ("e",))
    root.move(("a",), ("c",))
    root.move(("l",), ("l2",))
    root.move(("d",), ("d2",))
    assert (ws / "c").read_text() == "a"
    assert not (ws / "a").exists()
    assert os.readlink(ws / "l2") == "/etc/passwd"
    assert (ws / "d2").is_dir()
    assert os.stat(ws / "c").st_nlink == 1
    st = os.stat(ws / "b")
    with pytest.raises(IdentityMismatch):
        root.remove(("b",), FileIdentity(st.st_dev, st.st_ino + 1))
    assert (ws / "b").read_text() == "b"  # put back by the fallback
    assert os.stat(ws / "b").st_nlink == 1
    root.remove(("b",), FileIdentity(st.st_dev, st.st_ino))
    assert not (ws / "b").exists()
    assert leftovers(ws) == []


# --- identity-checked remove --------------------------------------------------------------


def test_remove_with_confirmed_identity(root: Root, ws: Path) -> None:
    (ws / "n.md").write_text("x")
    info = root.stat(("n.md",))
    root.remove(("n.md",), info.identity)
    assert not (ws / "n.md").exists()
    assert leftovers(ws) == []


def test_remove_refuses_a_different_file_and_puts_it_back(root: Root, ws: Path) -> None:
    (ws / "n.md").write_text("x")
    info = root.stat(("n.md",))
    os.rename(ws / "n.md", ws / "kept")  # kept alive so its inode number is not reused
    (ws / "n.md").write_text("another file")
    with pytest.raises(IdentityMismatch):
        root.remove(("n.md",), info.identity)
    assert (ws / "n.md").read_text() == "another file"
    assert (ws / "kept").read_text() == "x"
    assert leftovers(ws) == []


def test_remove_refuses_a_directory(root: Root, ws: Path) -> None:
    (ws / "d").mkdir()
    info = root.stat(("d",))
    with pytest.raises(IdentityMismatch):
        root.remove(("d",), info.identity)
    assert (ws / "d").is_dir()


def test_remove_missing_is_not_found(root: Root) -> None:
    with pytest.raises(NotFound):
        root.remove(("n.md",), FileIdentity(1, 1))


# --- component checks, messages, descriptors ----------------------------------------------

BAD_PARTS = [("..",), (".",), ("",), ("a/b",), ("a\0b",), ("ok", ".."), ("/etc",)]


@pytest.mark.parametrize("bad", BAD_PARTS)
def test_every_method_refuses_bad_components(root: Root, bad: tuple[str, ...]) -> None:
    identity = FileIdentity(0, 0)
    calls = [
        lambda: root.stat(bad),
        lambda: root.read(bad, max_bytes=10),
        lambda: root.create(bad, b"x"),
        lambda: root.replace(bad, b"x", max_bytes=10),
        lambda: root.listdir(bad),
        lambda: root.mkdir(bad),
        lambda: root.unlink(bad),
        lambda: root.rmdir(bad),
        lambda: root.move(bad, ("x",)),
        lambda: root.move(("x",), bad),
        lambda: root.remove(bad, identity),
    ]
    for call in calls:
        with pytest.raises(InvalidPath):
            call()


def test_a_string_instead_of_components_is_refused(root: Root) -> None:
    with pytest.raises(InvalidPath):
        root.stat("etc")  # type: ignore[arg-type]


def test_error_messages_name_only_the_relative_path(root: Root, ws: Path) -> None:
    (ws / "f").write_text("x")
    (ws / "d").mkdir()
    failures = [
        lambda: root.read(("nope", "x.md"), max_bytes=1),
        lambda: root.read(("d",), max_bytes=1),
        lambda: root.create(("f",), b""),
        lambda: root.listdir(("f",)),
        lambda: root.read(("f",), max_bytes=0),
    ]
    for call in failures:
        with pytest.raises(SandboxError) as info:
            call()
        assert str(ws) not in str(info.value)
        assert str(ws.parent) not in str(info.value)


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_no_descriptor_leaks_over_hundreds_of_operations(root: Root, ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f.md").write_text("x")
    os.symlink("/etc", ws / "evil")
    os.mkfifo(ws / "fifo")
    ops = [
        lambda i: root.read(("d", "f.md"), max_bytes=10),
        lambda i: root.read(("evil", "passwd"), max_bytes=10),
        lambda i: root.read(("fifo",), max_bytes=10),
        lambda i: root.read(("d", "missing"), max_bytes=10),
        lambda i: root.stat(("d", "f.md")),
        lambda i: root.stat(("evil", "x")),
        lambda i: root.create(("d", f"n{i}"), b"x"),
        lambda i: root.create(("evil", f"n{i}"), b"x"),
        lambda i: root.create(("a", "b", f"n{i}"), b"x", make_parents=True),
        lambda i: root.replace(("d", "f.md"), b"y", max_bytes=10),
        lambda i: root.replace(("d", "f.md"), b"y", max_bytes=0),
        lambda i: root.listdir(("d",)),
        lambda i: root.listdir(("evil",)),
        lambda i: root.mkdir(("m", str(i)), parents=True),
        lambda i: root.move(("d", f"n{i}"), ("a", f"moved{i}")),
        lambda i: root.move(("d", "f.md"), ("evil", "x")),
        lambda i: root.unlink(("a", f"moved{i}")),
        lambda i: root.rmdir(("m", str(i))),
        lambda i: root.rmdir(("d",)),
        lambda i: root.remove(("a", "b", f"n{i}"), root.stat(("a", "b", f"n{i}")).identity),
        lambda i: root.remove(("d", "f.md"), FileIdentity(0, 0)),
    ]
    before = _fd_count()
    for i in range(15):
        for op in ops:
            with contextlib.suppress(SandboxError):
                op(i)
    assert _fd_count() == before
    assert leftovers(ws) == []


def test_info_objects_equal_normally_constructed_dataclasses(root: Root, ws: Path) -> None:
    # Root builds FileInfo through slot descriptors for speed; they must be the same values.
    (ws / "f").write_bytes(b"abc")
    st = os.lstat(ws / "f")
    expected = FileInfo(
        kind="file",
        size=3,
        mtime_ns=st.st_mtime_ns,
        mode=st.st_mode,
        nlink=1,
        identity=FileIdentity(st.st_dev, st.st_ino),
    )
    assert root.stat(("f",)) == expected
    result = root.read(("f",), max_bytes=3)
    assert result == ReadResult(b"abc", expected)
    assert hash(result.info) == hash(expected)
    with pytest.raises(AttributeError):
        result.info.size = 4  # type: ignore[misc]


@pytest.mark.parametrize(("grow_by", "max_bytes", "outcome"), [(5, 100, "ok"), (50, 20, "large")])
def test_file_growing_after_fstat_is_read_whole_or_refused(
    tmp_path: Path, grow_by: int, max_bytes: int, outcome: str
) -> None:
    # The read path trusts fstat's size only as a hint: a file that grows between fstat and
    # read is read on to EOF, and never past max_bytes + 1 bytes.
    f = tmp_path / "g"
    f.write_bytes(b"x" * 10)
    fd = os.open(f, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        with open(f, "ab") as w:
            w.write(b"y" * grow_by)
        if outcome == "ok":
            assert Root._read_fd(fd, st, max_bytes, ("g",)) == b"x" * 10 + b"y" * grow_by
        else:
            with pytest.raises(TooLarge):
                Root._read_fd(fd, st, max_bytes, ("g",))
            assert os.lseek(fd, 0, os.SEEK_CUR) <= max_bytes + 1
    finally:
        os.close(fd)


def test_names_that_are_not_utf8_round_trip(root: Root, ws: Path) -> None:
    os.close(os.open(bytes(ws) + b"/caf\xe9.md", os.O_CREAT | os.O_WRONLY, 0o644))
    (name,) = [e.name for e in root.listdir(())]
    assert name == "caf\udce9.md"  # surrogateescape, as os.listdir gives it
    assert root.read((name,), max_bytes=10).data == b""
    root.replace((name,), b"ok", max_bytes=10)
    assert (ws / name).read_bytes() == b"ok"


def test_fileno_is_the_workspace_directory_and_stays_owned(
    tmp_path: Path, resolver: Resolver
) -> None:
    root = Root.open(tmp_path, resolver=resolver)
    fd = root.fileno()
    st = os.fstat(fd)
    assert (st.st_dev, st.st_ino) == (root.identity.dev, root.identity.ino)
    root.close()
    with pytest.raises(ValueError):
        root.fileno()


# --- subroot -------------------------------------------------------------------------------


def test_subroot_holds_the_folder_by_descriptor_and_refuses_links_files_and_escapes(
    ws: Path, tmp_path: Path, resolver: Resolver
) -> None:
    from sandbox.errors import Escape

    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "n.md").write_text("inner")
    (ws / "file.md").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    (ws / "link").symlink_to(outside)
    (ws / "a" / "up").symlink_to("..")
    with Root.open(ws, resolver=resolver) as root:
        sub = root.subroot(("a", "b"))
        try:
            assert sub.resolver == resolver
            assert sub.read(("n.md",), max_bytes=100).data == b"inner"
            assert sub.identity == FileIdentity(
                os.stat(ws / "a" / "b").st_dev, os.stat(ws / "a" / "b").st_ino
            )
            # Renaming the folder afterwards does not redirect the sub-root: it holds the inode.
            os.rename(ws / "a" / "b", ws / "a" / "moved")
            assert sub.read(("n.md",), max_bytes=100).data == b"inner"
        finally:
            sub.close()
        with pytest.raises(Escape):
            root.subroot(("link",))
        with pytest.raises(Escape):
            root.subroot(("a", "up"))
        with pytest.raises(NotADirectory):
            root.subroot(("file.md",))
        with pytest.raises(NotFound):
            root.subroot(("missing",))
        for bad in [(), ("..",), ("a/b",), ("",)]:
            with pytest.raises(InvalidPath):
                root.subroot(bad)
    # The parent closing does not close the sub-root's own descriptor.
    with Root.open(ws, resolver=resolver) as root:
        sub = root.subroot(("a",))
    try:
        assert [e.name for e in sub.listdir(())] == ["moved", "up"]
    finally:
        sub.close()
