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

from fsnotes.app.config import Config, ConfigError
from fsnotes.security.shown import shown
from fsnotes.state.audit import PENDING, AuditUnavailable, Record, open_audit
from fsnotes.state.shared import SharedState, StateUnavailable

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


def run_audit(config: Config, *, since: str | None, principal: str | None, as_json: bool) -> int:
    """Print the audit rows; a store that cannot be read is a ConfigError."""
    start = parse_since(since, now=time.time()) if since is not None else None
    # Read-only: nothing is created (no state directory, no SQLite file, no table).
    try:
        # A command makes a few statements: a connection each, no pool (whose retries
        # would log every failed attempt before the one error this command reports).
        shared = SharedState.open(config.state_dir, config.database, pooled=False)
    except StateUnavailable as exc:
        raise ConfigError(str(exc)) from None
    try:
        rows = open_audit(shared, clock=time.time, create=False).read(
            since=start, principal=principal
        )
    except AuditUnavailable as exc:
        raise ConfigError(f"cannot read the audit log ({shared.where}): {exc}") from None
    finally:
        shared.close()
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
