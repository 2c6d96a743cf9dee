"""Attachments: the images and PDFs of a workspace, listed and read as resources, nothing more.

An attachment is a regular file whose name ends in one of the extensions of
:data:`MEDIA_TYPES`, outside hidden folders, that a URI can name (the same rules as for a
note's path). Its MIME type comes from that table and from nothing else: fsnotes never
opens an attachment to look at its content (no magic numbers, no image or PDF parser runs
on it), so a ``.png`` that holds something else is still served, as ``image/png``, as the
bytes it holds. Attachments are never notes: ``notes_list``, ``notes_search`` and the other
tools do not see them.

The search index records them (path, device, inode, modification time, size) as its scan
lists each folder, so that ``resources/list`` answers from the index; before a row is
returned it is checked against the file, as notes are (:mod:`fsnotes.notes.index.catalog`).
``resources/read`` reads one through the workspace's Root, at most
:data:`MAX_ATTACHMENT_BYTES`, and sends it base64-encoded as a blob.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from fsnotes.notes.store import NoteStore, display, is_addressable
from sandbox import errors as sx
from sandbox.root import FileIdentity, FileInfo
from sandbox.uri import Components

# Extension (lower case) -> MIME type. Images a host can show as they are, and PDF. Left
# out on purpose: SVG (a document that may hold scripts and links, not an image a host can
# show without interpreting it) and formats hosts do not display (TIFF, HEIC, PSD).
MEDIA_TYPES: dict[str, str] = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".avif": "image/avif",
    ".bmp": "image/bmp",
    ".pdf": "application/pdf",
}

# The largest attachment served. Base64 makes 4 MiB into 5.6 MiB of JSON, about the size of
# the largest note's answer (fsnotes.notes.store.MAX_NOTE_BYTES, escaped), and reading one
# holds about 15 MiB while it runs (the bytes, the base64 text, its encoding), under the
# 17 MiB a note of that size takes: so the memory bounds of the protocol core
# (fsnotes/protocol/limits.py) hold unchanged. Most photos from a phone and most PDFs of a
# few pages fit; larger ones are refused with a sentence that says so.
MAX_ATTACHMENT_BYTES = 4 * 1024 * 1024


# The extensions, for a first cheap test of every name a scan lists.
SUFFIXES = tuple(MEDIA_TYPES)


def media_type(name: str) -> str | None:
    """The MIME type of an attachment named ``name`` (None: not an attachment)."""
    dot = name.rfind(".")
    if dot <= 0 or name.startswith("."):
        return None
    return MEDIA_TYPES.get(name[dot:].lower())


def is_attachment(parts: Components, info: FileInfo, base: Components) -> bool:
    """Whether ``parts`` (relative to the workspace at ``base``), as ``info`` describes it,
    is an attachment to list: a regular file with an attachment's extension, outside
    hidden folders, that a URI below ``base`` can name."""
    return (
        info.kind == "file"
        and media_type(parts[-1]) is not None
        and not any(p.startswith(".") for p in parts)
        and is_addressable(parts, base)
    )


@dataclass(frozen=True, slots=True)
class AttachmentRow:
    """What the index knows about one attachment."""

    parts: Components
    dev: int
    ino: int
    mtime_ns: int
    size: int

    @property
    def identity(self) -> FileIdentity:
        return FileIdentity(self.dev, self.ino)

    @property
    def mime_type(self) -> str:
        return media_type(self.parts[-1]) or "application/octet-stream"

    def matches(self, info: FileInfo) -> bool:
        """Whether ``info`` (a fresh stat) is the file this row was recorded from."""
        return (
            info.kind == "file"
            and info.identity.dev == self.dev
            and info.identity.ino == self.ino
            and info.mtime_ns == self.mtime_ns
            and info.size == self.size
        )


class AttachmentTooLarge(Exception):
    """An attachment over :data:`MAX_ATTACHMENT_BYTES`; the message says so in one sentence."""


def read_blob(store: NoteStore, parts: Components) -> tuple[str, str]:
    """The MIME type and base64 content of the attachment ``parts``.

    Raises :class:`AttachmentTooLarge` for one over the limit (nothing is read), and the
    sandbox's errors (not found, a symlink, not a regular file, ...) as they come. The
    caller has authorized the read and contained ``parts``."""
    mime = media_type(parts[-1]) if parts else None
    if mime is None or any(p.startswith(".") for p in parts):
        raise sx.NotFound(display(parts))
    try:
        result = store.root.read(parts, max_bytes=MAX_ATTACHMENT_BYTES)
    except sx.TooLarge:
        raise AttachmentTooLarge(
            f"'{display(parts)}' is larger than {MAX_ATTACHMENT_BYTES:,} bytes (4 MiB), the "
            "most fsnotes serves as an attachment; it was not read."
        ) from None
    return mime, base64.b64encode(result.data).decode("ascii")
