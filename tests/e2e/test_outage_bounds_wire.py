"""PostgreSQL stopped under a real `fsnotes serve` with run-time setup configured
(``--setup-allow``, which ``fsnotes grant`` needs): reads and searches answer at once from
the grants the server last read, and a mutation refuses with the retryable error within one
connection wait of the pool, not two.

The server's grants come from the shared store; while it is down they must be the last good
snapshot, never a query per lookup that waits for the pool (that made every read wait 5 s and
a create 10 s). A cluster of its own (tests/pgcluster.py), stopped by process id mid-test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.wire import Wire
from fsnotes.state.postgres import POOL_WAIT_S
from tests.setup.person import free_port

FORM = {"elicitation": {"form": {}}}
# A read needs nothing from the shared store: it must not wait for any part of the pool's
# connection wait (it did, once per grants lookup: 5 to 10 s).
READ_WITHIN_S = 1.0
# A mutation needs the audit log, so it waits for the pool once and then refuses; twice
# (a grants lookup first, then the audit write) took 2 * POOL_WAIT_S.
MUTATION_WITHIN_S = 1.5 * POOL_WAIT_S


@pytest.fixture
def own_cluster(pg_cluster: Any) -> Iterator[Any]:
    import pgcluster

    with pgcluster.running() as cluster:
        yield cluster


def _timed(wire: Wire, name: str, args: dict[str, Any], **params: Any) -> tuple[float, Any]:
    start = time.monotonic()
    reply = wire.tool(name, args, FORM, **params)
    return time.monotonic() - start, reply["result"]


def test_reads_answer_at_once_and_a_mutation_refuses_once_while_postgresql_is_down(
    tmp_path: Path, own_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "plan.md").write_text("# Plan\n\nthe garden plan\n")
    (notes / "doomed.md").write_text("# Doomed\n")
    (tmp_path / "shared").mkdir()
    monkeypatch.setenv("FSNOTES_DATABASE", own_cluster.new_database())
    setup = ["--setup-allow", str(tmp_path / "shared"), "--setup-port", str(free_port())]
    wire = Wire(notes, tmp_path / "state", *setup)
    ws = notes.as_uri()
    reads: list[tuple[str, dict[str, Any]]] = [
        ("workspaces_list", {}),
        ("notes_read", {"uri": (notes / "plan.md").as_uri()}),
        ("notes_list", {"workspaceUri": ws}),
        ("notes_search", {"workspaceUri": ws, "query": "garden"}),
    ]
    try:
        for name, args in reads:  # the index built, the pool warm, before the outage
            _, result = _timed(wire, name, args)
            assert not result.get("isError"), result
        doomed = {"uri": (notes / "doomed.md").as_uri()}
        first = wire.tool("notes_delete", doomed, FORM)["result"]
        ((key, _),) = first["inputRequests"].items()
        answer = {
            "inputResponses": {
                key: {"action": "accept", "content": {"note_id": "doomed.md", "confirm": True}}
            },
            "requestState": first["requestState"],
        }
        own_cluster.stop()

        took: dict[str, float] = {}
        for name, args in reads:
            took[name], result = _timed(wire, name, args)
            assert not result.get("isError"), (name, result)
        for name, args, params in (
            ("notes_create", {"workspaceUri": ws, "path": "new.md", "content": "x"}, {}),
            ("notes_delete", doomed, answer),
        ):
            took[name], result = _timed(wire, name, args, **params)
            assert result.get("isError") is True, (name, result)
            text = result["content"][0]["text"]
            assert "unreachable" in text and "try again" in text, (name, text)
        print("seconds per call with PostgreSQL down:", took)
        slow_reads = {k: v for k, v in took.items() if k in dict(reads) and v >= READ_WITHIN_S}
        assert not slow_reads, took
        assert took["notes_create"] < MUTATION_WITHIN_S, took
        assert took["notes_delete"] < MUTATION_WITHIN_S, took
        assert not (notes / "new.md").exists() and (notes / "doomed.md").exists()
    finally:
        err = wire.close()
    assert "Traceback" not in err, err[-4000:]
