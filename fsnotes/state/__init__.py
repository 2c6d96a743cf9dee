"""The shared stores: what must outlive a request, or be seen by every instance.

The replay store (a confirmation is used once), the audit log, the history store (what
changes replaced), and the backends behind one ``database`` seam: the state directory's
SQLite files (``sqlite``; the folder, its files and locks in ``statedir``) or PostgreSQL
(``postgres``) for several instances, chosen by ``shared``. Nothing here decides who may do
what (that is ``fsnotes.security``); this package imports nothing of fsnotes above it.

``__all__`` is what other packages use (``statedir`` and ``history_store`` as whole
modules). Each is imported on first use, so importing one module does not import the others
(the PostgreSQL driver above all, an optional extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsnotes._exports import lazy_exports

if TYPE_CHECKING:
    from fsnotes.state import audit_chain, history_store, statedir
    from fsnotes.state.audit import (
        PENDING,
        AuditLog,
        Auditor,
        AuditUnavailable,
        Entry,
        Record,
        Ticket,
        default_instance,
        open_audit,
    )
    from fsnotes.state.audit_chain import parse_checkpoint
    from fsnotes.state.database import SQL, ChangeFeed, Database
    from fsnotes.state.history_store import (
        DEFAULT_MAX_AGE_S,
        DEFAULT_MAX_BYTES,
        HistorySettings,
        HistoryStore,
        HistoryUnavailable,
        Version,
    )
    from fsnotes.state.moves import MoveJournalError, SQLMoveJournal, open_moves
    from fsnotes.state.perthread import PerThread
    from fsnotes.state.replay import (
        AlreadyUsed,
        ClaimNotRecorded,
        ReplayStore,
        SQLReplayStore,
        StoreBusy,
        StoreFull,
        open_replay,
    )
    from fsnotes.state.shared import DB_FILES, SharedState, StateUnavailable
    from fsnotes.state.sqlite import LocalDB
    from fsnotes.state.tasks import TaskStoreError, open_tasks

__all__ = [
    "DB_FILES",
    "DEFAULT_MAX_AGE_S",
    "DEFAULT_MAX_BYTES",
    "PENDING",
    "SQL",
    "AlreadyUsed",
    "AuditLog",
    "AuditUnavailable",
    "Auditor",
    "ChangeFeed",
    "ClaimNotRecorded",
    "Database",
    "Entry",
    "HistorySettings",
    "HistoryStore",
    "HistoryUnavailable",
    "LocalDB",
    "MoveJournalError",
    "PerThread",
    "Record",
    "ReplayStore",
    "SQLMoveJournal",
    "SQLReplayStore",
    "SharedState",
    "StateUnavailable",
    "StoreBusy",
    "StoreFull",
    "TaskStoreError",
    "Ticket",
    "Version",
    "audit_chain",
    "default_instance",
    "history_store",
    "open_audit",
    "open_moves",
    "open_replay",
    "open_tasks",
    "parse_checkpoint",
    "statedir",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "AlreadyUsed": "replay",
    "AuditLog": "audit",
    "AuditUnavailable": "audit",
    "Auditor": "audit",
    "ChangeFeed": "database",
    "ClaimNotRecorded": "replay",
    "DB_FILES": "shared",
    "DEFAULT_MAX_AGE_S": "history_store",
    "DEFAULT_MAX_BYTES": "history_store",
    "Database": "database",
    "Entry": "audit",
    "HistorySettings": "history_store",
    "HistoryStore": "history_store",
    "HistoryUnavailable": "history_store",
    "LocalDB": "sqlite",
    "MoveJournalError": "moves",
    "PENDING": "audit",
    "PerThread": "perthread",
    "Record": "audit",
    "ReplayStore": "replay",
    "SQL": "database",
    "SQLMoveJournal": "moves",
    "SQLReplayStore": "replay",
    "SharedState": "shared",
    "StateUnavailable": "shared",
    "StoreBusy": "replay",
    "StoreFull": "replay",
    "TaskStoreError": "tasks",
    "Ticket": "audit",
    "Version": "history_store",
    "audit_chain": "audit_chain",
    "default_instance": "audit",
    "history_store": "history_store",
    "open_audit": "audit",
    "open_moves": "moves",
    "open_replay": "replay",
    "open_tasks": "tasks",
    "parse_checkpoint": "audit_chain",
    "statedir": "statedir",
}

__getattr__ = lazy_exports(__name__, _HOME)
