"""Principals, workspaces and grants: who may touch which workspace, and how much.

Authorization is the first check of every tool call, before any path is parsed against a
workspace or any file is opened. The rules:

- A grant gives one principal one workspace at one access level. Levels are ordered:
  ``read`` < ``write`` < ``delete``; each includes the ones before it.
- A workspace that is not granted is refused with the *same* message whether or not it
  exists, so a principal cannot probe for other people's workspaces.
- Client roots (2025-11-25) are hints that may pick a default among granted workspaces; they
  never add one (see :meth:`Grants.default_for`).
- Grants a person approves at run time come from a :class:`GrantSource` given to
  :class:`Grants` when it is made (the setup part's run-time scope); they add to the
  configured grants and never lower one.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from sandbox import uri as lexical
from sandbox.errors import SandboxError, TooDeep


class Access(enum.IntEnum):
    """Access levels, ordered so that a higher level includes every lower one."""

    READ = 1
    WRITE = 2
    DELETE = 3

    @classmethod
    def parse(cls, text: str) -> Access:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown access level {text!r}; use 'read', 'write' or 'delete'"
            ) from None

    @property
    def label(self) -> Literal["read", "write", "delete"]:
        return _LABELS[self]


_LABELS: dict[Access, Literal["read", "write", "delete"]] = {
    Access.READ: "read",
    Access.WRITE: "write",
    Access.DELETE: "delete",
}


class Principal(str):
    """A principal whose credentials allow at most ``ceiling``, whatever its grants say.

    An OAuth access token's scopes are such a ceiling (:mod:`fsnotes.security.oauth`): the
    effective access in a workspace is the lower of the grant and the ceiling. It is a ``str``
    (equal to, and hashed as, the plain name), so it travels through every layer that passes a
    principal on; :meth:`Grants.granted` and :meth:`Grants.access` apply the ceiling. A plain
    ``str`` principal has no ceiling.
    """

    ceiling: Access

    def __new__(cls, name: str, ceiling: Access) -> Principal:
        self = super().__new__(cls, name)
        self.ceiling = ceiling
        return self


def ceiling_of(principal: str) -> Access:
    """The most ``principal``'s credentials allow (``delete`` for a plain name)."""
    return principal.ceiling if isinstance(principal, Principal) else Access.DELETE


class NotGranted(Exception):
    """The principal has no grant (or too little access) for what it asked.

    The message is identical for "no such workspace" and "not yours", by design.
    """


NOT_GRANTED_MESSAGE = (
    "That workspace is not granted to you; call workspaces_list to see the ones you can use."
)
NOT_IN_WORKSPACE_MESSAGE = (
    "That URI is not inside a workspace granted to you; call workspaces_list to see them."
)


@dataclass(frozen=True)
class Workspace:
    """One notes directory, as the server sees it.

    ``components`` is the absolute host path as a tuple of names (layer 1 form); ``uri`` is
    its canonical ``file://`` URI. Both are fixed at start-up.
    """

    name: str
    components: tuple[str, ...]

    @property
    def uri(self) -> str:
        return lexical.to_file_uri(self.components)


@dataclass(frozen=True)
class Grant:
    principal: str
    workspace: str  # Workspace.name
    access: Access


@dataclass(frozen=True)
class RuntimeLayer:
    """Workspaces and grants a person approved at run time (on the setup page or with
    ``fsnotes grant``), as one value: a :class:`GrantSource` replaces it as a whole."""

    workspaces: tuple[Workspace, ...] = ()
    grants: tuple[Grant, ...] = ()


EMPTY_LAYER = RuntimeLayer()


class GrantSource(Protocol):
    """Where the run-time layer of a :class:`Grants` comes from (the setup store, for one)."""

    def runtime_layer(self) -> RuntimeLayer:
        """The run-time layer as it stands now.

        Called before every lookup, from any thread: it must be cheap when nothing changed,
        and return the *same* object then (a new object is merged once, an old one reused).
        It should not raise: a source that cannot be read keeps returning its last layer.
        """
        ...


_Table = tuple[dict[str, Workspace], dict[tuple[str, str], Access]]


class Grants:
    """The authorization table of one server process.

    Two layers: the configured workspaces and grants (fixed at start-up) and a run-time layer
    (workspaces and grants a person approved on the setup page or with ``fsnotes grant``),
    asked of ``source`` (optional, given at construction) before every lookup and merged once
    each time it changes. A run-time grant adds to a configured one and never lowers it; its
    workspaces may not reuse a configured name, and its grants may name configured or
    run-time workspaces (a layer that breaks this raises ValueError at the lookup).
    """

    def __init__(
        self,
        workspaces: Sequence[Workspace],
        grants: Iterable[Grant],
        source: GrantSource | None = None,
    ) -> None:
        config_ws = {w.name: w for w in workspaces}
        if len(config_ws) != len(workspaces):
            raise ValueError("workspace names must be unique")
        config_grants: dict[tuple[str, str], Access] = {}
        for g in grants:
            if g.workspace not in config_ws:
                raise ValueError(
                    f"grant for {g.principal!r} names unknown workspace {g.workspace!r}"
                )
            key = (g.principal, g.workspace)
            config_grants[key] = max(config_grants.get(key, g.access), g.access)
        self._config_ws = config_ws
        self._config_grants = config_grants
        self._source = source
        # The layer last merged and the table it gave, swapped as one tuple: a lookup in
        # another thread sees one layer's table or the other's, never a mix.
        self._merged: tuple[RuntimeLayer, _Table] = (EMPTY_LAYER, self._merge(EMPTY_LAYER))

    def _merge(self, layer: RuntimeLayer) -> _Table:
        table = dict(self._config_ws)
        for ws in layer.workspaces:
            if ws.name in table and table[ws.name] != ws:
                raise ValueError(f"run-time workspace name {ws.name!r} is already taken")
            table[ws.name] = ws
        merged = dict(self._config_grants)
        for g in layer.grants:
            if g.workspace not in table:
                raise ValueError(f"run-time grant names unknown workspace {g.workspace!r}")
            key = (g.principal, g.workspace)
            merged[key] = max(merged.get(key, g.access), g.access)
        return table, merged

    def _current(self) -> _Table:
        seen, table = self._merged
        if self._source is None:
            return table
        layer = self._source.runtime_layer()
        if layer is not seen:
            # Two threads may both merge a new layer; they compute the same table.
            table = self._merge(layer)
            self._merged = (layer, table)
        return table

    def all_workspaces(self) -> list[Workspace]:
        """Every workspace there is now, configured and granted at run time, whoever may
        use it (for the search indexes kept in the background)."""
        return list(self._current()[0].values())

    def granted(self, principal: str) -> list[tuple[Workspace, Access]]:
        """The workspaces this principal may use: configured ones first, in order."""
        workspaces, grants = self._current()
        ceiling = ceiling_of(principal)
        out = []
        for ws in workspaces.values():
            access = grants.get((principal, ws.name))
            if access is not None:
                out.append((ws, min(access, ceiling)))
        return out

    def access(self, principal: str, workspace: Workspace) -> Access | None:
        """The principal's access to ``workspace`` (its grant, lowered to its ceiling)."""
        access = self._current()[1].get((principal, workspace.name))
        return None if access is None else min(access, ceiling_of(principal))

    def authorize_workspace_uri(self, principal: str, uri: str, needed: Access) -> Workspace:
        """The granted workspace whose URI is exactly ``uri`` (after strict parsing)."""
        try:
            components = lexical.parse_file_uri(uri)
        except SandboxError:
            # A malformed URI cannot name a granted workspace; same message as "not granted".
            raise NotGranted(NOT_GRANTED_MESSAGE) from None
        for ws, access in self.granted(principal):
            if ws.components == components:
                return self._check_level(ws, access, needed)
        raise NotGranted(NOT_GRANTED_MESSAGE)

    def authorize_note_uri(
        self, principal: str, components: tuple[str, ...], needed: Access
    ) -> tuple[Workspace, tuple[str, ...]]:
        """The granted workspace containing these absolute components, and the relative rest.

        When workspaces nest, the innermost granted one wins (its grant is the specific one).

        Raises:
            NotGranted: no granted workspace contains the components.
            TooDeep: some granted workspace contains them, but more than
                :data:`sandbox.uri.MAX_DEPTH` levels below it (and no other one contains them
                within the limit). It only tells the caller about a workspace it was granted.
        """
        best: tuple[Workspace, Access, tuple[str, ...]] | None = None
        too_deep: TooDeep | None = None
        for ws, access in self.granted(principal):
            try:
                rel = lexical.contain(ws.components, components)
            except TooDeep as exc:
                too_deep = exc
                continue
            except SandboxError:
                continue
            if best is None or len(ws.components) > len(best[0].components):
                best = (ws, access, rel)
        if best is None:
            if too_deep is not None:
                raise too_deep
            raise NotGranted(NOT_IN_WORKSPACE_MESSAGE)
        ws, access, rel = best
        return self._check_level(ws, access, needed), rel

    def default_for(
        self, principal: str, needed: Access, root_hints: Sequence[tuple[str, ...]] = ()
    ) -> Workspace:
        """The workspace to use when the caller named none.

        Exactly one granted workspace: that one. Several: the single one that the client's
        roots point at (a root equal to or inside it); roots outside the grants are ignored.
        """
        granted = self.granted(principal)
        if len(granted) == 1:
            ws, access = granted[0]
            return self._check_level(ws, access, needed)
        if granted and root_hints:
            hinted = []
            for ws, access in granted:
                for root in root_hints:
                    try:
                        lexical.contain(ws.components, root)
                    except SandboxError:
                        continue
                    hinted.append((ws, access))
                    break
            if len(hinted) == 1:
                return self._check_level(*hinted[0], needed)
        if not granted:
            raise NotGranted("No workspace is granted to you, so there is nothing to work on.")
        raise NotGranted(
            "You have several workspaces; pass workspaceUri (see workspaces_list) to choose one."
        )

    @staticmethod
    def _check_level(ws: Workspace, access: Access, needed: Access) -> Workspace:
        if access < needed:
            raise NotGranted(
                f"Your grant on workspace '{ws.name}' is '{access.label}', and this needs "
                f"'{needed.label}'."
            )
        return ws
