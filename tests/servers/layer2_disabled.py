"""TEST ONLY: `fsnotes serve` with layer 2 replaced by a naive open-by-name.

Proves that layer 3 (Landlock) holds on its own: with this module, note reads ignore
`sandbox.Root` entirely and open ``<workspace>/<path>`` by name, following every symlink,
exactly the bug layer 2 exists to prevent. A jailed server must still fail with EACCES
when such a read lands outside its workspaces; with ``--no-landlock`` the same read leaks
(which is how the tests know they can fail).

Reachable only by running this file (``python tests/servers/layer2_disabled.py serve
--workspace W ...``): nothing under ``fsnotes/`` or ``sandbox/`` imports it, and no
configuration key or environment variable selects it.
"""

from __future__ import annotations

import errno
import os
import sys

from fsnotes.app import cli
from fsnotes.notes import store as store_module
from sandbox import errors as sx
from sandbox.root import FileIdentity, FileInfo, ReadResult


def _workspace_from(argv: list[str]) -> str:
    if "--workspace" in argv:
        return os.path.abspath(argv[argv.index("--workspace") + 1])
    return os.environ["FSNOTES_WORKSPACE"]


def main() -> int:
    workspace = _workspace_from(sys.argv[1:])

    def naive_read(self: store_module.NoteStore, parts: tuple[str, ...]) -> store_module.Note:
        self.check_note_path(parts)  # lexical note rules stay; only layer 2 is gone
        try:
            with open(os.path.join(workspace, *parts), "rb") as f:  # follows symlinks
                data = f.read()
                st = os.fstat(f.fileno())
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            if exc.errno in (errno.EACCES, errno.EPERM):
                raise sx.PermissionDenied(name, errno=exc.errno) from None
            raise sx.StorageError(name, errno=exc.errno) from None
        info = FileInfo(
            "file",
            st.st_size,
            st.st_mtime_ns,
            st.st_mode,
            st.st_nlink,
            FileIdentity(st.st_dev, st.st_ino),
        )
        return self._note(parts, ReadResult(data, info))

    store_module.NoteStore.read = naive_read  # type: ignore[method-assign]
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
