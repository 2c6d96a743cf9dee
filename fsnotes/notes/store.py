"""Notes on disk, through :class:`sandbox.root.Root` only.

This module is the only place in ``fsnotes/notes/`` that touches files, and it does so
exclusively through a workspace's ``Root`` (layer 2): no ``open()``, no ``os`` path calls.
It knows what a note is (a regular UTF-8 text file with an allowed extension, outside hidden
folders) and computes etags; authorization and URI parsing happen before it is called.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Protocol

from fsnotes.notes.text.markdown import NoteMeta, analyse
from sandbox import uri as lexical
from sandbox.errors import SandboxError
from sandbox.root import FileIdentity, FileInfo, ReadResult, Root
from sandbox.uri import Components

DEFAULT_EXTENSIONS: tuple[str, ...] = (".md", ".markdown", ".txt")
# The largest note we read or write. Notes are prose; 4 MiB is a few books. Larger files
# are refused without being read, so one huge file cannot stall the server or its memory.
# It also keeps a whole-note write (content escaped as JSON) under the protocol's 8 MiB
# line limit (fsnotes.protocol.limits.MAX_LINE_BYTES) for ordinary text.
MAX_NOTE_BYTES = 4 * 1024 * 1024


class Keeper(Protocol):
    """Keeps the bytes a change is about to replace (the history's, :mod:`.history`); may
    raise to stop the change before anything is written."""

    def __call__(
        self, old: bytes, *, new: bytes | None = None, moved_to: str | None = None
    ) -> None: ...


class NoteError(Exception):
    """A problem with a note the model can act on; the message is one actionable sentence."""


def etag_of(data: bytes) -> str:
    """A strong validator: the SHA-256 of the exact bytes (RFC 9110 strong comparison)."""
    return hashlib.sha256(data).hexdigest()


def iso_time(mtime_ns: int) -> str:
    return (
        datetime.fromtimestamp(mtime_ns / 1e9, tz=UTC)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z")
    )


def display(parts: Components) -> str:
    return "/".join(parts)


@dataclass(frozen=True)
class Note:
    parts: Components
    text: str
    etag: str
    info: FileInfo
    meta: NoteMeta

    @property
    def identity(self) -> FileIdentity:
        return self.info.identity


def _decode(data: bytes, parts: Components) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise NoteError(f"'{display(parts)}' is not UTF-8 text, so it is not a note.") from None


def is_addressable(parts: Components, base: Components) -> bool:
    """Whether a client can name ``parts`` in the workspace at ``base``: a disk may hold
    names layer 1 refuses (a backslash, a control character, bytes that are not UTF-8, a
    path over the limits, its URI's included). Such a file is not a note; listing it would
    fail when its URI is built."""
    try:
        lexical.to_file_uri(base + parts)
        return lexical.parse_relative(display(parts)) == parts
    except SandboxError:
        return False


def _first_hidden(parts: Components) -> str | None:
    """The first hidden ('.'-prefixed) name in ``parts``: notes never live under one."""
    return next((p for p in parts if p.startswith(".")), None)


def stem_of(name: str) -> str:
    dot = name.rfind(".")
    return name[:dot] if dot > 0 else name


class NoteStore:
    """The notes of one workspace."""

    def __init__(self, root: Root, *, extensions: Sequence[str] = DEFAULT_EXTENSIONS) -> None:
        self.root = root
        self.extensions = tuple(e.lower() for e in extensions)

    # --- what counts as a note ------------------------------------------------------------

    def is_note_name(self, name: str) -> bool:
        return not name.startswith(".") and name.lower().endswith(self.extensions)

    def check_note_path(self, parts: Components) -> None:
        """Refuse paths that can never be notes, before touching the disk."""
        if not parts:
            raise NoteError("That is the workspace itself; name a note inside it.")
        hidden = _first_hidden(parts)
        if hidden is not None:
            raise NoteError(
                f"'{display(parts)}' is inside a hidden name ('{hidden}'); notes never are."
            )
        if not parts[-1].lower().endswith(self.extensions):
            raise NoteError(
                f"'{display(parts)}' does not end in {', '.join(self.extensions)}, "
                "so it is not a note."
            )

    def is_listed(self, parts: Components, info: FileInfo, base: Components) -> bool:
        """Whether the entry ``parts`` (relative to the workspace at ``base``), as ``info``
        describes it, is a note to list: a regular file with a note extension, outside
        hidden folders, that a URI below ``base`` can name."""
        return (
            info.kind == "file"
            and self.is_note_name(parts[-1])
            and _first_hidden(parts) is None
            and is_addressable(parts, base)
        )

    def check_folder(self, parts: Components) -> None:
        if _first_hidden(parts) is not None:
            raise NoteError(f"Folder '{display(parts)}' is hidden; notes are never there.")

    # --- reading -----------------------------------------------------------------------

    def read(self, parts: Components) -> Note:
        self.check_note_path(parts)
        result = self.root.read(parts, max_bytes=MAX_NOTE_BYTES)
        return self._note(parts, result)

    def read_many(
        self, folder: Components, names: Sequence[str]
    ) -> Generator[tuple[str, Note | NoteError | SandboxError]]:
        """What :meth:`read` gives for each note ``folder/name``, in order: the note, or the
        error its read raises (:meth:`Root.read_many`: one open per file, a window of them
        named to the kernel before the first is read)."""
        wanted: list[str] = []
        refused: dict[str, NoteError] = {}
        for name in names:
            try:
                self.check_note_path((*folder, name))
            except NoteError as exc:
                refused[name] = exc
                continue
            wanted.append(name)
        results = self.root.read_many(folder, wanted, max_bytes=MAX_NOTE_BYTES)
        try:
            for name in names:
                if name in refused:
                    yield name, refused[name]
                    continue
                _name, result = next(results)
                if isinstance(result, SandboxError):
                    yield name, result
                    continue
                try:
                    yield name, self._note((*folder, name), result)
                except NoteError as exc:
                    yield name, exc
        finally:
            results.close()  # its open files (a consumer that stops half-way)

    def text(self, parts: Components) -> str:
        """A note's text alone, without analysing it (search's excerpts read it: the
        index keeps none). Raises what :meth:`read` raises."""
        self.check_note_path(parts)
        return _decode(self.root.read(parts, max_bytes=MAX_NOTE_BYTES).data, parts)

    def _note(self, parts: Components, result: ReadResult) -> Note:
        text = _decode(result.data, parts)
        return Note(
            parts=parts,
            text=text,
            etag=etag_of(result.data),
            info=result.info,
            meta=analyse(text, stem_of(parts[-1])),
        )

    # --- housekeeping -------------------------------------------------------------------

    # --- writing -----------------------------------------------------------------------

    def create(self, parts: Components, text: str) -> tuple[str, FileInfo]:
        self.check_note_path(parts)
        data = self._encode(text)
        info = self.root.create(parts, data, make_parents=True)
        return etag_of(data), info

    def update(
        self,
        parts: Components,
        transform: Callable[[str], str],
        *,
        expect_etag: str | None,
        keep: Keeper | None = None,
    ) -> tuple[str, FileInfo]:
        """Rewrite a note atomically; ``transform`` may raise NoteError to write nothing.

        The etag check and the transform see the same bytes that the sandbox then replaces,
        under its update lock, so a stale etag can never overwrite newer content written by
        another fsnotes process. ``keep(old, new=new)`` (the history's) gets those bytes and
        the new ones before anything is written; if it raises, nothing is.
        """
        self.check_note_path(parts)
        written: list[bytes] = []

        def apply(current: ReadResult) -> bytes:
            if expect_etag is not None and etag_of(current.data) != expect_etag:
                raise NoteError(
                    f"'{display(parts)}' changed since you read it (its etag is no longer "
                    f"{expect_etag}); read it again and redo the change. Nothing was written."
                )
            new = self._encode(transform(_decode(current.data, parts)))
            if keep is not None:
                keep(current.data, new=new)
            written.append(new)
            return new

        info = self.root.update(parts, apply, max_bytes=MAX_NOTE_BYTES)
        return etag_of(written[-1]), info

    def move(
        self,
        src: Components,
        dst: Components,
        *,
        expect_etag: str | None,
        keep: Keeper | None = None,
    ) -> tuple[str, FileInfo]:
        """Move a note without replacing anything; ``keep(old, moved_to=...)`` (the
        history's) gets its bytes before the move, and if it raises, nothing moves."""
        self.check_note_path(src)
        self.check_note_path(dst)
        current = self.read(src)
        if expect_etag is not None and current.etag != expect_etag:
            raise NoteError(
                f"'{display(src)}' changed since you read it (its etag is no longer "
                f"{expect_etag}); read it again before moving it. Nothing was moved."
            )
        if keep is not None:
            # Exactly the bytes read: they were decoded from strict UTF-8.
            keep(current.text.encode("utf-8"), moved_to=display(dst))
        info = self.root.move(src, dst, make_parents=True, expect=current.identity)
        return current.etag, info

    def remove(self, parts: Components, identity: FileIdentity) -> None:
        self.check_note_path(parts)
        self.root.remove(parts, expect=identity)

    @staticmethod
    def _encode(text: str) -> bytes:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise NoteError(
                "The content has unpaired surrogates; send valid Unicode text."
            ) from None
        if len(data) > MAX_NOTE_BYTES:
            raise NoteError(
                f"The content is {len(data)} bytes; notes are limited to {MAX_NOTE_BYTES} bytes."
            )
        return data


class WorkspaceStores(Mapping[str, NoteStore]):
    """The note store of each workspace, by name: one owner, read by every request.

    Written only through :meth:`add`: the configured workspaces' stores when the server is
    built, a run-time folder's when a grant first names it (before any lookup can name
    the workspace). A name keeps its store for the life of the process: a store is never
    replaced or removed (a revoked folder's workspace just stops being granted), so a
    request holding one never sees it change under it. Reads take no lock: each :meth:`add`
    publishes a new read-only mapping (copy on write; adds are rare, reads every call).
    """

    def __init__(self, stores: Mapping[str, NoteStore] | None = None) -> None:
        self._lock = threading.Lock()
        self._by_name: Mapping[str, NoteStore] = MappingProxyType(dict(stores or {}))

    def add(self, name: str, store: NoteStore) -> None:
        """Make ``store`` the store of workspace ``name``; ValueError if it has one."""
        with self._lock:
            if name in self._by_name:
                raise ValueError(f"workspace {name!r} already has a note store")
            self._by_name = MappingProxyType({**self._by_name, name: store})

    def __getitem__(self, name: str) -> NoteStore:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


__all__ = [
    "DEFAULT_EXTENSIONS",
    "MAX_NOTE_BYTES",
    "Note",
    "NoteError",
    "NoteStore",
    "WorkspaceStores",
    "display",
    "etag_of",
    "iso_time",
]
