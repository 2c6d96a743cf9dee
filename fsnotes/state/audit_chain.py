"""The audit log's hash chain: what makes an edit, a deletion, a reordering or a truncation of
its rows visible (``fsnotes audit --verify``), and the checkpoint that pins its end.

Every event of the log, an intent or an outcome (see :mod:`fsnotes.state.audit`), takes the
next **position** in one chain shared by every instance writing to the store, and stores
``hash = SHA-256(previous hash, position, the event's fields)``. The chain's head (the last
position and its hash) is one row of ``audit_head``; taking a position locks that row until
the event's transaction commits, so instances on one PostgreSQL database (or processes on one
SQLite file) append one at a time, and positions have no gaps and no duplicates.

**One chain for all instances, not one per instance**, because: a checkpoint is then one
(position, hash) pair covering every instance's rows; a row deleted from any instance shows as
a missing position; an instance's whole history cannot vanish unnoticed (with chains per
instance, deleting every row of one instance leaves the others intact); and two processes
given the same instance name (or one restarted) cannot fork a chain. The price is that
appends are serialised across instances: one row lock held for the insert's few statements
(benchmarks/bench_audit.py measures it against the unchained log).

What :func:`verify` proves, without a checkpoint: every row written since the chain began is
unchanged, none is missing before the head, none moved, and the head matches the last row (a
tail cut off without rewriting the head is found). With a checkpoint (:func:`checkpoint`)
printed earlier and kept elsewhere: the log still holds that position with that hash, so
nothing up to it was rewritten and the tail was not cut before it.

What it cannot prove: someone who can write the database may rewrite the *whole* chain from
any point (recompute every later hash and the head) or cut the tail and rewrite the head;
that is consistent again, and only a checkpoint exported before (to a place the database's
writers cannot change: a ticket, a mail, another machine's log) shows it. The chain holds no
secret key on purpose: every instance would need it, so whoever holds an instance could
forge as well. Rows written before the chain existed (an older fsnotes) carry no position
and are reported as not covered.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

GENESIS = "0" * 64  # the "previous hash" of position 1
CHECKPOINT_PREFIX = "fsnotes-audit-checkpoint/1"
_CHECKPOINT_RE = re.compile(rf"{re.escape(CHECKPOINT_PREFIX)} position=(\d+) hash=([0-9a-f]{{64}})")


def link(previous: str, position: int, fields: Sequence[Any]) -> str:
    """The hash of the event at ``position`` after ``previous``: SHA-256 of canonical JSON
    (floats as Python's shortest round-trip repr, which both backends' doubles give back)."""
    body = json.dumps([previous, position, *fields], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def intent_fields(row: ChainRow) -> list[Any]:
    return ["intent", row.at, row.principal, row.action, row.tool, row.workspace, row.path,
            row.etag_before, row.confirmed_by, row.detail, row.instance]  # fmt: skip


def outcome_fields(row: ChainRow) -> list[Any]:
    return ["outcome", row.seq, row.outcome, row.finished, row.path_after,
            row.out_etag_before, row.etag_after, row.out_detail]  # fmt: skip


@dataclass(frozen=True)
class ChainRow:
    """One stored row with its chain columns, as read back."""

    id: int
    at: float
    finished: float | None
    principal: str
    action: str
    tool: str
    workspace: str
    path: str | None
    path_after: str | None
    etag_before: str | None  # as written with the intent
    out_etag_before: str | None  # as written with the outcome
    etag_after: str | None
    confirmed_by: str | None
    outcome: str
    detail: str | None  # as written with the intent
    out_detail: str | None  # as written with the outcome
    instance: str
    seq: int | None  # the intent's position
    hash: str | None
    out_seq: int | None  # the outcome's position
    out_hash: str | None


@dataclass(frozen=True)
class Checkpoint:
    position: int
    hash: str

    def __str__(self) -> str:
        return f"{CHECKPOINT_PREFIX} position={self.position} hash={self.hash}"


def parse_checkpoint(text: str) -> Checkpoint:
    """A checkpoint from the line ``fsnotes audit --checkpoint`` printed; ValueError if not."""
    match = _CHECKPOINT_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"not a checkpoint (expected '{CHECKPOINT_PREFIX} position=N hash=<64 hex>', "
            "as `fsnotes audit --checkpoint` prints it)"
        )
    return Checkpoint(int(match.group(1)), match.group(2))


def checkpoint(head: tuple[int, str]) -> Checkpoint:
    return Checkpoint(*head)


@dataclass(frozen=True)
class Verdict:
    """What :func:`verify` found: ``problem`` is None when the chain holds."""

    rows: int
    positions: int
    unchained: int  # rows from before the chain (not covered)
    head: tuple[int, str]
    problem: str | None = None


def verify(
    rows: Sequence[ChainRow], head: tuple[int, str], against: Checkpoint | None = None
) -> Verdict:
    """Check the chain of ``rows`` up to ``head`` (and ``against`` a checkpoint); the first
    event that does not match is named by its row id and position."""
    events: list[tuple[int, str, str, ChainRow]] = []  # position, kind, stored hash, row
    unchained = [r for r in rows if r.seq is None]
    chained = [r for r in rows if r.seq is not None]

    def bad(problem: str) -> Verdict:
        return Verdict(len(rows), len(events), len(unchained), head, problem)

    if chained and unchained:
        first = min(r.id for r in chained)
        late = [r.id for r in unchained if r.id > first]
        if late:
            return bad(f"row {late[0]} has no chain position but was written after the chain "
                       f"began (row {first}): inserted, or its position erased")  # fmt: skip
    for r in chained:
        assert r.seq is not None
        events.append((r.seq, "intent", r.hash or "", r))
        if r.out_seq is not None:
            events.append((r.out_seq, "outcome", r.out_hash or "", r))
        elif r.outcome != "pending":
            return bad(f"row {r.id}: its outcome '{r.outcome}' has no chain position: "
                       "written outside fsnotes")  # fmt: skip
    events.sort(key=lambda e: (e[0], e[1] == "outcome"))
    previous = GENESIS
    for expected, (position, kind, stored, row) in enumerate(events, start=1):
        if position != expected:
            what = "missing" if position > expected else "taken twice"
            return bad(f"chain position {expected} is {what} (found {position}, the {kind} of "
                       f"row {row.id}): a row was deleted or its position changed")  # fmt: skip
        fields = intent_fields(row) if kind == "intent" else outcome_fields(row)
        if link(previous, position, fields) != stored:
            return bad(f"row {row.id} ({kind}, chain position {position}) does not match its "
                       "hash: edited, or moved from another place in the log")  # fmt: skip
        previous = stored
    last = (len(events), previous if events else GENESIS)
    if last[0] != head[0] or (events and last[1] != head[1]):
        if head[0] > last[0]:
            return bad(f"the log ends at chain position {last[0]} but its head is at "
                       f"{head[0]}: rows were removed from the end")  # fmt: skip
        return bad(f"the head (position {head[0]}) does not match the last row (position "
                   f"{last[0]}): the head was edited")  # fmt: skip
    if against is not None:
        if against.position > last[0]:
            return bad(f"the checkpoint names chain position {against.position}, the log ends "
                       f"at {last[0]}: rows were removed from the end since")  # fmt: skip
        if against.position > 0:
            _, kind, stored, row = events[against.position - 1]
            if stored != against.hash:
                return bad(f"chain position {against.position} (row {row.id}, {kind}) differs "
                           "from the checkpoint: the log was rewritten up to there")  # fmt: skip
    return Verdict(len(rows), len(events), len(unchained), head)
