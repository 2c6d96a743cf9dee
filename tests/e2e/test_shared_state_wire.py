"""Shared state on the wire: real `fsnotes serve` processes (jailed: Landlock on) on either
backend, the audit log read back with the real `fsnotes audit`, and PostgreSQL stopped and
started again under a running server."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.wire import Wire
from fsnotes.setup.code import CODE_FILE
from tests.setup.person import Person, free_port

FORM = {"elicitation": {"form": {}}}
URL_CAPS = {"elicitation": {"url": {}}}
SECRET_TEXT = "the body of a note is never in the audit log"


def fsnotes(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "fsnotes", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def result_of(reply: dict[str, Any]) -> dict[str, Any]:
    result = reply["result"]
    assert not result.get("isError"), result
    return dict(result["structuredContent"])


def error_text(reply: dict[str, Any]) -> str:
    result = reply["result"]
    assert result.get("isError") is True, result
    return str(result["content"][0]["text"])


def confirm_delete(wire: Wire, args: dict[str, Any], note_id: str) -> tuple[dict[str, Any], Any]:
    """The first round of notes_delete and the accepting answer to send with a retry."""
    first = wire.tool("notes_delete", args, FORM)["result"]
    assert first["resultType"] == "input_required", first
    ((key, _),) = first["inputRequests"].items()
    answer = {
        "inputResponses": {
            key: {"action": "accept", "content": {"note_id": note_id, "confirm": True}}
        },
        "requestState": first["requestState"],
    }
    return answer, first


@pytest.fixture
def place(tmp_path: Path) -> Path:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.md").write_text("# Keep\n")
    (tmp_path / "shared" / "proj").mkdir(parents=True)
    return tmp_path


def test_every_mutation_kind_is_audited_through_the_real_server(
    place: Path, backend_dsn: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"FSNOTES_INSTANCE": "wire-a"}
    if backend_dsn is not None:
        env["FSNOTES_DATABASE"] = backend_dsn
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    port = free_port()
    shared = ["--setup-allow", str(place / "shared")]
    wire = Wire(place / "notes", place / "state", *shared, "--setup-port", str(port))
    notes = place / "notes"
    try:
        ws = notes.as_uri()
        created = result_of(
            wire.tool("notes_create", {"workspaceUri": ws, "path": "a.md", "content": SECRET_TEXT})
        )
        updated = result_of(
            wire.tool(
                "notes_update",
                {"uri": created["uri"], "content": SECRET_TEXT + " (v2)", "etag": created["etag"]},
            )
        )
        conflict = wire.tool(
            "notes_update", {"uri": created["uri"], "content": "x", "etag": created["etag"]}
        )
        assert "changed since you read it" in error_text(conflict)
        moved = result_of(
            wire.tool(
                "notes_move", {"uri": created["uri"], "newPath": "b.md", "etag": updated["etag"]}
            )
        )
        answer, _ = confirm_delete(wire, {"uri": moved["uri"]}, "b.md")
        deleted = result_of(wire.tool("notes_delete", {"uri": moved["uri"]}, FORM, **answer))
        assert deleted["deleted"] is True and not (notes / "b.md").exists()

        # A grant through notes_setup, approved by a person on the real page.
        proj = place / "shared" / "proj"
        setup_args = {"workspaceUri": proj.as_uri(), "access": "write"}
        first = wire.tool("notes_setup", setup_args, URL_CAPS)["result"]
        url = first["inputRequests"]["connect_folder"]["params"]["url"]
        code = (place / "state" / CODE_FILE).read_text().strip()
        assert Person(port).decide(url, "approve", code).status == 200
    finally:
        wire.close()
    # The revocation at a terminal.
    revoked = fsnotes(
        "grant", "--state-dir", str(place / "state"), *shared, "--principal", "ada",
        "--workspace", str(proj), "--revoke",
    )  # fmt: skip
    assert revoked.returncode == 0, revoked.stderr

    listed = fsnotes("audit", "--state-dir", str(place / "state"), "--json")
    assert listed.returncode == 0, listed.stderr
    assert SECRET_TEXT not in listed.stdout
    if backend_dsn is not None:
        assert not (place / "state" / "audit.sqlite3").exists()  # it went to PostgreSQL
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    seen = [
        (r["action"], r["tool"], r["outcome"], r["path"], r["path_after"], r["workspace"])
        for r in rows
    ]
    assert seen == [
        ("create", "notes_create", "done", "a.md", None, "notes"),
        ("update", "notes_update", "done", "a.md", None, "notes"),
        ("update", "notes_update", "failed", "a.md", None, "notes"),
        ("move", "notes_move", "done", "a.md", "b.md", "notes"),
        ("delete", "notes_delete", "done", "b.md", None, "notes"),
        ("grant", "notes_setup", "done", None, None, str(proj)),
        ("revoke", "fsnotes grant --revoke", "done", None, None, str(proj)),
    ], seen
    create, update, _conflict, move, delete, grant, revoke = rows
    assert (create["etag_before"], create["etag_after"]) == (None, created["etag"])
    assert (update["etag_before"], update["etag_after"]) == (created["etag"], updated["etag"])
    assert (move["etag_before"], move["etag_after"]) == (updated["etag"], moved["etag"])
    assert (delete["etag_before"], delete["confirmed_by"]) == (moved["etag"], "ada")
    assert (grant["confirmed_by"], grant["detail"]) == ("setup page", "access write")
    assert revoke["confirmed_by"] == "terminal"
    assert {r["principal"] for r in rows} == {"ada"}
    assert {r["instance"] for r in rows} == {"wire-a"}
    assert all(r["time"].endswith("Z") and r["finished"] is not None for r in rows)


@pytest.fixture
def own_cluster(pg_cluster: Any) -> Iterator[Any]:
    import pgcluster

    with pgcluster.running() as cluster:
        yield cluster


def _until_ok(call: Any, within: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        reply = call()
        result = reply["result"]
        if not result.get("isError"):
            return dict(result)
        text = result["content"][0]["text"]
        assert "try again" in text, text
        assert time.monotonic() < deadline, text
        time.sleep(0.5)


def test_postgresql_stopped_under_a_running_server_is_retryable_and_resumes(
    place: Path, own_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pgcluster import PASSWORD

    monkeypatch.setenv("FSNOTES_DATABASE", own_cluster.new_database())
    notes = place / "notes"
    (notes / "doomed.md").write_text("# Doomed\n")
    wire = Wire(notes, place / "state")
    try:
        ws = notes.as_uri()
        answer, _ = confirm_delete(wire, {"uri": (notes / "doomed.md").as_uri()}, "doomed.md")
        own_cluster.stop()

        text = error_text(
            wire.tool("notes_create", {"workspaceUri": ws, "path": "new.md", "content": "x"})
        )
        assert text.startswith("Nothing was changed: the audit log is unreachable"), text
        assert "try again" in text and not (notes / "new.md").exists()
        doomed = {"uri": (notes / "doomed.md").as_uri()}
        text = error_text(wire.tool("notes_delete", doomed, FORM, **answer))
        assert "unreachable" in text and "try again" in text, text
        assert (notes / "doomed.md").exists()  # nothing was done, nothing was spent
        assert wire.proc.poll() is None  # no crash
        # Reads need no shared state and keep working.
        assert not wire.tool("notes_list", {"workspaceUri": ws})["result"].get("isError")

        own_cluster.start()
        created = _until_ok(
            lambda: wire.tool(
                "notes_create", {"workspaceUri": ws, "path": "new.md", "content": "x"}
            )
        )
        assert created["structuredContent"]["path"] == "new.md"
        # The same confirmation, now that the store is back: executed once.
        done = wire.tool("notes_delete", doomed, FORM, **answer)["result"]
        assert done["structuredContent"]["deleted"] is True, done
        again = error_text(wire.tool("notes_delete", doomed, FORM, **answer))
        assert "already used" in again or "does not exist" in again, again
    finally:
        err = wire.close()
    assert PASSWORD not in err, err[-2000:]
    assert "Traceback" not in err, err[-4000:]


def test_two_instances_sharing_the_key_file_and_the_database_execute_a_confirmation_once(
    place: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Instance A asks, instance B executes the answer, A's and B's retries do nothing: each
    with its own state directory (its own index), the same seal-keys.json copied into both,
    the same PostgreSQL database, the same notes folder."""
    import shutil

    notes = place / "notes"
    (notes / "shared.md").write_text("# Shared\n")
    monkeypatch.setenv("FSNOTES_DATABASE", pg_dsn)
    state_a, state_b = place / "state-a", place / "state-b"
    monkeypatch.setenv("FSNOTES_INSTANCE", "a")
    a = Wire(notes, state_a)
    monkeypatch.setenv("FSNOTES_INSTANCE", "b")
    try:
        assert not a.tool("workspaces_list", {})["result"].get("isError")  # A made its keys
        state_b.mkdir(mode=0o700)
        shutil.copy2(state_a / "seal-keys.json", state_b / "seal-keys.json")
        b = Wire(notes, state_b)
        try:
            doomed = {"uri": (notes / "shared.md").as_uri()}
            answer, _ = confirm_delete(a, doomed, "shared.md")
            done = result_of(b.tool("notes_delete", doomed, FORM, **answer))
            assert done["deleted"] is True and not (notes / "shared.md").exists()
            for wire in (a, b):
                again = error_text(wire.tool("notes_delete", doomed, FORM, **answer))
                assert "already used" in again or "does not exist" in again, again
        finally:
            b.close()
    finally:
        a.close()
    listed = fsnotes("audit", "--state-dir", str(state_a), "--json")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["action"], r["outcome"], r["instance"]) for r in rows] == [("delete", "done", "b")]
