"""The notes: Markdown files in granted workspaces, their search index, and the tools.

Four rooms: ``store`` and ``history`` (notes over ``sandbox.Root``, and the copies changes
replaced), ``text/`` (pure functions of a note's text: Markdown, sections, frontmatter,
links, query parsing), ``index/`` (the catalog seam and the search index behind it) and
``tools/`` (the tools, resources and prompts a request reaches, and their models).

``__all__`` is what other packages use. Each is imported on first use, so that importing
one module, as ``fsnotes.app.config`` does with the store and the indexer's constants, does
not import the tools, the protocol core and pydantic with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsnotes._exports import lazy_exports

if TYPE_CHECKING:
    from fsnotes.notes.history import History
    from fsnotes.notes.index.indexer import DEFAULT_RESCAN_INTERVAL_S, Catalogs, environment
    from fsnotes.notes.store import (
        DEFAULT_EXTENSIONS,
        MAX_NOTE_BYTES,
        NoteStore,
        WorkspaceStores,
    )
    from fsnotes.notes.text.daily import DEFAULT_DAILY_PATH, DailySettings, daily_settings
    from fsnotes.notes.tools.build import build_tools
    from fsnotes.notes.tools.confirm import DeleteFlow
    from fsnotes.notes.tools.prompts import NotesPrompts
    from fsnotes.notes.tools.resources import NotesResources
    from fsnotes.notes.tools.service import NotesService

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
    "WorkspaceStores",
    "build_tools",
    "daily_settings",
    "environment",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "Catalogs": "index.indexer",
    "DEFAULT_DAILY_PATH": "text.daily",
    "DEFAULT_EXTENSIONS": "store",
    "DEFAULT_RESCAN_INTERVAL_S": "index.indexer",
    "DailySettings": "text.daily",
    "DeleteFlow": "tools.confirm",
    "History": "history",
    "MAX_NOTE_BYTES": "store",
    "NoteStore": "store",
    "NotesPrompts": "tools.prompts",
    "NotesResources": "tools.resources",
    "NotesService": "tools.service",
    "WorkspaceStores": "store",
    "build_tools": "tools.build",
    "daily_settings": "text.daily",
    "environment": "index.indexer",
}

__getattr__ = lazy_exports(__name__, _HOME)
