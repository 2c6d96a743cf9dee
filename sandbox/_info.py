"""Layer 2's value types: what ``lstat``/``fstat`` said, and what a read returned.

Public through :mod:`sandbox.root` (which re-exports them); here so that the private modules
that take them (``_mutate``) need nothing of ``root.py``. :func:`info` and
:func:`read_result` turn an ``os.stat_result`` into them.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Literal

__all__ = ["DirEntry", "FileIdentity", "FileInfo", "Kind", "ReadResult", "info", "read_result"]

Kind = Literal["file", "dir", "symlink", "other"]


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """The (st_dev, st_ino) pair that names one inode for as long as it exists."""

    dev: int
    ino: int


@dataclass(frozen=True, slots=True)
class FileInfo:
    """What ``lstat``/``fstat`` said about one inode (symlinks are never followed)."""

    kind: Kind
    size: int
    mtime_ns: int
    mode: int
    nlink: int
    identity: FileIdentity


@dataclass(frozen=True, slots=True)
class DirEntry:
    """One name in a directory, with ``fstatat(AT_SYMLINK_NOFOLLOW)`` information."""

    name: str
    info: FileInfo


@dataclass(frozen=True, slots=True)
class ReadResult:
    """File content and the ``fstat`` of the very descriptor it was read from."""

    data: bytes
    info: FileInfo


_KINDS: dict[int, Kind] = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}

# info() runs once per read, stat and listed entry. A frozen dataclass __init__ sets
# each slot through object.__setattr__; setting the slots through their descriptors builds
# the same objects (tests compare them) in about half the time.
_new = object.__new__
_set_dev, _set_ino = (FileIdentity.__dict__[f].__set__ for f in ("dev", "ino"))
_set_kind, _set_size, _set_mtime, _set_mode, _set_nlink, _set_identity = (
    FileInfo.__dict__[f].__set__ for f in ("kind", "size", "mtime_ns", "mode", "nlink", "identity")
)
_set_data, _set_info = (ReadResult.__dict__[f].__set__ for f in ("data", "info"))


def info(st: os.stat_result) -> FileInfo:
    identity = _new(FileIdentity)
    _set_dev(identity, st.st_dev)
    _set_ino(identity, st.st_ino)
    info = _new(FileInfo)
    mode = st.st_mode
    _set_kind(info, _KINDS.get(stat.S_IFMT(mode), "other"))
    _set_size(info, st.st_size)
    _set_mtime(info, st.st_mtime_ns)
    _set_mode(info, mode)
    _set_nlink(info, st.st_nlink)
    _set_identity(info, identity)
    return info


def read_result(data: bytes, st: os.stat_result) -> ReadResult:
    result = _new(ReadResult)
    _set_data(result, data)
    _set_info(result, info(st))
    return result
