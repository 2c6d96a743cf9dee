"""Run-time grants made real: stored grants become workspaces the notes tools can use.

A grant approved on the setup page (or by ``fsnotes grant``) names a principal, an absolute
folder path and an access level. :class:`RuntimeScope` turns the stored grants into the run-time
layer of :class:`~fsnotes.security.grants.Grants`: it is the
:class:`~fsnotes.security.grants.GrantSource` a ``Grants`` is made with.

- A folder is honoured only while the *current* policy allows it (strictly below an allowlisted
  parent, access capped at ``max_access``): tightening the configuration takes effect at once,
  whatever was stored earlier.
- Each folder is opened once, as a :meth:`~sandbox.root.Root.subroot` of its allowlisted
  parent's Root, which was opened at start-up and is covered by the Landlock rules. The
  folder is never opened by name from ``/``: a symlink planted in the parent cannot redirect
  it, and layer 3 holds even if it could.
- Changes made by other processes are picked up without a request ever waiting for the
  store. ``sync`` compares the store's generation number (one small query) and reloads only
  when it moved; until then :meth:`RuntimeScope.runtime_layer` returns the very same layer
  object. Who calls ``sync`` depends on the backend. PostgreSQL: once
  :meth:`RuntimeScope.start_watching` ran (the server does once its jail is up), the store's
  change feed (``LISTEN``/``NOTIFY``) calls it in a thread of its own, milliseconds after
  another instance commits a change, and requests read the layer without a query; while the
  database is unreachable the last good layer stands (a change made meanwhile by an instance
  that can still reach it counts here once the feed reconnects). SQLite (a local file,
  where a read never waits): each request's lookup calls it, once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from fsnotes.notes.store import NoteStore, WorkspaceStores
from fsnotes.security.grants import Access, Grant, RuntimeLayer, Workspace
from fsnotes.security.shown import has_hidden
from fsnotes.setup.policy import SetupPolicy
from fsnotes.setup.store import SetupStore, StoredGrant
from fsnotes.state.database import ChangeFeed
from sandbox import errors as sx
from sandbox import uri as lexical
from sandbox.root import Root
from sandbox.uri import Components

log = logging.getLogger("fsnotes.setup")


@dataclass(frozen=True)
class Target:
    """A folder someone asks to be granted, as checked against the policy."""

    components: Components
    path: str  # absolute host path, '/'-joined components
    uri: str
    configured: Workspace | None  # the configured workspace it is, if any


class NotGrantable(Exception):
    """The folder cannot be granted at run time; the message says why and what to do.

    ``str()`` goes to the MCP client, so it names no host path the caller did not send.
    ``detail`` adds, for the operator at a terminal (``fsnotes grant``), the paths that
    explain it: the allowlist, the overlapping workspace or folder.
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


def _nested(a: Components, b: Components) -> bool:
    """One strictly inside the other."""
    if a == b:
        return False
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return long_[: len(short)] == short


class RuntimeScope:
    """The run-time layer of one process's grants, kept in step with the setup store.

    ``configured`` are the workspaces of the configuration (which a run-time folder may be,
    but not overlap); ``stores`` is the owner of the note stores the notes service reads, to
    which each run-time folder's store is added before any grant can name it.
    """

    def __init__(
        self,
        *,
        store: SetupStore,
        policy: SetupPolicy,
        parents: Sequence[Root],
        configured: Sequence[Workspace],
        stores: WorkspaceStores,
        extensions: tuple[str, ...],
    ) -> None:
        if len(parents) != len(policy.allow):
            raise ValueError("one Root per allowlisted parent, in order")
        self.store = store
        self.policy = policy
        self._parents = list(parents)
        self._configured = list(configured)
        self._stores = stores
        self._extensions = extensions
        self._lock = threading.Lock()
        self._generation: int | None = None
        self._layer = RuntimeLayer()
        self._opened: dict[Components, Workspace] = {}  # run-time folders opened so far
        self._roots: list[Root] = []
        self._feed: ChangeFeed | None = None

    # --- policy --------------------------------------------------------------------------

    def target(self, components: Components, access: Access) -> Target:
        """Check that ``components`` may be granted at ``access`` now; raise NotGrantable (or
        SetupStoreBusy when the stored grants cannot be read)."""
        policy = self.policy
        path = "/" + "/".join(components)
        uri = lexical.to_file_uri(components)
        if not policy.enabled:
            raise NotGrantable(
                "This server grants nothing at run time: no setup allowlist is configured. The "
                "person who runs it can add the folder to its configuration instead."
            )
        if access > policy.max_access:
            raise NotGrantable(
                f"At most '{policy.max_access.label}' access can be granted at run time on this "
                f"server; ask for '{policy.max_access.label}' or less."
            )
        if any(has_hidden(name) for name in components):
            # The person approves what the page *shows*: a name with invisible or
            # direction-changing characters can look like another folder there. The page
            # would show them escaped (security.shown, the same definition); refusing is
            # plainer still.
            raise NotGrantable(
                "That folder's path contains invisible or text-direction characters, which "
                "could make it look like another folder on the setup page; rename it first."
            )
        where = policy.parent_of(components)
        if where is None:
            raise NotGrantable(
                "That folder is outside the folders this server may grant at run time; it "
                "cannot be granted at run time.",
                detail=f"The setup allowlist: {', '.join(policy.allow)}.",
            )
        configured = None
        for ws in self._configured:
            if ws.components == components:
                configured = ws
            elif _nested(ws.components, components):
                raise NotGrantable(
                    "That folder overlaps a workspace configured for this server; ask for that "
                    "workspace or a folder beside it instead.",
                    detail=f"It overlaps the configured workspace '{ws.name}' ({ws.uri}).",
                )
        if configured is None:
            for other in self._runtime_paths():
                if _nested(other, components):
                    raise NotGrantable(
                        "That folder overlaps another folder granted at run time; ask for "
                        "that folder or one beside it instead.",
                        detail=f"It overlaps the granted folder {lexical.to_file_uri(other)}.",
                    )
            index, rel = where
            try:
                self._parents[index].subroot(rel).close()
            except sx.NotFound:
                raise NotGrantable(
                    "That folder does not exist; create it first, then ask again."
                ) from None
            except sx.NotADirectory:
                raise NotGrantable("That path is a file, not a folder.") from None
            except sx.Escape:
                raise NotGrantable(
                    "That path goes through a symbolic link or onto another filesystem, which "
                    "fsnotes never follows; ask for the real folder."
                ) from None
            except sx.SandboxError as exc:
                raise NotGrantable(f"That folder cannot be used: {exc}.") from None
        return Target(components, path, uri, configured)

    def _runtime_paths(self) -> list[Components]:
        # SetupStoreBusy propagates: "busy, try again" is not "not grantable".
        stored = self.store.grants()
        out = []
        for g in stored:
            try:
                out.append(lexical.path_components(g.path))
            except sx.SandboxError:
                continue
        return out

    # --- sync ----------------------------------------------------------------------------

    def start_watching(self) -> None:
        """From now on keep the layer fresh from the store's change feed, if it has one
        (PostgreSQL; a thread: call once the jail is up). Without one, each lookup syncs."""
        if self._feed is None:
            self._feed = self.store.watch(self.sync)

    def runtime_layer(self) -> RuntimeLayer:
        """The run-time layer (the GrantSource protocol: asked once per request's scope).
        With a change feed, as the feed keeps it, asking nothing of the store (the last
        good layer while the store is down); without one, synced first (a local read)."""
        if self._feed is None:
            self.sync()
        return self._layer

    def sync(self) -> bool:
        """Reload the run-time layer if a stored grant changed (in any process); whether the
        store could be read.

        A store that cannot be read leaves the previous layer in place and logs why: the
        configured grants keep working.
        """
        try:
            generation = self.store.generation()
        except Exception as exc:  # sqlite3.Error and OSError: never break configured access
            log.warning("cannot read the grant database: %s", exc)
            return False
        if generation == self._generation:
            return True
        with self._lock:
            if generation == self._generation:
                return True
            try:
                stored = self.store.grants()
            except Exception as exc:
                log.warning("cannot read the grant database: %s", exc)
                return False
            self._apply(stored)
            self._generation = generation
        return True

    def _apply(self, stored: list[StoredGrant]) -> None:
        configured = {ws.components: ws for ws in self._configured}
        taken = {ws.name for ws in configured.values()} | {ws.name for ws in self._opened.values()}
        workspaces: list[Workspace] = []
        grants: list[Grant] = []
        for g in stored:
            try:
                components = lexical.path_components(g.path)
            except sx.SandboxError:
                log.warning("stored grant for %r has an invalid path; ignored", g.principal)
                continue
            where = self.policy.parent_of(components)
            if where is None:
                log.warning(
                    "stored grant of %s to %r is outside the setup allowlist now; not honoured",
                    g.path,
                    g.principal,
                )
                continue
            access = min(g.access, self.policy.max_access)
            if components in configured:
                grants.append(Grant(g.principal, configured[components].name, access))
                continue
            if any(_nested(c, components) for c in configured):
                log.warning("stored grant of %s overlaps a configured workspace; ignored", g.path)
                continue
            ws = self._opened.get(components)
            if ws is None:
                ws = self._open(components, where, taken)
                if ws is None:
                    continue
                taken.add(ws.name)
            if ws not in workspaces:
                workspaces.append(ws)
            grants.append(Grant(g.principal, ws.name, access))
        self._layer = RuntimeLayer(tuple(workspaces), tuple(grants))

    def _open(
        self, components: Components, where: tuple[int, Components], taken: set[str]
    ) -> Workspace | None:
        index, rel = where
        try:
            root = self._parents[index].subroot(rel)
        except sx.SandboxError as exc:
            log.warning("granted folder %s cannot be opened (%s); skipped", "/".join(rel), exc)
            return None
        name = base = components[-1]
        n = 2
        while name in taken:
            name, n = f"{base}-{n}", n + 1
        ws = Workspace(name, components)
        # The store exists before any grant can name the workspace (lookups in other threads).
        self._stores.add(name, NoteStore(root, extensions=self._extensions))
        self._roots.append(root)
        self._opened[components] = ws
        log.info("opened granted folder %s as workspace %r", os.sep.join(("", *components)), name)
        return ws

    def close(self) -> None:
        if self._feed is not None:
            self._feed.close()
            self._feed = None
        for root in self._roots:
            root.close()
        self._roots.clear()
