"""The setup part: everything ``notes_setup`` needs, built by one call.

:func:`build_setup` is the one entry point (the server calls it once): it opens the setup
allowlist's folders and the setup database, layers the run-time grants over the configured
ones, and hands back the part's tool, its lifespan (the setup page's runner, when setup is
on) and the authorization table that includes the run-time layer. Nothing is wired after
construction: the grant source, the page runner and the flow are each given, when they are
made, what they will call.

Why the part returns the whole table rather than only its grant source for the caller to
make a :class:`~fsnotes.security.grants.Grants` with: its own tool needs that table (a
folder already granted, configured or not, is answered "already granted"), so the table
must exist before the tool does, and the part makes both.

Everything arrives as arguments (the policy, the state directory, the configured workspaces
and grants, the note stores, the sealer, the clock, the ``fsnotes grant`` command to print);
nothing here imports the configuration, the server or the command line above it. Start-up
problems are :class:`SetupError` with a sentence for the operator.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsnotes.notes.store import WorkspaceStores
from fsnotes.protocol.registry import Tool
from fsnotes.security.grants import Grant, Grants, Workspace
from fsnotes.security.seal import Sealer
from fsnotes.setup.flow import SetupFlow, build_setup_tool
from fsnotes.setup.policy import SetupPolicy
from fsnotes.setup.runtime import NotGrantable, RuntimeScope
from fsnotes.setup.store import Setup, SetupStore, SetupStoreBusy, open_setup_store
from fsnotes.state.audit import Auditor
from fsnotes.state.shared import SharedState
from sandbox import uri as lexical
from sandbox.errors import SandboxError
from sandbox.root import Root

if TYPE_CHECKING:
    from fsnotes.setup.runner import PageRunner

Lifespan = Callable[[], contextlib.AbstractAsyncContextManager[Any]]


class SetupError(Exception):
    """The setup part cannot start; the message says why (it may name host paths: it is for
    the operator, never for the client)."""


@dataclass
class SetupPart:
    """What :func:`build_setup` opened, and what the server uses of it.

    ``grants``: the authorization table (the run-time layer included when setup is on).
    ``tools``: ``notes_setup``. ``lifespan``: the setup page's runner, to run as long as the
    server serves, or ``None`` when setup is off. ``parents``: the allowlisted folders'
    Roots, which the jail must cover (writable only when ``policy.max_access`` allows).
    """

    grants: Grants
    tools: list[Tool[Any, Any]]
    lifespan: Lifespan | None
    policy: SetupPolicy
    store: SetupStore
    parents: list[Root]
    scope: RuntimeScope

    def start_watching(self) -> None:
        """Keep the run-time grants fresh from the store's change feed (PostgreSQL), so no
        request waits for the store: call once the jail is up (the feed is a thread)."""
        if self.policy.enabled:
            self.scope.start_watching()

    def close(self) -> None:
        """Close the run-time folders and the allowlisted parents."""
        self.scope.close()
        for root in self.parents:
            root.close()


def build_setup(
    *,
    policy: SetupPolicy,
    state_dir: Path,
    workspaces: Sequence[Workspace],
    grants: Iterable[Grant],
    stores: WorkspaceStores,
    extensions: tuple[str, ...],
    sealer: Sealer,
    clock: Callable[[], float],
    grant_command: str,
    allow_hardlinked_reads: bool = False,
    shared: SharedState | None = None,
    audit: Auditor | None = None,
) -> SetupPart:
    """Open the setup part (see the module docstring). Raises SetupError with a reason.

    ``workspaces`` and ``grants`` are the configured ones; ``stores`` holds the note store of each
    configured workspace, by name; the run-time folders' stores are added to it (the notes
    service reads the same owner). With setup off the part still answers
    ``notes_setup`` (that nothing can be granted here), and opens no page. ``shared``: where
    the setup store lives (default: the state directory's SQLite file); ``audit``: where
    grants are recorded.
    """
    parents: list[Root] = []
    try:
        for parent in policy.allow:
            try:
                parents.append(Root.open(parent, allow_hardlinked_reads=allow_hardlinked_reads))
            except (SandboxError, OSError) as exc:
                raise SetupError(f"cannot open setup allowlist folder {parent}: {exc}") from None
        shared = shared or SharedState(state_dir)
        try:
            store = open_setup_store(shared, clock=clock, audit=audit)
        except SetupStoreBusy as exc:
            raise SetupError(f"cannot open the setup database ({shared.where}): {exc}") from None
        scope = RuntimeScope(
            store=store,
            policy=policy,
            parents=parents,
            configured=workspaces,
            stores=stores,
            extensions=extensions,
        )
        try:
            table = Grants(workspaces, grants, source=scope if policy.enabled else None)
            runner: PageRunner | None = None
            if policy.enabled:
                scope.sync()  # the granted folders opened now, before the jail goes up
                runner = _page_runner(policy, state_dir, store, scope, lambda: flow)
            flow = SetupFlow(
                grants=table,
                scope=scope,
                store=store,
                sealer=sealer,
                clock=clock,
                grant_command=grant_command,
                start_page=None if runner is None else runner.ensure_started,
            )
        except BaseException:
            scope.close()
            raise
    except BaseException:
        for root in parents:
            root.close()
        raise
    return SetupPart(
        grants=table,
        tools=[build_setup_tool(flow)],
        lifespan=None if runner is None else runner.running,
        policy=policy,
        store=store,
        parents=parents,
        scope=scope,
    )


def _page_runner(
    policy: SetupPolicy,
    state_dir: Path,
    store: SetupStore,
    scope: RuntimeScope,
    flow: Callable[[], SetupFlow],
) -> PageRunner:
    """The setup page's runner. Imports the optional HTTP stack, before the jail goes up.

    ``flow`` gives the flow the page reports decisions to: the flow is made after the
    runner (it is given the runner's ``ensure_started``), and the page's app only when the
    page first starts, long after both exist.
    """
    try:
        from fsnotes.setup.page import PageFacts, build_page_app, default_facts
        from fsnotes.setup.runner import PageRunner
    except ImportError as exc:
        raise SetupError(
            f"the setup page needs its HTTP stack ({exc.name} is missing): starlette and "
            "uvicorn are dependencies of fsnotes; reinstall it (pip install --force-reinstall "
            "fsnotes)"
        ) from None

    def grantable(setup: Setup) -> bool:
        try:
            scope.target(lexical.path_components(setup.path), setup.access)
        except (NotGrantable, SandboxError):
            return False
        return True

    def app_factory() -> Any:
        return build_page_app(
            store=store,
            policy=policy,
            state_dir=state_dir,
            grantable=grantable,
            on_decided=flow().on_decided,
            describe=lambda setup: PageFacts(default_facts(setup).folder_uri, setup.client),
        )

    return PageRunner(policy, app_factory, has_pending=lambda: store.pending_count() > 0)
