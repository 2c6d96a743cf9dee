"""A note's place, once its workspace is authorized and its path contained: the workspace,
its store and the note's components below it. What every tool hands around after the one
authorization of a request."""

from __future__ import annotations

from dataclasses import dataclass

from fsnotes.notes.store import NoteStore
from fsnotes.security.grants import Workspace
from sandbox import uri as lexical
from sandbox.uri import Components


@dataclass(frozen=True)
class Located:
    workspace: Workspace
    store: NoteStore
    parts: Components

    @property
    def uri(self) -> str:
        return lexical.to_file_uri(self.workspace.components + self.parts)
