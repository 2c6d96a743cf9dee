"""MCP tasks behind a real load balancer: HAProxy round-robin in front of three ``fsnotes serve
--http`` instances sharing one PostgreSQL database (tests/balancer.py). A task started on one
instance is polled, cancelled and read through the others: its state and result live in the
shared database; the instance running it killed, every other instance reads it failed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import balancer
import pytest

from fsnotes.protocol import limits
from tests.e2e.test_tasks_wire import TASKS, TERMINAL, linker, states_of
from tests.transport.http_support import Raw, answer_of

pytestmark = pytest.mark.timeout(240)

BACKEND_HEADER = "x-fsnotes-backend"
POLL_FOR_S = 150.0
COUNT = 500


class Endpoint:
    def __init__(self, url: str) -> None:
        self.url = url


@pytest.fixture
def deployment(pg_cluster: Any, tmp_path: Path) -> Iterator[balancer.Deployment]:
    why = balancer.missing()
    if why is not None:
        pytest.skip(f"SKIPPED: {why}")
    dsn = str(pg_cluster.new_database())
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "hub.md").write_text("# Hub\n\nThe plan.\n")
    for i in range(COUNT):
        (notes / f"n{i:04d}.md").write_text(linker(i, "hub"))
    try:
        with balancer.deployed(tmp_path, notes, dsn) as d:
            yield d
    finally:
        pg_cluster.drop_database(dsn)


def raw(d: balancer.Deployment, target: str | None = None) -> Raw:
    url = d.url if target is None else d.instances[target].server.url
    return Raw(Endpoint(url), d.token, timeout=60)  # type: ignore[arg-type]


def call(client: Raw, method: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(the instance that answered, the JSON-RPC answer)."""
    response = client.post(client.request(method, params, TASKS))
    return response.headers.get(BACKEND_HEADER, "?"), dict(answer_of(response))


def start_move(d: balancer.Deployment, on: str) -> str:
    client = raw(d, on)
    try:
        args = {"uri": (d.notes / "hub.md").as_uri(), "newPath": "archive/hub-moved.md"}
        _, answer = call(client, "tools/call", {"name": "notes_move", "arguments": args})
    finally:
        client.close()
    assert answer["result"]["resultType"] == "task", answer
    return str(answer["result"]["taskId"])


def poll(client: Raw, task_id: str) -> tuple[set[str], dict[str, Any]]:
    """(the instances that answered, the task once ended)."""
    who: set[str] = set()
    deadline = time.monotonic() + POLL_FOR_S
    while time.monotonic() < deadline:
        backend, answer = call(client, "tasks/get", {"taskId": task_id})
        assert "result" in answer, answer
        who.add(backend)
        if answer["result"]["status"] in TERMINAL:
            return who, answer["result"]
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} did not end")


def test_a_task_started_on_one_instance_is_polled_to_completion_through_the_others(
    deployment: balancer.Deployment,
) -> None:
    task_id = start_move(deployment, "a")
    client = raw(deployment)
    try:
        who, final = poll(client, task_id)
    finally:
        client.close()
    assert final["status"] == "completed", final
    assert len(final["result"]["structuredContent"]["linksUpdated"]) == COUNT
    assert {"b", "c"} <= who, who  # answered from the database by instances that never ran it
    assert states_of(deployment.notes, COUNT) == (COUNT, 0)


def test_a_cancel_sent_to_another_instance_stops_the_task_where_it_runs(
    deployment: balancer.Deployment,
) -> None:
    task_id = start_move(deployment, "a")
    other = raw(deployment, "b")  # instance b directly: it never ran the task
    try:
        _, ack = call(other, "tasks/cancel", {"taskId": task_id})
        assert ack["result"]["resultType"] == "complete", ack
        _, final = poll(other, task_id)
    finally:
        other.close()
    # Instance a sees the cancel at its next beat (one a second) and stops between notes.
    assert final["status"] == "cancelled", final
    new, old = states_of(deployment.notes, COUNT)
    assert new + old == COUNT


def test_the_task_of_a_killed_instance_reads_failed_on_every_other(
    deployment: balancer.Deployment,
) -> None:
    task_id = start_move(deployment, "a")
    deployment.instances["a"].kill()
    client = raw(deployment)
    started = time.monotonic()
    try:
        who, final = poll(client, task_id)
    finally:
        client.close()
    assert final["status"] == "failed", final
    assert "stopped before it finished" in final["error"]["message"]
    assert "a" not in who
    assert time.monotonic() - started >= limits.TASK_STALE_S - 5  # not before its beats stopped
    new, old = states_of(deployment.notes, COUNT)  # each note whole, old or new
    assert new + old == COUNT
