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
- A request's credentials may allow less than its grants: an OAuth token's scopes set a
  *ceiling*, and the request's :class:`Scope` holds the lower of each grant and it. The
  ceiling is told to :meth:`Grants.scope` as a value of its own, never read from the name.
- A request is authorized against one :class:`Scope`, made by :meth:`Grants.scope` when it
  starts: the table is consulted (and the run-time source checked) once per request, not
  once per lookup.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sandbox import uri as lexical
from sandbox.errors import SandboxError, TooDeep

log = logging.getLogger("fsnotes.security")

Components = tuple[str, ...]


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

    @classmethod
    def from_ceiling(cls, label: Literal["read", "write", "delete"] | None) -> Access:
        """The ceiling credentials with this label set (the protocol's ``RequestContext``
        carries it): ``None``, credentials that set no limit, allows everything granted."""
        return cls.DELETE if label is None else cls.parse(label)

    @property
    def label(self) -> Literal["read", "write", "delete"]:
        return _LABELS[self]


_LABELS: dict[Access, Literal["read", "write", "delete"]] = {
    Access.READ: "read",
    Access.WRITE: "write",
    Access.DELETE: "delete",
}


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

        Called once for each :class:`Scope` (each request) and for :meth:`Grants.all_workspaces`,
        from any thread: it must be cheap when nothing changed, must not wait for a store
        that is down, and must return the *same* object then (a new object is merged once,
        an old one reused). It should not raise: a source that cannot be read keeps
        returning its last layer.
        """
        ...


_Table = tuple[dict[str, Workspace], dict[tuple[str, str], Access]]


@dataclass(frozen=True)
class Scope:
    """One request's authorization, resolved once when the request starts.

    Who it acts for (``principal``, a plain name), the most its credentials allow
    (``ceiling``: an OAuth token's scopes, ``delete`` for credentials that set no limit), the
    workspaces granted to it then (each at the lower of its grant and the ceiling;
    configured ones first, in order) and, for a legacy session, the client's roots that fall
    inside them (``hints``; ``None`` for a stateless request). Made by :meth:`Grants.scope`
    from one consultation of the grants table; every lookup of the request answers from it,
    asking nothing of any store. It is a snapshot: a grant changed meanwhile counts from
    the next request on (a legacy handler called again after a person answered a question
    is given a new one).
    """

    principal: str
    ceiling: Access
    granted: tuple[tuple[Workspace, Access], ...]
    hints: tuple[Components, ...] | None = None

    def workspaces(self) -> list[Workspace]:
        return [ws for ws, _ in self.granted]

    def access(self, workspace: Workspace) -> Access | None:
        """The principal's access to ``workspace`` (its grant, lowered to its ceiling)."""
        for ws, access in self.granted:
            if ws.name == workspace.name:
                return access
        return None

    def named(self, uri: str | None) -> tuple[Workspace, Access]:
        """The granted workspace a call names by ``uri`` (exactly, after strict parsing), or
        its default when it names none (:meth:`default`), with the access held there."""
        if uri is None:
            return self.default()
        try:
            components = lexical.parse_file_uri(uri)
        except SandboxError:
            # A malformed URI cannot name a granted workspace; same message as "not granted".
            raise NotGranted(NOT_GRANTED_MESSAGE) from None
        for ws, access in self.granted:
            if ws.components == components:
                return ws, access
        raise NotGranted(NOT_GRANTED_MESSAGE)

    def default(self) -> tuple[Workspace, Access]:
        """The workspace to use when the caller named none.

        Exactly one granted workspace: that one. Several: the single one that the client's
        roots point at (a root equal to or inside it); roots outside the grants are ignored.
        """
        granted = self.granted
        if len(granted) == 1:
            return granted[0]
        if granted and self.hints:
            hinted = [
                (ws, access)
                for ws, access in granted
                if any(_contains(ws.components, root) for root in self.hints)
            ]
            if len(hinted) == 1:
                return hinted[0]
        if not granted:
            raise NotGranted("No workspace is granted to you, so there is nothing to work on.")
        raise NotGranted(
            "You have several workspaces; pass workspaceUri (see workspaces_list) to choose one."
        )

    def containing(self, components: Components) -> tuple[Workspace, Access, Components]:
        """The granted workspace containing these absolute components, the access held
        there, and the relative rest.

        When workspaces nest, the innermost granted one wins (its grant is the specific one).

        Raises:
            NotGranted: no granted workspace contains the components.
            TooDeep: some granted workspace contains them, but more than
                :data:`sandbox.uri.MAX_DEPTH` levels below it (and no other one contains them
                within the limit). It only tells the caller about a workspace it was granted.
        """
        best: tuple[Workspace, Access, Components] | None = None
        too_deep: TooDeep | None = None
        for ws, access in self.granted:
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
        return best

    def authorize_workspace_uri(self, uri: str, needed: Access) -> Workspace:
        """The granted workspace whose URI is exactly ``uri``, if ``needed`` is allowed there."""
        return check_level(*self.named(uri), needed)

    def authorize_note_uri(
        self, components: Components, needed: Access
    ) -> tuple[Workspace, Components]:
        """The granted workspace containing these components (see :meth:`containing`) and
        the relative rest, if ``needed`` is allowed there."""
        ws, access, rel = self.containing(components)
        return check_level(ws, access, needed), rel

    def default_for(self, needed: Access) -> Workspace:
        """The default workspace (see :meth:`default`), if ``needed`` is allowed there."""
        return check_level(*self.default(), needed)


def check_level(ws: Workspace, access: Access, needed: Access) -> Workspace:
    """``ws`` when ``access`` includes ``needed``; else NotGranted saying what is held."""
    if access < needed:
        raise NotGranted(
            f"Your grant on workspace '{ws.name}' is '{access.label}', and this needs "
            f"'{needed.label}'."
        )
    return ws


def _contains(base: Components, target: Components) -> bool:
    try:
        lexical.contain(base, target)
    except SandboxError:
        return False
    return True


class Grants:
    """The authorization table of one server process.

    Two layers: the configured workspaces and grants (fixed at start-up) and a run-time layer
    (workspaces and grants a person approved on the setup page or with ``fsnotes grant``),
    asked of ``source`` (optional, given at construction) once per :class:`Scope` and merged
    once each time it changes. A run-time grant adds to a configured one and never lowers
    it; its workspaces may not reuse a configured name, and its grants may name configured
    or run-time workspaces (a layer that breaks this raises ValueError at the lookup).

    The per-principal methods below each make a Scope of their own (one consultation each)
    and answer from the grants alone, as no credential limits them (configuration checks,
    the command line); a request makes one with :meth:`scope`, given its credentials'
    ceiling, and asks it everything.
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
        # The roots a session last reported, parsed (the same tuple object until the client
        # reports others): parsed once per report, not once per request.
        self._parsed_roots: tuple[object, tuple[Components, ...]] = ((), ())

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

    def scope(
        self, principal: str, roots: Sequence[Any] | None = None, *, ceiling: Access
    ) -> Scope:
        """One request's :class:`Scope`, from one consultation of the table. ``ceiling``: the
        most the request's credentials allow (``Access.DELETE`` when they set no limit), said
        by every caller: nothing about it is inferred from the name. ``roots``: the roots a
        legacy session's client reported, as it sent them (``None`` for a stateless
        request): those inside a granted workspace become hints, the rest are ignored."""
        workspaces, grants = self._current()
        granted = []
        for ws in workspaces.values():
            access = grants.get((principal, ws.name))
            if access is not None:
                granted.append((ws, min(access, ceiling)))
        hints = None
        if roots is not None:
            hints = tuple(
                root
                for root in self._parse_roots(roots)
                if any(_contains(ws.components, root) for ws, _ in granted)
            )
        return Scope(principal, ceiling, tuple(granted), hints)

    def _parse_roots(self, roots: Sequence[Any]) -> tuple[Components, ...]:
        """The valid file:// roots among ``roots`` as components (the rest ignored: roots are
        hints), parsed again only when the sequence is another object."""
        seen, parsed = self._parsed_roots
        if roots is seen:
            return parsed
        out: list[Components] = []
        for root in roots:
            uri = root.get("uri") if isinstance(root, Mapping) else None
            try:
                components = lexical.parse_file_uri(uri) if isinstance(uri, str) else None
            except SandboxError:
                components = None
            if components is None:
                log.debug("ignoring a client root that is not a file:// URI: %r", uri)
                continue
            out.append(components)
        parsed = tuple(out)
        self._parsed_roots = (roots, parsed)
        return parsed

    def all_workspaces(self) -> list[Workspace]:
        """Every workspace there is now, configured and granted at run time, whoever may
        use it (for the search indexes kept in the background)."""
        return list(self._current()[0].values())

    def _granted_scope(self, principal: str) -> Scope:
        return self.scope(principal, ceiling=Access.DELETE)

    def granted(self, principal: str) -> list[tuple[Workspace, Access]]:
        """The workspaces this principal is granted: configured ones first, in order."""
        return list(self._granted_scope(principal).granted)

    def access(self, principal: str, workspace: Workspace) -> Access | None:
        """The principal's grant on ``workspace``."""
        return self._granted_scope(principal).access(workspace)

    def authorize_workspace_uri(self, principal: str, uri: str, needed: Access) -> Workspace:
        """The granted workspace whose URI is exactly ``uri`` (see :meth:`Scope.named`)."""
        return self._granted_scope(principal).authorize_workspace_uri(uri, needed)

    def authorize_note_uri(
        self, principal: str, components: Components, needed: Access
    ) -> tuple[Workspace, Components]:
        """The granted workspace containing ``components``, and the relative rest (see
        :meth:`Scope.containing`)."""
        return self._granted_scope(principal).authorize_note_uri(components, needed)

    def default_for(
        self, principal: str, needed: Access, root_hints: Sequence[Components] = ()
    ) -> Workspace:
        """The workspace to use when the caller named none (see :meth:`Scope.default`)."""
        scope = self._granted_scope(principal)
        return dataclasses.replace(scope, hints=tuple(root_hints)).default_for(needed)
