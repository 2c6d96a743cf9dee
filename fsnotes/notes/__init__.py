"""The notes: Markdown files in granted workspaces, their search index, and the tools.

``__all__`` is what other packages use: the store, the service and its tools, resources and
prompts, the confirmed-delete flow, the history kept of changes, the index's catalogs and
its doctor facts. Each is imported on first use (PEP 562, as ``concurrent.futures`` does),
so that importing one module, as ``fsnotes.config`` does with the store and the indexer's
constants, does not import the tools, the protocol core and pydantic with it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .confirm import DeleteFlow
    from .daily import DEFAULT_DAILY_PATH, DailySettings, daily_settings
    from .history import History
    from .indexer import DEFAULT_RESCAN_INTERVAL_S, Catalogs, environment
    from .prompts import NotesPrompts
    from .resources import NotesResources
    from .service import NotesService
    from .store import DEFAULT_EXTENSIONS, MAX_NOTE_BYTES, NoteStore
    from .tools import build_tools

__all__ = [
    "DEFAULT_DAILY_PATH",
    "DEFAULT_EXTENSIONS",
    "DEFAULT_RESCAN_INTERVAL_S",
    "MAX_NOTE_BYTES",
    "Catalogs",
    "DailySettings",
    "DeleteFlow",
    "History",
    "NoteStore",
    "NotesPrompts",
    "NotesResources",
    "NotesService",
    "build_tools",
    "daily_settings",
    "environment",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "DEFAULT_DAILY_PATH": "daily",
    "DEFAULT_EXTENSIONS": "store",
    "DEFAULT_RESCAN_INTERVAL_S": "indexer",
    "Catalogs": "indexer",
    "DailySettings": "daily",
    "DeleteFlow": "confirm",
    "History": "history",
    "MAX_NOTE_BYTES": "store",
    "NoteStore": "store",
    "NotesPrompts": "prompts",
    "NotesResources": "resources",
    "NotesService": "service",
    "build_tools": "tools",
    "daily_settings": "daily",
    "environment": "indexer",
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
