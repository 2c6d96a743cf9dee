"""MCP tasks (the Tasks extension, 2026-07-28) on the real product, over stdio and Streamable
HTTP: a move rewriting hundreds of notes becomes a task, polled to completion with its
progress in the status message; a client that did not opt in gets the plain result; a cancel
stops the rewrite with every note whole; another principal cannot tell a foreign task from
an unknown one; the instance that ran a task killed, the task reads failed.

The files on disk are the check: each note links either to the old name or to the new one,
byte for byte, never anything else."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from fsnotes.protocol import limits
from tests.e2e.wire import Wire
from tests.e2e.wire import meta as wire_meta
from tests.transport.http_support import Raw, add_token, answer_of, start_fsnotes

pytestmark = pytest.mark.timeout(240)

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
TERMINAL = ("completed", "failed", "cancelled")
# Polls are bounded: a 500-note rewrite takes seconds here (10 to 12 ms a note, four at a
# time), and much longer on a loaded machine; this only stops a hang.
POLL_FOR_S = 150.0
POLL_EVERY_S = 0.1


def linker(i: int, target: str) -> str:
    return f"# Note {i}\n\nSee [[{target}]] for the plan.\n"


def vault(root: Path, count: int) -> Path:
    notes = root / "notes"
    notes.mkdir()
    (notes / "hub.md").write_text("# Hub\n\nThe plan.\n")
    for i in range(count):
        (notes / f"n{i:04d}.md").write_text(linker(i, "hub"))
    return notes


def states_of(notes: Path, count: int) -> tuple[int, int]:
    """(notes linking to the new name, to the old name); any other content fails."""
    new = old = 0
    for i in range(count):
        text = (notes / f"n{i:04d}.md").read_text()
        if text == linker(i, "hub-moved"):
            new += 1
        else:
            assert text == linker(i, "hub"), (i, text)
            old += 1
    return new, old


class Client(Protocol):
    def call(self, method: str, params: dict[str, Any], caps: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC response (result or error) to a 2026-07-28 request."""
        ...


class StdioClient:
    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    def call(self, method: str, params: dict[str, Any], caps: dict[str, Any]) -> dict[str, Any]:
        return self.wire.call(method, {**params, "_meta": wire_meta(caps)}, timeout=60.0)


class HttpClient:
    def __init__(self, raw: Raw) -> None:
        self.raw = raw

    def call(self, method: str, params: dict[str, Any], caps: dict[str, Any]) -> dict[str, Any]:
        response = self.raw.post(self.raw.request(method, params, caps))
        return dict(answer_of(response))


def move(client: Client, notes: Path, caps: dict[str, Any]) -> dict[str, Any]:
    args = {"uri": (notes / "hub.md").as_uri(), "newPath": "archive/hub-moved.md"}
    answer = client.call("tools/call", {"name": "notes_move", "arguments": args}, caps)
    assert "result" in answer, answer
    return dict(answer["result"])


def get(client: Client, task_id: str) -> dict[str, Any]:
    return client.call("tasks/get", {"taskId": task_id}, TASKS)


def poll(client: Client, task_id: str, until: tuple[str, ...] = TERMINAL) -> list[dict[str, Any]]:
    """Every tasks/get answer until the task's status is one of ``until``."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + POLL_FOR_S
    while time.monotonic() < deadline:
        answer = get(client, task_id)
        assert "result" in answer, answer
        seen.append(answer["result"])
        if answer["result"]["status"] in until:
            return seen
        time.sleep(POLL_EVERY_S)
    raise AssertionError(f"task {task_id} never reached {until}: {seen[-1:]}")


@pytest.fixture(params=["stdio", "http"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Client, Path, Any]]:
    """A vault of 500 notes linking to hub.md, and a client of the product serving it over
    the transport under test (the product's process, for the HTTP flavour)."""
    notes = vault(tmp_path, 500)
    state = tmp_path / "state"
    if request.param == "stdio":
        wire = Wire(notes, state)
        try:
            yield StdioClient(wire), notes, wire.proc
        finally:
            wire.close()
        return
    token = add_token(state, "ada")
    with start_fsnotes(notes, state) as server:
        raw = Raw(server, token, timeout=60)
        try:
            yield HttpClient(raw), notes, server
        finally:
            raw.close()


def test_a_move_rewriting_500_notes_is_a_task_polled_to_completion_with_its_progress(
    served: tuple[Client, Path, Any],
) -> None:
    client, notes, _ = served
    created = move(client, notes, TASKS)
    assert created["resultType"] == "task", created
    assert created["status"] == "working" and "result" not in created
    assert created["ttlMs"] == limits.TASK_TTL_MS and created["pollIntervalMs"] > 0
    # A task from the start: it must wait for the index's first build, or (built) it has
    # 501 notes to rewrite.
    assert created["statusMessage"] in (
        "Waiting for the workspace's index to be built",
        "Moving the note: 501 notes to rewrite",
    ), created
    seen = poll(client, created["taskId"])
    # The status message reports the rewrite as it goes (one beat a second, the rewrite takes
    # seconds): its first message until then, never nothing.
    messages = [s.get("statusMessage") for s in seen]
    assert None not in messages, messages
    assert any(m.startswith("Rewrote links in ") and m.endswith(" of 501 notes") for m in messages)
    final = seen[-1]
    assert final["status"] == "completed", final
    assert final["resultType"] == "complete"
    moved = final["result"]["structuredContent"]
    assert moved["path"] == "archive/hub-moved.md" and moved["linksNotUpdated"] == []
    assert len(moved["linksUpdated"]) == 500
    assert states_of(notes, 500) == (500, 0)
    assert not (notes / "hub.md").exists() and (notes / "archive/hub-moved.md").exists()
    # The task's result is still there to read again (kept for its TTL).
    again = get(client, created["taskId"])["result"]
    assert again["status"] == "completed" and again["result"] == final["result"]


def test_a_client_that_did_not_opt_in_gets_the_plain_result(
    served: tuple[Client, Path, Any],
) -> None:
    client, notes, _ = served
    result = move(client, notes, {})
    assert result["resultType"] == "complete" and "taskId" not in result, result
    assert len(result["structuredContent"]["linksUpdated"]) == 500
    assert states_of(notes, 500) == (500, 0)
    refused = client.call("tasks/get", {"taskId": "x"}, {})
    assert refused["error"]["code"] == -32021, refused
    assert refused["error"]["data"] == {
        "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    }


def test_a_cancel_stops_the_rewrite_and_every_note_is_whole(
    served: tuple[Client, Path, Any],
) -> None:
    client, notes, _ = served
    created = move(client, notes, TASKS)
    task_id = created["taskId"]
    ack = client.call("tasks/cancel", {"taskId": task_id}, TASKS)
    assert ack["result"]["resultType"] == "complete" and "status" not in ack["result"], ack
    final = poll(client, task_id)[-1]
    assert final["status"] == "cancelled", final
    assert "result" not in final
    new, old = states_of(notes, 500)
    assert new + old == 500 and old > 0, (new, old)  # stopped before the end, nothing torn
    # A cancel of an ended task is acknowledged alike and changes nothing.
    assert "result" in client.call("tasks/cancel", {"taskId": task_id}, TASKS)
    assert get(client, task_id)["result"]["status"] == "cancelled"


def test_another_principal_cannot_tell_a_foreign_task_from_an_unknown_one(
    tmp_path: Path,
) -> None:
    notes = vault(tmp_path, 150)
    state = tmp_path / "state"
    ada, bob = add_token(state, "ada"), add_token(state, "bob")
    with start_fsnotes(notes, state) as server:
        as_ada, as_bob = HttpClient(Raw(server, ada)), HttpClient(Raw(server, bob))
        created = move(as_ada, notes, TASKS)
        task_id = created["taskId"]
        for method, extra in (
            ("tasks/get", {}),
            ("tasks/update", {"inputResponses": {}}),
            ("tasks/cancel", {}),
        ):
            foreign = as_bob.call(method, {"taskId": task_id, **extra}, TASKS)
            unknown = as_bob.call(method, {"taskId": task_id[::-1], **extra}, TASKS)
            assert "error" in foreign and foreign["error"] == unknown["error"], (foreign, unknown)
            assert foreign["error"]["code"] == -32602
        # Bob's cancel did nothing: Ada's task finishes.
        assert poll(as_ada, task_id)[-1]["status"] == "completed"
    assert states_of(notes, 150) == (150, 0)


def test_the_task_of_a_killed_instance_reads_failed_and_each_note_is_whole(
    tmp_path: Path,
) -> None:
    notes = vault(tmp_path, 1500)
    state = tmp_path / "state"
    token = add_token(state, "ada")
    first = start_fsnotes(notes, state)
    try:
        raw = Raw(first, token, timeout=60)
        client = HttpClient(raw)
        args = {"uri": (notes / "hub.md").as_uri(), "newPath": "archive/hub-moved.md"}
        created = client.call("tools/call", {"name": "notes_move", "arguments": args}, TASKS)
        task_id = created["result"]["taskId"]
        # Killed while it rewrites (or just before): no chance to record anything.
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)
        raw.close()
    finally:
        first.stop()
    with start_fsnotes(notes, state) as second:
        client = HttpClient(Raw(second, token, timeout=60))
        started = time.monotonic()
        final = poll(client, task_id)[-1]
        assert final["status"] == "failed", final
        assert "stopped before it finished" in final["error"]["message"]
        assert "result" not in final
        # Read failed once the beats stopped for TASK_STALE_S, not before.
        assert time.monotonic() - started <= limits.TASK_STALE_S + POLL_FOR_S
    new, old = states_of(notes, 1500)
    assert new + old == 1500


def test_a_long_move_reports_its_rewrite_as_notifications_progress_while_the_client_waits(
    tmp_path: Path,
) -> None:
    notes = vault(tmp_path, 500)
    wire = Wire(notes, tmp_path / "state")
    try:
        args = {"uri": (notes / "hub.md").as_uri(), "newPath": "archive/hub-moved.md"}
        params = {"name": "notes_move", "arguments": args, "_meta": wire_meta({})}
        params["_meta"]["progressToken"] = "move-1"
        answer = wire.call("tools/call", params, timeout=120.0)
        assert answer["result"]["resultType"] == "complete"  # not opted in: the plain result
        received = [json.loads(line) for line in wire.received]
    finally:
        wire.close()
    progress = [
        m["params"]
        for m in received
        if m.get("method") == "notifications/progress"
        and m["params"]["progressToken"] == "move-1"
        and m["params"].get("message", "").startswith("Rewrote links in ")
    ]
    assert progress, "no progress of the rewrite was reported"
    values = [p["progress"] for p in progress]
    assert values == sorted(set(values)) and all(p["total"] == 501 for p in progress)
    assert states_of(notes, 500) == (500, 0)


HUB_DIR = "deep/er"
HUB_TEXT = "# Hub\n\nThe [plan](plan.md) and [[./plan]].\n"
# Its own relative links from its new folder, rewritten exactly once.
HUB_MOVED = "# Hub\n\nThe [plan](../deep/er/plan.md) and [[../deep/er/plan]].\n"


@pytest.mark.parametrize("retry_caps", [TASKS, {}], ids=["task", "plain"])
def test_a_move_killed_mid_rewrite_is_finished_by_the_same_call_after_a_restart(
    tmp_path: Path, retry_caps: dict[str, Any]
) -> None:
    count = 500
    notes = tmp_path / "notes"
    (notes / HUB_DIR).mkdir(parents=True)
    (notes / HUB_DIR / "hub.md").write_text(HUB_TEXT)
    (notes / HUB_DIR / "plan.md").write_text("# Plan\n")
    for i in range(count):
        (notes / f"n{i:04d}.md").write_text(linker(i, "hub"))
    state = tmp_path / "state"
    token = add_token(state, "ada")
    args = {"uri": (notes / HUB_DIR / "hub.md").as_uri(), "newPath": "archive/hub-moved.md"}
    call = {"name": "notes_move", "arguments": args}
    first = start_fsnotes(notes, state)
    try:
        raw = Raw(first, token, timeout=60)
        created = HttpClient(raw).call("tools/call", call, TASKS)
        assert created["result"]["resultType"] == "task", created
        # Killed once the rewrite is under way (the linkers go in path order).
        deadline = time.monotonic() + POLL_FOR_S
        while (notes / "n0010.md").read_text() == linker(10, "hub"):
            assert time.monotonic() < deadline, "the rewrite never started"
            time.sleep(0.001)
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)
        raw.close()
    finally:
        first.stop()
    new, old = states_of(notes, count)
    assert new > 0 and old > 0, (new, old)  # killed halfway: some rewritten, some not
    assert (notes / "archive/hub-moved.md").read_text() == HUB_MOVED
    with start_fsnotes(notes, state) as second:
        client = HttpClient(Raw(second, token, timeout=60))
        answer = client.call("tools/call", call, retry_caps)
        assert "result" in answer, answer
        result = answer["result"]
        if result["resultType"] == "task":
            final = poll(client, result["taskId"])[-1]
            assert final["status"] == "completed", final
            result = final["result"]
        assert not result.get("isError"), result
        moved = result["structuredContent"]
        assert moved["resumed"] is True and moved["path"] == "archive/hub-moved.md"
        assert moved["linksNotUpdated"] == []
        # Only the notes the killed run had not reached (the moved note was done already).
        assert len(moved["linksUpdated"]) == old, (len(moved["linksUpdated"]), old)
        assert states_of(notes, count) == (count, 0)
        assert (notes / "archive/hub-moved.md").read_text() == HUB_MOVED
        assert (notes / HUB_DIR / "plan.md").read_text() == "# Plan\n"
        assert not (notes / HUB_DIR / "hub.md").exists()
        # Finished: the same call again is an ordinary move of a note that is not there.
        again = client.call("tools/call", call, {})
        assert again["result"]["isError"] is True, again
        assert states_of(notes, count) == (count, 0)
    kept = sorted(p.relative_to(notes).as_posix() for p in notes.rglob("*") if p.is_file())
    assert kept == sorted(
        ["archive/hub-moved.md", f"{HUB_DIR}/plan.md", *(f"n{i:04d}.md" for i in range(count))]
    )
