"""The notes domain behind the tools: authorize, contain, then act through the store.

Every public method here starts with authorization for the configured principal, then
turns the caller's URI or relative path into components with layer 1 (:mod:`sandbox.uri`),
and only then touches a workspace through its :class:`~fsnotes.notes.store.NoteStore`.
Methods are synchronous (they do file I/O); the async tool handlers run them in a worker
thread.
"""

from __future__ import annotations

import base64
import binascii
import errno
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox import errors as sx
from sandbox import uri as lexical

from ..security.grants import Access, Grants, NotGranted, Workspace
from .markdown import has_tag
from .store import Note, NoteError, NoteStore, display, iso_time

log = logging.getLogger("fsnotes.notes")

Components = tuple[str, ...]

DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 500  # a page of summaries stays well under a megabyte of JSON
DEFAULT_SEARCH_LIMIT = 10
MAX_SEARCH_LIMIT = 50  # results the model can actually read in one answer
MAX_SNIPPETS = 3  # per search hit: enough context to pick a note, little enough to skim
SNIPPET_CHARS = 200
MAX_QUERY_CHARS = 500
# Weights of a query term found in the title and in the path, relative to once in the
# body: a note *about* a thing usually names it in its title or file name.
TITLE_WEIGHT = 5.0
PATH_WEIGHT = 2.0
PHRASE_BONUS = 3.0


class ServiceError(Exception):
    """One actionable sentence for the model (becomes an ``isError`` tool result)."""


def explain(exc: BaseException, parts: Components | None = None) -> str:
    """Turn a sandbox/store/grant error into one actionable sentence without host paths."""
    where = f"'{display(parts)}'" if parts else "That path"
    match exc:
        case NoteError() | NotGranted() | ServiceError():
            return str(exc)
        case sx.NotFound():
            return f"{where} does not exist; check the path with notes_list or notes_search."
        case sx.AlreadyExists():
            return f"{where} already exists; choose another path (nothing is ever overwritten)."
        case sx.Escape():
            return (
                f"{where} goes through a symbolic link or another filesystem, which fsnotes "
                "never follows; use a path to a regular note."
            )
        case sx.OutsideWorkspace():
            return f"That path leaves the workspace ({exc}); use a path inside it."
        case sx.InvalidURI():
            return f"That URI is not a valid local file:// URI: {exc}."
        case sx.TooDeep():
            return (
                f"That path is {exc.depth} levels deep; fsnotes allows at most {exc.limit} "
                "below a workspace."
            )
        case sx.InvalidPath():
            return f"That path is not valid: {exc}."
        case sx.NotARegularFile():
            return f"{where} is not a regular file, so it is not a note."
        case sx.NotADirectory():
            return f"A folder in {where} is a file, not a folder."
        case sx.TooLarge():
            return f"{where} is larger than fsnotes reads; it was not opened."
        case sx.HardLinked():
            return (
                f"{where} has several hard links (it may be shared with a file outside the "
                "workspace), so fsnotes will not read or change it."
            )
        case sx.IdentityMismatch():
            return f"{where} was replaced by another file meanwhile; nothing was changed."
        case sx.PermissionDenied():
            code = errno.errorcode.get(exc.errno or 0, "")
            return f"The operating system denied access to {where}{f' ({code})' if code else ''}."
        case sx.SandboxError():
            return f"{where} could not be used: {exc}."
    return "Internal error."


@dataclass(frozen=True)
class Located:
    workspace: Workspace
    store: NoteStore
    parts: Components

    @property
    def uri(self) -> str:
        return lexical.to_file_uri(self.workspace.components + self.parts)


@dataclass
class NotesService:
    grants: Grants
    principal: str
    stores: dict[str, NoteStore]  # by workspace name
    root_hints: list[Components] = field(default_factory=list)

    # --- scope ---------------------------------------------------------------------------

    def workspace(
        self, workspace_uri: str | None, needed: Access, *, hinted: bool = False
    ) -> Workspace:
        """The workspace a call names, or its default when it names none.

        ``hinted``: the call comes from a legacy (2025-11-25) session, whose client roots may
        pick the default. Modern requests are stateless and never inherit roots that an
        earlier ``initialize`` on the same process delivered.
        """
        if workspace_uri is None:
            hints = self.root_hints if hinted else []
            return self.grants.default_for(self.principal, needed, hints)
        return self.grants.authorize_workspace_uri(self.principal, workspace_uri, needed)

    def locate(self, uri: str, needed: Access) -> Located:
        """Authorize and contain a note URI: the granted workspace and the relative names."""
        try:
            components = lexical.parse_file_uri(uri)
        except sx.InvalidURI as exc:
            raise ServiceError(explain(exc)) from None
        try:
            ws, rel = self.grants.authorize_note_uri(self.principal, components, needed)
        except sx.TooDeep as exc:
            raise ServiceError(explain(exc)) from None
        return Located(ws, self.stores[ws.name], rel)

    def relative(self, ws: Workspace, path: str, *, allow_empty: bool = False) -> Located:
        try:
            parts = lexical.parse_relative(path, allow_empty=allow_empty)
            lexical.to_file_uri(ws.components + parts)  # the result's URI must be valid too
        except sx.SandboxError as exc:
            raise ServiceError(explain(exc)) from None
        return Located(ws, self.stores[ws.name], parts)

    def set_root_hints(self, roots: Sequence[Any]) -> None:
        """Roots from a legacy client: keep the ones inside granted workspaces, log the rest."""
        granted = [ws for ws, _ in self.grants.granted(self.principal)]
        hints: list[Components] = []
        for root in roots:
            uri = root.get("uri") if isinstance(root, dict) else None
            try:
                components = lexical.parse_file_uri(uri) if isinstance(uri, str) else None
            except sx.SandboxError:
                components = None
            inside = components is not None and any(
                _inside(ws.components, components) for ws in granted
            )
            if components is None or not inside:
                log.warning("ignoring client root outside the granted workspaces: %r", uri)
                continue
            hints.append(components)
        self.root_hints = hints

    # --- tools ---------------------------------------------------------------------------

    def workspaces_list(self) -> list[dict[str, str]]:
        return [
            {"uri": ws.uri, "name": ws.name, "access": access.label}
            for ws, access in self.grants.granted(self.principal)
        ]

    def notes_list(
        self,
        workspace_uri: str | None,
        folder: str | None,
        tag: str | None,
        cursor: str | None,
        limit: int | None,
        *,
        hinted: bool = False,
    ) -> dict[str, Any]:
        ws = self.workspace(workspace_uri, Access.READ, hinted=hinted)
        loc = self.relative(ws, folder or "", allow_empty=True)
        after = decode_cursor(cursor) if cursor is not None else None
        limit = min(limit or DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT)
        notes: list[dict[str, Any]] = []
        next_cursor = None
        for parts, _info in self.iter_located(loc):
            if after is not None and parts <= after:
                continue
            note = self.try_read(loc.store, parts)
            if note is None:
                continue
            if tag and not has_tag(note.meta.tags, tag):
                continue
            if len(notes) == limit:
                next_cursor = encode_cursor(notes_last_parts(notes))
                break
            notes.append(self._summary(ws, note))
        return {"notes": notes, "nextCursor": next_cursor}

    def notes_read(self, uri: str, start: int | None, end: int | None) -> dict[str, Any]:
        loc = self.locate(uri, Access.READ)
        note = self.read_located(loc)
        lines = note.text.splitlines()
        total = len(lines)
        content = note.text
        first, last = 1, total
        if start is not None or end is not None:
            first = start or 1
            last = min(end or total, total)
            if first > max(total, 1) or (end is not None and end < first):
                raise ServiceError(
                    f"Lines {first}-{end or total} are outside the note, which has {total} "
                    "lines; ask for a range within it."
                )
            content = "\n".join(lines[first - 1 : last])
        return {
            "uri": loc.uri,
            "path": display(loc.parts),
            "title": note.meta.title,
            "etag": note.etag,
            "content": content,
            "startLine": first,
            "endLine": last,
            "totalLines": total,
            "frontmatter": note.meta.frontmatter,
            "tags": note.meta.tags,
            "links": note.meta.links,
            "size": note.info.size,
            "modified": iso_time(note.info.mtime_ns),
        }

    def notes_search(
        self,
        workspace_uri: str | None,
        query: str,
        folder: str | None,
        tag: str | None,
        limit: int | None,
        *,
        hinted: bool = False,
    ) -> dict[str, Any]:
        ws = self.workspace(workspace_uri, Access.READ, hinted=hinted)
        loc = self.relative(ws, folder or "", allow_empty=True)
        terms = [t for t in query.casefold().split() if t]
        if not terms:
            raise ServiceError("The query is empty; give one or more words to look for.")
        phrase = " ".join(terms)
        limit = min(limit or DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT)
        hits = []
        scanned = 0
        for parts, _info in self.iter_located(loc):
            note = self.try_read(loc.store, parts)
            if note is None:
                continue
            scanned += 1
            if tag and not has_tag(note.meta.tags, tag):
                continue
            scored = score_note(note, terms, phrase)
            if scored is None:
                continue
            score, snippets = scored
            hits.append((score, parts, note, snippets))
        hits.sort(key=lambda h: (-h[0], h[1]))
        results = [
            {
                "uri": lexical.to_file_uri(ws.components + parts),
                "path": display(parts),
                "title": note.meta.title,
                "score": round(score, 3),
                "snippets": snippets,
            }
            for score, parts, note, snippets in hits[:limit]
        ]
        return {"results": results, "total": len(hits), "scanned": scanned}

    def notes_create(
        self, workspace_uri: str | None, path: str, content: str, *, hinted: bool = False
    ) -> dict[str, Any]:
        ws = self.workspace(workspace_uri, Access.WRITE, hinted=hinted)
        loc = self.relative(ws, path)
        try:
            etag, info = loc.store.create(loc.parts, content)
        except (sx.SandboxError, NoteError) as exc:
            raise ServiceError(explain(exc, loc.parts)) from None
        return {"uri": loc.uri, "path": display(loc.parts), "etag": etag, "size": info.size}

    def notes_update(
        self,
        uri: str,
        content: str | None,
        edits: Sequence[tuple[str, str]] | None,
        etag: str | None,
    ) -> dict[str, Any]:
        loc = self.locate(uri, Access.WRITE)

        def transform(current: str) -> str:
            if content is not None:
                return content
            text = current
            for i, (old, new) in enumerate(edits or (), start=1):
                count = text.count(old)
                if count != 1:
                    where = "nowhere" if count == 0 else f"{count} times"
                    raise NoteError(
                        f"Edit {i}: oldText occurs {where} in the note; it must match exactly "
                        "once (include more surrounding text). Nothing was written."
                    )
                text = text.replace(old, new, 1)
            return text

        try:
            new_etag, info = loc.store.update(loc.parts, transform, expect_etag=etag)
        except (sx.SandboxError, NoteError) as exc:
            raise ServiceError(explain(exc, loc.parts)) from None
        return {"uri": loc.uri, "path": display(loc.parts), "etag": new_etag, "size": info.size}

    def notes_move(self, uri: str, new_path: str, etag: str | None) -> dict[str, Any]:
        loc = self.locate(uri, Access.WRITE)
        dst = self.relative(loc.workspace, new_path)
        try:
            moved_etag, _info = loc.store.move(loc.parts, dst.parts, expect_etag=etag)
        except (sx.SandboxError, NoteError) as exc:
            failing = dst.parts if isinstance(exc, sx.AlreadyExists) else loc.parts
            raise ServiceError(explain(exc, failing)) from None
        return {
            "uri": dst.uri,
            "path": display(dst.parts),
            "previousUri": loc.uri,
            "etag": moved_etag,
        }

    # --- helpers -------------------------------------------------------------------------

    def iter_located(self, loc: Located) -> list[tuple[Components, Any]]:
        try:
            return list(loc.store.iter_notes(loc.parts, base=loc.workspace.components))
        except (sx.SandboxError, NoteError) as exc:
            raise ServiceError(explain(exc, loc.parts or None)) from None

    def read_located(self, loc: Located) -> Note:
        try:
            return loc.store.read(loc.parts)
        except (sx.SandboxError, NoteError) as exc:
            raise ServiceError(explain(exc, loc.parts)) from None

    @staticmethod
    def try_read(store: NoteStore, parts: Components) -> Note | None:
        """Read a note found by a walk; skip (and log) one that vanished or is unreadable."""
        try:
            return store.read(parts)
        except (sx.SandboxError, NoteError) as exc:
            log.info("skipping %s: %s", display(parts), type(exc).__name__)
            return None

    @staticmethod
    def _summary(ws: Workspace, note: Note) -> dict[str, Any]:
        return {
            "uri": lexical.to_file_uri(ws.components + note.parts),
            "path": display(note.parts),
            "title": note.meta.title,
            "size": note.info.size,
            "modified": iso_time(note.info.mtime_ns),
            "tags": note.meta.tags,
        }


def _inside(base: Components, target: Components) -> bool:
    return target[: len(base)] == base


def notes_last_parts(notes: list[dict[str, Any]]) -> Components:
    return tuple(str(notes[-1]["path"]).split("/"))


def encode_cursor(after: Components) -> str:
    raw = json.dumps({"v": 1, "after": list(after)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> Components:
    """The position a cursor encodes; ServiceError for anything this server did not issue."""
    bad = ServiceError("That cursor is not one this server issued; list again without it.")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise bad from None
    after = value.get("after") if isinstance(value, dict) else None
    if value.get("v") != 1 or not isinstance(after, list) or not after:
        raise bad
    if not all(isinstance(p, str) for p in after):
        raise bad
    try:
        return tuple(lexical.check_name(p) for p in after)
    except sx.SandboxError:
        raise bad from None


def score_note(
    note: Note, terms: list[str], phrase: str
) -> tuple[float, list[dict[str, Any]]] | None:
    """Score a note for a query, or None when a term is missing. All terms must appear."""
    title = note.meta.title.casefold()
    path = display(note.parts).casefold()
    body = note.text.casefold()
    score = 0.0
    for term in terms:
        in_title, in_path, in_body = title.count(term), path.count(term), body.count(term)
        if not (in_title or in_path or in_body):
            return None
        # log-like damping: the 10th occurrence in the body says less than the first
        score += TITLE_WEIGHT * min(in_title, 3) + PATH_WEIGHT * min(in_path, 3)
        score += sum(1.0 / k for k in range(1, in_body + 1))
    if len(terms) > 1 and phrase in body:
        score += PHRASE_BONUS
    return score, snippets_for(note.text, terms, first_line=note.meta.body_start_line)


def snippets_for(text: str, terms: list[str], *, first_line: int = 1) -> list[dict[str, Any]]:
    """Up to MAX_SNIPPETS body lines containing a term (frontmatter lines are skipped)."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if number < first_line:
            continue
        folded = line.casefold()
        positions = [folded.find(t) for t in terms if t in folded]
        if not positions:
            continue
        first = min(positions)
        start = max(0, first - SNIPPET_CHARS // 3)
        piece = line[start : start + SNIPPET_CHARS].strip()
        if start > 0:
            piece = "…" + piece
        if start + SNIPPET_CHARS < len(line):
            piece += "…"
        out.append({"line": number, "text": piece})
        if len(out) == MAX_SNIPPETS:
            break
    return out
