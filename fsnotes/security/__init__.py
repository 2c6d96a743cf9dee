"""Who may do what, and proof that a request is the one a person confirmed.

Grants (principals, workspaces, access levels), sealed request state and its keyring, the
replay store that makes a confirmation usable once, the state directory's files and locks,
the rendering of values a person must judge (``shown``) and the SQLite settings shared by
our databases.

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
    from .grants import Access, Grant, Grants, NotGranted, RuntimeLayer, Workspace
    from .replay import AlreadyUsed, ReplayStore, SQLiteReplayStore, StoreBusy, StoreFull
    from .seal import (
        Keyring,
        Sealer,
        StateExpired,
        StateInvalid,
        StateUnknownKey,
        digest_arguments,
    )
    from .shown import distinguishable, has_hidden
    from .sqlite import LocalDB

__all__ = [
    "Access",
    "AlreadyUsed",
    "Grant",
    "Grants",
    "Keyring",
    "LocalDB",
    "NotGranted",
    "ReplayStore",
    "RuntimeLayer",
    "SQLiteReplayStore",
    "Sealer",
    "StateExpired",
    "StateInvalid",
    "StateUnknownKey",
    "StoreBusy",
    "StoreFull",
    "Workspace",
    "digest_arguments",
    "distinguishable",
    "has_hidden",
    "shown",
    "statedir",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "Access": "grants",
    "AlreadyUsed": "replay",
    "Grant": "grants",
    "Grants": "grants",
    "Keyring": "seal",
    "LocalDB": "sqlite",
    "NotGranted": "grants",
    "ReplayStore": "replay",
    "RuntimeLayer": "grants",
    "SQLiteReplayStore": "replay",
    "Sealer": "seal",
    "StateExpired": "seal",
    "StateInvalid": "seal",
    "StateUnknownKey": "seal",
    "StoreBusy": "replay",
    "StoreFull": "replay",
    "Workspace": "grants",
    "digest_arguments": "seal",
    "distinguishable": "shown",
    "has_hidden": "shown",
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
