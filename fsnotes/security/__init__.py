"""Who may do what, and proof that a request is the one a person confirmed.

Grants (principals, workspaces, access levels), sealed request state and its keyring, what
a sealed question is bound to and what the answer said (``consent``), the replay store that
makes a confirmation usable once, the audit log, the history store (what changes
replaced), the state directory's files and locks, the rendering of values a person must
judge (``shown``), and where the shared stores live (``state``: the state directory's SQLite
files, or PostgreSQL behind the same ``database`` seam), and the HTTP transport's bearer
tokens (``tokens``: stored as digests, behind ``Authenticator``), OAuth access tokens
(``oauth``, with PyJWT; its settings in ``oauth_settings``, readable without it), and the
guard both HTTP servers put around each connection (``http_guard``: a request deadline, a
bound on connections that have not sent one).

``__all__`` is what other packages use (``statedir``, ``history_store`` and ``shown`` as
whole modules: the
module ``shown`` would hide a function of that name here anyway). Each is imported
on first use (PEP 562, as ``concurrent.futures`` does), so importing one module does not
import the others.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import history_store, shown, statedir
    from .audit import (
        PENDING,
        Auditor,
        AuditUnavailable,
        Entry,
        Record,
        Ticket,
        default_instance,
        open_audit,
    )
    from .consent import Binding, ConsentRefused, Subject, answer_of, open_state
    from .database import SQL, Database
    from .grants import Access, Grant, Grants, NotGranted, RuntimeLayer, Workspace, ceiling_of
    from .history_store import (
        DEFAULT_MAX_AGE_S,
        DEFAULT_MAX_BYTES,
        HistorySettings,
        HistoryStore,
        HistoryUnavailable,
        Version,
    )
    from .http_guard import QuietServer, guarded_server
    from .oauth import Chained, OAuthTokens
    from .oauth_settings import RESOLVER_FILES, SCOPE_ACCESS, OAuthConfigError, OAuthSettings
    from .replay import (
        AlreadyUsed,
        ClaimNotRecorded,
        ReplayStore,
        SQLReplayStore,
        StoreBusy,
        StoreFull,
        open_replay,
    )
    from .seal import Keyring, Sealer
    from .shown import distinguishable, has_hidden
    from .sqlite import LocalDB
    from .state import SharedState, StateUnavailable
    from .tokens import (
        TOKENS_FILE,
        Authenticator,
        BearerTokens,
        InsufficientScope,
        TokenEntry,
        TokenFileError,
        Unauthenticated,
        add_token,
        entry_from,
        read_tokens,
        revoke_tokens,
    )

__all__ = [
    "DEFAULT_MAX_AGE_S",
    "DEFAULT_MAX_BYTES",
    "PENDING",
    "RESOLVER_FILES",
    "SCOPE_ACCESS",
    "SQL",
    "TOKENS_FILE",
    "Access",
    "AlreadyUsed",
    "AuditUnavailable",
    "Auditor",
    "Authenticator",
    "BearerTokens",
    "Binding",
    "Chained",
    "ClaimNotRecorded",
    "ConsentRefused",
    "Database",
    "Entry",
    "Grant",
    "Grants",
    "HistorySettings",
    "HistoryStore",
    "HistoryUnavailable",
    "InsufficientScope",
    "Keyring",
    "LocalDB",
    "NotGranted",
    "OAuthConfigError",
    "OAuthSettings",
    "OAuthTokens",
    "QuietServer",
    "Record",
    "ReplayStore",
    "RuntimeLayer",
    "SQLReplayStore",
    "Sealer",
    "SharedState",
    "StateUnavailable",
    "StoreBusy",
    "StoreFull",
    "Subject",
    "Ticket",
    "TokenEntry",
    "TokenFileError",
    "Unauthenticated",
    "Version",
    "Workspace",
    "add_token",
    "answer_of",
    "ceiling_of",
    "default_instance",
    "distinguishable",
    "entry_from",
    "guarded_server",
    "has_hidden",
    "history_store",
    "open_audit",
    "open_replay",
    "open_state",
    "read_tokens",
    "revoke_tokens",
    "shown",
    "statedir",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "SCOPE_ACCESS": "oauth_settings",
    "RESOLVER_FILES": "oauth_settings",
    "OAuthSettings": "oauth_settings",
    "OAuthConfigError": "oauth_settings",
    "Chained": "oauth",
    "OAuthTokens": "oauth",
    "ceiling_of": "grants",
    "InsufficientScope": "tokens",
    "DEFAULT_MAX_AGE_S": "history_store",
    "DEFAULT_MAX_BYTES": "history_store",
    "Access": "grants",
    "AlreadyUsed": "replay",
    "AuditUnavailable": "audit",
    "Auditor": "audit",
    "Authenticator": "tokens",
    "BearerTokens": "tokens",
    "Binding": "consent",
    "ClaimNotRecorded": "replay",
    "ConsentRefused": "consent",
    "Database": "database",
    "Entry": "audit",
    "Grant": "grants",
    "Grants": "grants",
    "HistorySettings": "history_store",
    "HistoryStore": "history_store",
    "HistoryUnavailable": "history_store",
    "Keyring": "seal",
    "LocalDB": "sqlite",
    "NotGranted": "grants",
    "PENDING": "audit",
    "Record": "audit",
    "ReplayStore": "replay",
    "RuntimeLayer": "grants",
    "SQL": "database",
    "SQLReplayStore": "replay",
    "Sealer": "seal",
    "SharedState": "state",
    "StateUnavailable": "state",
    "StoreBusy": "replay",
    "StoreFull": "replay",
    "Subject": "consent",
    "Ticket": "audit",
    "Version": "history_store",
    "TOKENS_FILE": "tokens",
    "TokenEntry": "tokens",
    "TokenFileError": "tokens",
    "Unauthenticated": "tokens",
    "Workspace": "grants",
    "add_token": "tokens",
    "answer_of": "consent",
    "default_instance": "audit",
    "distinguishable": "shown",
    "entry_from": "tokens",
    "QuietServer": "http_guard",
    "guarded_server": "http_guard",
    "has_hidden": "shown",
    "open_audit": "audit",
    "open_replay": "replay",
    "history_store": "history_store",
    "open_state": "consent",
    "read_tokens": "tokens",
    "revoke_tokens": "tokens",
    "shown": "shown",
    "statedir": "statedir",
}


def __getattr__(name: str) -> object:
    # PEP 562: called only for names not yet in this module's namespace.
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = import_module(f"{__name__}.{home}")
    value = module if home == name else getattr(module, name)
    globals()[name] = value  # found directly from now on
    return value
