"""The edits ``notes_update`` applies: exact text, a section under a heading, a frontmatter key.

Pure functions over text; no file access. Edits apply in order, each to the text the one
before it left, and all of them or none: the first that cannot apply raises
:class:`~fsnotes.notes.store.NoteError` (one sentence naming the edit by its position), and
the store then writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fsnotes.notes.store import NoteError
from fsnotes.notes.text import frontedit, sections
from fsnotes.notes.text.frontedit import FrontmatterError, FrontmatterOp, FrontmatterValue
from fsnotes.notes.text.sections import SectionError, SectionOp


@dataclass(frozen=True)
class TextEdit:
    """Replace ``old``, which must occur exactly once, by ``new``."""

    old: str
    new: str


@dataclass(frozen=True)
class SectionEdit:
    """Replace, append to or prepend to the section under the heading ``heading`` (a path
    such as ``Projects > Shed``; see :mod:`fsnotes.notes.text.sections`)."""

    heading: str
    op: SectionOp
    text: str


@dataclass(frozen=True)
class FrontmatterEdit:
    """Set or remove the frontmatter key ``key`` (see :mod:`fsnotes.notes.text.frontedit`)."""

    key: str
    op: FrontmatterOp
    value: FrontmatterValue = None


Edit = TextEdit | SectionEdit | FrontmatterEdit


def apply_edits(text: str, edits: Sequence[Edit | tuple[str, str]]) -> str:
    """``text`` with every edit applied in order (a ``(old, new)`` pair is a text edit)."""
    for i, edit in enumerate(edits, start=1):
        if isinstance(edit, tuple):
            edit = TextEdit(*edit)
        try:
            text = _apply(text, edit, i)
        except (SectionError, FrontmatterError) as exc:
            raise NoteError(f"Edit {i}: {exc} Nothing was written.") from None
    return text


def _apply(text: str, edit: Edit, i: int) -> str:
    if isinstance(edit, TextEdit):
        count = text.count(edit.old)
        if count != 1:
            where = "nowhere" if count == 0 else f"{count} times"
            raise NoteError(
                f"Edit {i}: oldText occurs {where} in the note; it must match exactly "
                "once (include more surrounding text). Nothing was written."
            )
        return text.replace(edit.old, edit.new, 1)
    if isinstance(edit, SectionEdit):
        return sections.edit(text, edit.heading, edit.op, edit.text)
    return frontedit.edit(text, edit.key, edit.op, edit.value)
