"""The assembled server (fsnotes/app/server.py): what it opens, it closes."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from fsnotes.app.config import load
from fsnotes.app.server import build


def _open_under(folder: Path) -> list[str]:
    """The files under ``folder`` this process holds a descriptor of."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used, closed meanwhile
            continue
        if target.startswith(f"{folder}/"):
            held.append(target)
    return sorted(held)


def test_close_releases_every_state_file_any_thread_opened(tmp_path: Path) -> None:
    """A server embedded in a longer-lived process (a test suite, a host) can be closed and
    its state directory removed: no store keeps a database open, whichever thread used it
    (the SQLite stores hold a connection per thread)."""
    vault, state, shared = tmp_path / "notes", tmp_path / "state", tmp_path / "shared"
    vault.mkdir()
    shared.mkdir()
    (vault / "a.md").write_text("# A\n\nalpha\n")
    cfg = load(
        workspaces=[str(vault)],
        state_dir=str(state),
        principal="ada",
        setup_allow=[str(shared)],
        env={},
    )
    srv = build(cfg)
    uri = (vault / "a.md").as_uri()

    def work(text: str) -> None:
        notes = srv.service.acting_for("ada")
        etag = notes.notes_read(uri, None, None).etag
        notes.notes_update(uri, text, None, etag)  # the audit log and the history
        assert not srv.replay.is_used(f"never-claimed-{text}")
        assert srv.setup.store is not None and srv.setup.store.grants() is not None

    worked, released = threading.Event(), threading.Event()

    def pooled() -> None:  # alive after its work, as a pool's threads are
        work("# A\n\ngamma\n")
        worked.set()
        released.wait(timeout=60)

    work("# A\n\nbeta\n")
    worker = threading.Thread(target=pooled)
    worker.start()
    try:
        assert worked.wait(timeout=60)
        assert any(p.endswith(".sqlite3") for p in _open_under(state)), _open_under(state)
        srv.close()
        left = _open_under(state)
        assert left == [], "\n".join(left)
    finally:
        released.set()
        worker.join()
