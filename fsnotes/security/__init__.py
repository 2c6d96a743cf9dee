"""Who may do what, and proof that a request is the one a person confirmed.

Grants (principals, workspaces, access levels), sealed request state and its keyring, what
a sealed question is bound to and what the answer said (``consent``), the replay store that
makes a confirmation usable once, the state directory's files and locks, the rendering of
values a person must judge (``shown``), the SQLite settings shared by our databases, and the
HTTP transport's bearer tokens (``tokens``: stored as digests, behind ``Authenticator``).

``__all__`` is what other packages use (``statedir`` and ``shown`` as whole modules: the
module ``shown`` would hide a function of that name here anyway). Each is imported
on first use (PEP 562, as ``concurrent.futures`` does), so importing one module does not
import the others.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import shown, statedir
    from .consent import Binding, ConsentRefused, Subject, answer_of, open_state
    from .grants import Access, Grant, Grants, NotGranted, RuntimeLayer, Workspace
    from .replay import (
        AlreadyUsed,
        ClaimNotRecorded,
        ReplayStore,
        SQLiteReplayStore,
        StoreBusy,
        StoreFull,
    )
    from .seal import Keyring, Sealer
    from .shown import distinguishable, has_hidden
    from .sqlite import LocalDB
    from .tokens import (
        Authenticator,
        BearerTokens,
        TokenEntry,
        TokenFileError,
        Unauthenticated,
        add_token,
        entry_from,
        read_tokens,
        revoke_tokens,
    )

__all__ = [
    "Access",
    "AlreadyUsed",
    "Authenticator",
    "BearerTokens",
    "Binding",
    "ClaimNotRecorded",
    "ConsentRefused",
    "Grant",
    "Grants",
    "Keyring",
    "LocalDB",
    "NotGranted",
    "ReplayStore",
    "RuntimeLayer",
    "SQLiteReplayStore",
    "Sealer",
    "StoreBusy",
    "StoreFull",
    "Subject",
    "TokenEntry",
    "TokenFileError",
    "Unauthenticated",
    "Workspace",
    "add_token",
    "answer_of",
    "distinguishable",
    "entry_from",
    "has_hidden",
    "open_state",
    "read_tokens",
    "revoke_tokens",
    "shown",
    "statedir",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "Access": "grants",
    "AlreadyUsed": "replay",
    "Authenticator": "tokens",
    "BearerTokens": "tokens",
    "Binding": "consent",
    "ClaimNotRecorded": "replay",
    "ConsentRefused": "consent",
    "Grant": "grants",
    "Grants": "grants",
    "Keyring": "seal",
    "LocalDB": "sqlite",
    "NotGranted": "grants",
    "ReplayStore": "replay",
    "RuntimeLayer": "grants",
    "SQLiteReplayStore": "replay",
    "Sealer": "seal",
    "StoreBusy": "replay",
    "StoreFull": "replay",
    "Subject": "consent",
    "TokenEntry": "tokens",
    "TokenFileError": "tokens",
    "Unauthenticated": "tokens",
    "Workspace": "grants",
    "add_token": "tokens",
    "answer_of": "consent",
    "distinguishable": "shown",
    "entry_from": "tokens",
    "has_hidden": "shown",
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
