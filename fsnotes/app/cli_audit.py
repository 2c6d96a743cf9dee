"""``fsnotes audit``: read the audit log (who changed which note or grant, and who confirmed).

It reads the store the server writes: the state directory's ``audit.sqlite3``, or the
PostgreSQL database of ``[state] database`` / ``FSNOTES_DATABASE``. Rows oldest first;
``--since`` takes a duration back from now (``90s``, ``15m``, ``2h``, ``7d``) or an ISO 8601
date or time (UTC unless it names its offset, as the output does); ``--principal`` keeps
one principal's rows; ``--json`` prints one JSON object per line. It only reads: it creates
no state directory, no SQLite file and no table (a log not written yet is "no audit rows").
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable
from typing import TypeVar

from fsnotes.app.config import Config, ConfigError
from fsnotes.security.shown import shown
from fsnotes.state import audit_chain as chain
from fsnotes.state.audit import PENDING, AuditLog, AuditUnavailable, Record, open_audit
from fsnotes.state.audit_chain import parse_checkpoint
from fsnotes.state.shared import SharedState, StateUnavailable

T = TypeVar("T")

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# An etag is a SHA-256 in hex; the table shows its first characters, as git shows commits.
SHORT_ETAG = 12


def parse_since(text: str, *, now: float) -> float:
    """Unix time from a duration back from ``now`` or an ISO 8601 date/time; ConfigError."""
    text = text.strip()
    match = _DURATION.fullmatch(text)
    if match:
        return now - float(match.group(1)) * _UNIT_S[match.group(2)]
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"--since {text!r}: give a duration (90s, 15m, 2h, 7d) or an ISO 8601 date or "
            "time (2026-12-01, 2026-12-01T09:30Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _reading(config: Config, use: Callable[[AuditLog], T]) -> T:
    """``use`` the log read-only; a store that cannot be read is a ConfigError."""
    # Read-only: nothing is created (no state directory, no SQLite file, no table).
    try:
        # A command makes a few statements: a connection each, no pool (whose retries
        # would log every failed attempt before the one error this command reports).
        shared = SharedState.open(config.state_dir, config.database, pooled=False)
    except StateUnavailable as exc:
        raise ConfigError(str(exc)) from None
    try:
        return use(open_audit(shared, clock=time.time, create=False))
    except AuditUnavailable as exc:
        raise ConfigError(f"cannot read the audit log ({shared.where}): {exc}") from None
    finally:
        shared.close()


def run_chain(config: Config, *, verify: bool, against: str | None, checkpoint: bool) -> int:
    """``--verify`` (exit 1 with the first mismatch) and/or ``--checkpoint``."""
    if against is not None and not verify:
        raise ConfigError("--against goes with --verify")
    mark = None
    if against is not None:
        try:
            mark = parse_checkpoint(against)
        except ValueError as exc:
            raise ConfigError(f"--against: {exc}") from None
    status = 0
    if verify:
        verdict = _reading(config, lambda log: chain.verify(log.chain_rows(), log.head(), mark))
        if verdict.problem is not None:
            print(f"audit chain BROKEN: {verdict.problem}")
            status = 1
        else:
            older = f", {verdict.unchained} older row(s) not covered" if verdict.unchained else ""
            pinned = f", checkpoint at position {mark.position} matches" if mark else ""
            print(
                f"audit chain intact: {verdict.rows} row(s), {verdict.positions} chain "
                f"position(s){older}{pinned}"
            )
    if checkpoint:
        # The head as it is now, even after a failed check: it is what a later --verify
        # --against compares with (keep it where the database's writers cannot change it).
        print(chain.checkpoint(_reading(config, lambda log: log.head())))
    return status


def run_audit(config: Config, *, since: str | None, principal: str | None, as_json: bool) -> int:
    """Print the audit rows; a store that cannot be read is a ConfigError."""
    start = parse_since(since, now=time.time()) if since is not None else None
    rows = _reading(config, lambda log: log.read(since=start, principal=principal))
    if as_json:
        for row in rows:
            print(json.dumps(row.as_json(), ensure_ascii=False, sort_keys=True))
        return 0
    if not rows:
        print("no audit rows" + (" in that range" if start is not None or principal else ""))
        return 0
    table = [_HEADER, *(_cells(row) for row in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(_HEADER))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


_HEADER = (
    "time (UTC)",
    "action",
    "outcome",
    "principal",
    "confirmed by",
    "workspace",
    "path",
    "etag before -> after",
    "instance",
    "tool",
)


def _cells(row: Record) -> tuple[str, ...]:
    # Names come from whoever wrote the files or the configuration: the table shows them
    # through the rule that shows them to a person deciding (security.shown), so a note
    # named with a bidi override cannot pass for another in an investigation.
    path = shown(row.path or "")
    if row.path_after and row.path_after != row.path:
        path = f"{path} -> {shown(row.path_after)}"
    outcome = row.outcome if row.outcome != PENDING else "pending (outcome not recorded)"
    if row.detail:
        outcome += f" [{shown(row.detail)}]"
    etags = ""
    if row.etag_before or row.etag_after:
        etags = f"{_short(row.etag_before)} -> {_short(row.etag_after)}"
    return (
        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row.at)),
        row.action,
        outcome,
        shown(row.principal),
        shown(row.confirmed_by or ""),
        shown(row.workspace),
        path,
        etags,
        shown(row.instance),
        row.tool,
    )


def _short(etag: str | None) -> str:
    return etag[:SHORT_ETAG] if etag else "-"
