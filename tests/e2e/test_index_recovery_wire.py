"""The index is a cache, never the truth (issue 11), on the wire: a real `fsnotes serve`
(Landlock-jailed, the default) whose index file is damaged, deleted or shared.

* Truncated, overwritten, of an older schema, deleted: rebuilt without the user doing
  anything, logged as a WARNING, and the answers are right; damaged under a live server,
  the next queries recover. Never an SQLite message to the client.
* Two processes on one state dir: one builds (the scan lock), the other reads what it
  commits; both answer throughout, never see a half-written state, and end complete.
* The first build of a vault of a few thousand notes: a search with a progress token gets
  strictly increasing progress with one total, a cancelled search gets no response and the
  server keeps serving; a restart mid-build indexes only what the first run had not
  committed.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from e2e.index_wire import (
    assert_no_sqlite_text,
    call,
    found,
    generated_vault,
    index_files,
    reindexed_counts,
    search,
    the_index,
    wait_complete,
)
from e2e.state_helpers import corrupt
from e2e.wire import LEGACY, Wire, meta
from fsnotes.notes.index.indexer import INDEX_WAIT_S

NOTES = 240
FOLDERS = 6


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A small vault: note i holds word{i} and 'common'."""
    ws = tmp_path / "notes"
    for i in range(NOTES):
        folder = ws / f"f{i % FOLDERS}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{i}.md").write_text(f"# Note {i}\nword{i} common {'lorem ipsum ' * 40}\n")
    return ws


def _answers_right(w: Wire) -> None:
    everything = search(w, "common")
    assert everything["total"] == NOTES, everything
    assert everything["index"]["complete"] is True
    assert found(w, "word7") == ["f1/n7.md"]
    assert found(w, f"word{NOTES - 1}") == [f"f{(NOTES - 1) % FOLDERS}/n{NOTES - 1}.md"]


def _first_answers_right(w: Wire) -> None:
    """The first query after a start that must rebuild: it waits for the build and answers
    right, with nothing for the user to do. Only a machine so loaded that 240 notes take
    longer than the server's bounded wait (INDEX_WAIT_S) gets an answer that says it is
    incomplete instead, and only after waiting that long; the answers are right once the
    build ends. A server that does not wait (or rebuilds nothing) fails either way."""
    started = time.monotonic()
    first = search(w, "common")
    if not first["index"]["complete"]:
        assert time.monotonic() - started >= INDEX_WAIT_S * 0.9, first  # it did wait
        assert "still being indexed" in str(first), first
        wait_complete(w, timeout=120)
    _answers_right(w)


def _build(vault: Path, state: Path) -> Path:
    w = Wire(vault, state)
    try:
        wait_complete(w)
    finally:
        w.close()
    return the_index(state)


def _truncate_half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _junk_header(path: Path) -> None:
    with open(path, "r+b") as f:
        f.write(b"\xde\xad\xbe\xef junk " * 16)


def _older_schema(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=0")
    db.close()


def _empty(path: Path) -> None:
    os.truncate(path, 0)


@pytest.mark.parametrize(
    "damage", [_truncate_half, _junk_header, _older_schema, _empty], ids=lambda f: f.__name__
)
def test_a_damaged_index_is_rebuilt_at_start_and_answers_right(
    vault: Path, tmp_path: Path, damage: Any
) -> None:
    state = tmp_path / "state"
    index = _build(vault, state)
    damage(index)
    w = Wire(vault, state)
    try:
        _first_answers_right(w)
        assert_no_sqlite_text(w)
    finally:
        err = w.close()
    assert "WARNING fsnotes.index: search index" in err and "rebuilding it" in err, err
    assert reindexed_counts(err) == [NOTES], err


def test_deleting_the_index_while_stopped_loses_nothing(vault: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    _build(vault, state)
    shutil.rmtree(state / "index")
    w = Wire(vault, state)
    try:
        _first_answers_right(w)
        assert len(index_files(state)) == 1
    finally:
        err = w.close()
    assert reindexed_counts(err) == [NOTES], err


def _recovers(w: Wire) -> list[str]:
    """Query until the answers are right again; what the client was told meanwhile. Each
    answer is right, or honest about it: a one-call 'being rebuilt' error, or an answer
    marked incomplete."""
    told: list[str] = []
    deadline = time.monotonic() + 20
    while True:
        response = call(w, "notes_search", {"query": "common", "limit": 5})
        result = response["result"]
        if result.get("isError"):
            text = result["content"][0]["text"]
            assert "being rebuilt" in text, text
            told.append("rebuilt error")
        else:
            body = result["structuredContent"]
            if body["index"]["complete"]:
                assert body["total"] == NOTES, body
                return told
            told.append("incomplete")
        assert time.monotonic() < deadline, told
        time.sleep(0.1)


@pytest.mark.parametrize("damage", [corrupt, _truncate_half], ids=["junk", "truncated"])
def test_an_index_damaged_under_a_live_server_recovers(
    vault: Path, tmp_path: Path, damage: Any
) -> None:
    state = tmp_path / "state"
    w = Wire(vault, state)
    try:
        wait_complete(w)
        _answers_right(w)
        damage(the_index(state))
        told = _recovers(w)
        assert told.count("rebuilt error") <= 1, told
        _answers_right(w)
        assert_no_sqlite_text(w)
    finally:
        w.close()
    # And the file it leaves behind serves the next start.
    w = Wire(vault, state)
    try:
        _first_answers_right(w)
        assert_no_sqlite_text(w)
    finally:
        w.close()


# The real server with its bounded wait for the first build cut to nothing, so that a query
# answers at once from what is indexed (the behaviour past the bound): what a second
# process sees of a build while it runs.
NO_WAIT = (
    "import sys\n"
    "from fsnotes.notes.index import indexer\n"
    "indexer.until_indexed.__kwdefaults__['bound'] = 0.0\n"
    "from fsnotes.app.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
NO_WAIT_LAUNCHER = [sys.executable, "-c", NO_WAIT]


def _can_unshare_mounts() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


# The real server (answering at once from what is indexed, see NO_WAIT below) with its state
# dir on a 2 MiB tmpfs of a private mount namespace, nearly filled before it starts.
SERVE_ON_FULL_STATE = (
    'mount --make-rprivate / && mount -t tmpfs -o size=2m tmpfs "$3" && '
    'head -c 1700000 /dev/zero > "$3/filler" && '
    'exec "$2" -c "$4" serve --workspace "$1" --state-dir "$3" --principal ada'
)


def test_a_full_state_disk_is_not_taken_for_a_damaged_index(vault: Path, tmp_path: Path) -> None:
    if not _can_unshare_mounts():
        pytest.skip("needs `unshare -m` (root or user namespaces) to mount a small tmpfs")
    state = tmp_path / "state"
    state.mkdir()
    argv = ["unshare", "-m", "sh", "-c", SERVE_ON_FULL_STATE, "sh"]
    w = Wire.spawn([*argv, str(vault), sys.executable, str(state), NO_WAIT])
    try:
        inside = Path(f"/proc/{w.proc.pid}/root{state}")  # the tmpfs, as the server sees it
        # The index cannot be made, or its first scan cannot write: either way the disk is
        # named as full (other state files take part of this small disk first).
        w.stderr_until("the disk holding the state directory is full", timeout=20)
        # An answer that says it is not complete, or (when the index file itself could not
        # be made) a retryable error in one sentence: never a damaged index, never SQLite.
        reply = call(w, "notes_search", {"query": "common"})["result"]
        if reply.get("isError"):
            assert "try again" in reply["content"][0]["text"], reply
        else:
            body = reply["structuredContent"]
            assert body["index"]["complete"] is False and "still being indexed" in str(body)
        (inside / "filler").unlink()  # space again: the next rescan builds the index
        deadline = time.monotonic() + 20
        while not search(w, "common")["index"]["complete"]:
            assert time.monotonic() < deadline, "no build after space was freed"
            time.sleep(0.2)
        _answers_right(w)
        assert_no_sqlite_text(w)
    finally:
        err = w.close()
    # A full disk is not damage: the index file was never deleted and rebuilt for it.
    assert "damaged" not in err and "rebuilding" not in err, err


# --- a vault large enough for the first build to take seconds -----------------------------

BIG = 3000


@pytest.fixture(scope="session")
def big_vault(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    return generated_vault(tmp_path_factory, BIG)


def _observe(w: Wire, until: float, seen: list[dict[str, Any]], errors: list[str]) -> None:
    """Search for the vault's most common word until complete (or ``until``)."""
    while time.monotonic() < until:
        response = call(w, "notes_search", {"query": "the", "limit": 5})
        result = response.get("result")
        if result is None or result.get("isError"):
            errors.append(str(response)[:300])
            return
        body = result["structuredContent"]
        seen.append(body)
        if body["index"]["complete"]:
            return
        time.sleep(0.01)


def test_two_processes_build_once_and_read_consistently_meanwhile(
    big_vault: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    ws, _facts = big_vault
    state = tmp_path / "state"
    procs = [Wire(ws, state, launcher=NO_WAIT_LAUNCHER) for _ in range(2)]
    seen: list[list[dict[str, Any]]] = [[], []]
    errors: list[str] = []
    try:
        until = time.monotonic() + 40
        threads = [
            threading.Thread(target=_observe, args=(w, until, s, errors))
            for w, s in zip(procs, seen, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for answers in seen:
            assert answers[-1]["index"]["complete"] is True, answers[-1]
            assert answers[-1]["total"] == BIG and answers[-1]["index"]["indexedNotes"] == BIG
            indexed = [a["index"]["indexedNotes"] for a in answers]
            totals = [a["total"] for a in answers]
            assert indexed == sorted(indexed), indexed  # only ever grows
            assert totals == sorted(totals), totals
            for a in answers:
                # The figures are read one after the other while the build commits, so
                # they may differ a little while it runs; but an answer that says the
                # index is complete was counted on the complete index (every note holds
                # 'the' in some column).
                assert a["total"] <= a["scanned"], a
                if a["index"]["complete"]:
                    assert a["total"] == a["scanned"] == a["index"]["indexedNotes"] == BIG, a
                for hit in a["results"]:  # a note is found only whole: title and text
                    text = (ws / hit["path"]).read_text()
                    assert hit["title"] and hit["title"] in text, hit
                    assert hit["snippets"] and "**" in hit["snippets"][0]["text"], hit
        # At least one process answered while the build ran (else this proves nothing).
        assert any(not a["index"]["complete"] for answers in seen for a in answers), seen
        for w in procs:
            assert_no_sqlite_text(w)
    finally:
        errs = [w.close() for w in procs]
    # One build: the notes were (re)indexed once in all, by one process or the other.
    counts = [reindexed_counts(e) for e in errs]
    assert sum(sum(c) for c in counts) == BIG, counts
    assert sorted(len(c) for c in counts) == [0, 1], counts
    for e in errs:
        assert "failed" not in e and "damaged" not in e, e


def _progress_of(w: Wire, rid: int, into: list[dict[str, Any]], timeout: float) -> dict[str, Any]:
    """Read until the response to ``rid``; progress notifications collected by token."""
    deadline = time.monotonic() + timeout
    while True:
        message = w.read(max(0.0, deadline - time.monotonic()))
        assert message is not None, f"no response to request {rid}"
        if message.get("method") == "notifications/progress":
            into.append(message["params"])
            continue
        if message.get("id") == rid and ("result" in message or "error" in message):
            return message
        into.append({"other": message})


def test_first_build_reports_monotonic_progress_and_a_cancelled_search_gets_no_answer(
    big_vault: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    ws, facts = big_vault
    w = Wire(ws, tmp_path / "state")
    try:
        started = time.monotonic()
        init = w.call(
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        assert time.monotonic() - started < 5, "initialize waited for something"
        assert init["result"]["protocolVersion"] == LEGACY
        w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        def ask(rid: int, token: str, query: str) -> None:
            w.send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "tools/call",
                    "params": {
                        "_meta": {"progressToken": token},
                        "name": "notes_search",
                        "arguments": {"query": query},
                    },
                }
            )

        ask(10, "kept", "zephyrine")
        ask(11, "dropped", "kettle")
        messages: list[dict[str, Any]] = []
        # Wait for the cancelled one to be under way (its first progress), then cancel it.
        while not any(m.get("progressToken") == "dropped" for m in messages):
            message = w.read(15)
            assert message is not None, messages
            messages.append(message.get("params", message))
        w.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 11, "reason": "user gave up"},
            }
        )
        cancelled_at = len(messages)
        # Other requests are answered at once meanwhile.
        t0 = time.monotonic()
        w.send({"jsonrpc": "2.0", "id": 12, "method": "ping"})
        reply = _progress_of(w, 12, messages, 5)
        ping_s = time.monotonic() - t0
        assert reply["result"] == {} and ping_s < 1.0, (reply, ping_s)
        result = _progress_of(w, 10, messages, 30)
        body = result["result"]["structuredContent"]
        build_s = time.monotonic() - started
        if body["index"]["complete"]:
            assert body["total"] == facts["rare_notes"], body
        else:  # a machine slow enough for the build to outlast the wait: said so
            assert "still being indexed" in body["index"]["message"], body
        # Nothing more arrives for the cancelled request, and the server serves on.
        w.send({"jsonrpc": "2.0", "id": 13, "method": "ping"})
        _progress_of(w, 13, messages, 5)
        assert not any(m.get("other", {}).get("id") == 11 for m in messages), messages
        after_cancel = [m for m in messages[cancelled_at:] if m.get("progressToken") == "dropped"]
        assert len(after_cancel) <= 1, after_cancel  # at most one already on its way
        kept = [m for m in messages if m.get("progressToken") == "kept"]
        assert len(kept) >= 3, kept
        values = [m["progress"] for m in kept]
        assert all(b > a for a, b in itertools.pairwise(values)), values
        assert {m["total"] for m in kept} == {float(BIG)}, kept
        assert all("Indexing the workspace" in m["message"] for m in kept), kept
        assert_no_sqlite_text(w)
    finally:
        err = w.close()
    # The one full build logs its count when it ends; on a machine slow enough for it to
    # outlast the session (said so above) it is stopped at close and logs nothing.
    counts = reindexed_counts(err)
    assert counts == [BIG] or (not body["index"]["complete"] and counts == []), err
    print(f"first build of {BIG} notes answered after {build_s:.1f} s; ping {ping_s * 1000:.0f} ms")


def _committed(index: Path) -> int:
    db = sqlite3.connect(index)
    try:
        return int(db.execute("SELECT count(*) FROM notes").fetchone()[0])
    finally:
        db.close()


def test_a_restart_mid_build_indexes_only_what_was_not_committed(
    big_vault: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    ws, _facts = big_vault
    state = tmp_path / "state"
    first = Wire(ws, state)
    try:
        first.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "_meta": {**meta(), "progressToken": "p"},
                    "name": "notes_search",
                    "arguments": {"query": "kettle"},
                },
            }
        )
        while True:  # until a quarter of the vault is committed
            message = first.read(20)
            assert message is not None and message.get("method") == "notifications/progress"
            if message["params"]["progress"] >= BIG / 4:
                break
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
    finally:
        first.close()
    committed = _committed(the_index(state))
    assert BIG / 4 <= committed < BIG, committed
    second = Wire(ws, state)
    try:
        assert wait_complete(second)["indexedNotes"] == BIG
        assert search(second, "the")["total"] == BIG
    finally:
        err = second.close()
    assert reindexed_counts(err) == [BIG - committed], (committed, err)
    print(f"killed with {committed} of {BIG} committed; the restart indexed {BIG - committed}")
