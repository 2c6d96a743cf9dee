"""Store trouble at run time, on the wire: a clear tool error saying what to do, never an
internal error, and nothing done. Real `fsnotes serve` processes (with short lock waits),
a real second process holding the lock, a real corrupted file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.state_helpers import SHORT_WAITS_LAUNCHER, corrupt, held
from e2e.wire import Wire

FORM = {"elicitation": {"form": {}}}
URL_CAPS = {"elicitation": {"url": {}}}


def error_text(reply: dict[str, Any]) -> str:
    result = reply["result"]
    assert result.get("isError") is True, result
    return str(result["content"][0]["text"])


def test_a_confirmation_store_held_by_another_process_is_a_retryable_error(
    workspace: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    wire = Wire(workspace, state, launcher=SHORT_WAITS_LAUNCHER)
    try:
        args = {"workspaceUri": workspace.as_uri(), "title": "plan"}
        first = wire.tool("notes_delete", args, FORM)["result"]
        assert first["resultType"] == "input_required", first
        ((key, _),) = first["inputRequests"].items()
        answer = {
            "inputResponses": {
                key: {"action": "accept", "content": {"note_id": "plan.md", "confirm": True}}
            },
            "requestState": first["requestState"],
        }
        with held(state / "replay.sqlite3", "immediate"):
            busy = error_text(wire.tool("notes_delete", args, FORM, **answer))
        assert busy.startswith("Nothing was deleted: the confirmation store is busy"), busy
        assert "try again" in busy and "sqlite" not in busy.lower()
        assert (workspace / "plan.md").exists()
        # The same confirmation, once the other process let go: it was never used.
        done = wire.tool("notes_delete", args, FORM, **answer)["result"]
        assert done["structuredContent"]["deleted"] is True, done
        assert not (workspace / "plan.md").exists()
    finally:
        wire.close()


def test_a_setup_database_corrupted_at_run_time_is_a_tool_error_not_an_internal_error(
    workspace: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    (shared / "proj").mkdir(parents=True)
    state = tmp_path / "state"
    wire = Wire(workspace, state, "--setup-allow", str(shared), launcher=SHORT_WAITS_LAUNCHER)
    try:
        assert not wire.tool("workspaces_list", {})["result"].get("isError")  # up and running
        corrupt(state / "setup.sqlite3")
        args = {"workspaceUri": (shared / "proj").as_uri(), "access": "read"}
        text = error_text(wire.tool("notes_setup", args, URL_CAPS))
        assert "setup database cannot be used" in text, text
        assert "Internal error" not in text and "nothing was granted" in text.lower()
        # The configured workspace keeps working without the run-time grants.
        listed = wire.tool("workspaces_list", {})["result"]
        assert not listed.get("isError"), listed
    finally:
        wire.close()


def test_a_setup_database_held_by_another_process_is_a_retryable_error(
    workspace: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    (shared / "proj").mkdir(parents=True)
    state = tmp_path / "state"
    wire = Wire(workspace, state, "--setup-allow", str(shared), launcher=SHORT_WAITS_LAUNCHER)
    try:
        assert not wire.tool("workspaces_list", {})["result"].get("isError")  # up and running
        args = {"workspaceUri": (shared / "proj").as_uri(), "access": "read"}
        with held(state / "setup.sqlite3", "immediate"):
            text = error_text(wire.tool("notes_setup", args, URL_CAPS))
        assert "setup database is busy" in text and "try again" in text, text
        assert "nothing was granted" in text.lower() or "no setup was started" in text.lower()
    finally:
        wire.close()
