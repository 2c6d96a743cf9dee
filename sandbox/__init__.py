"""Containment for file operations: nothing here knows about MCP or notes.

Layer 1 (:mod:`sandbox.uri`) turns ``file://`` URIs and relative paths into checked lists
of plain names; layer 2 (:mod:`sandbox.root`) performs every file operation relative to a
directory descriptor without following symlinks; layer 3 (:mod:`sandbox.jail`) restricts
the whole process with the operating system. :mod:`sandbox.watch` gives inotify hints for
folders below a Root, :mod:`sandbox.probe` what this kernel offers, :mod:`sandbox.errors`
the typed errors of all three layers.

``__all__`` is what other packages use: layer 2's handle and value types, the jail and the
watcher, and the modules used whole (``uri``, ``errors``, ``probe``). Each is imported on
first use (PEP 562, as ``concurrent.futures`` does), so importing one module does not
import the others.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox import errors, probe, uri
    from sandbox.errors import SandboxError, TooDeep
    from sandbox.jail import (
        JailError,
        JailReport,
        abi_gaps,
        applied_report,
        apply_landlock,
        runtime_read_only_paths,
    )
    from sandbox.root import DirEntry, FileIdentity, FileInfo, ReadResult, Root, is_leftover_name
    from sandbox.uri import Components
    from sandbox.watch import DirectoryWatcher, WatchEvent, WatchUnavailable, max_user_watches

__all__ = [
    "Components",
    "DirEntry",
    "DirectoryWatcher",
    "FileIdentity",
    "FileInfo",
    "JailError",
    "JailReport",
    "ReadResult",
    "Root",
    "SandboxError",
    "TooDeep",
    "WatchEvent",
    "WatchUnavailable",
    "abi_gaps",
    "applied_report",
    "apply_landlock",
    "errors",
    "is_leftover_name",
    "max_user_watches",
    "probe",
    "runtime_read_only_paths",
    "uri",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "Components": "uri",
    "DirEntry": "root",
    "DirectoryWatcher": "watch",
    "FileIdentity": "root",
    "FileInfo": "root",
    "JailError": "jail",
    "JailReport": "jail",
    "ReadResult": "root",
    "Root": "root",
    "SandboxError": "errors",
    "TooDeep": "errors",
    "WatchEvent": "watch",
    "WatchUnavailable": "watch",
    "abi_gaps": "jail",
    "applied_report": "jail",
    "apply_landlock": "jail",
    "errors": "errors",
    "is_leftover_name": "root",
    "max_user_watches": "watch",
    "probe": "probe",
    "runtime_read_only_paths": "jail",
    "uri": "uri",
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
