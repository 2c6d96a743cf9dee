"""``fsnotes grant``: the terminal equivalent of the setup page, for hosts without URL support.

The operator at a terminal is the person the setup code proves on the page, so no code is
asked here; the bounds are the same: the folder must be strictly below an allowlisted parent,
at most ``max_access``, not overlapping a configured workspace, an existing real directory
reached without symlinks. The grant goes to the same store the page writes, so a running
server (any process sharing the state directory) picks it up on its next call, and a pending
setup it satisfies is marked approved (a waiting ``notes_setup`` call then completes).

This is the command line's side of the setup part: it reads the configuration, prepares the
state directory as ``fsnotes serve`` does, and uses the setup part's store and run-time scope
(which import nothing from up here) to check the bounds and store the grant.
"""

from __future__ import annotations

import os
import sys
import time

from fsnotes.app.config import Config, ConfigError
from fsnotes.app.state_dir import prepare_state_dir
from fsnotes.notes.store import WorkspaceStores
from fsnotes.security.grants import Access
from fsnotes.setup.runtime import NotGrantable, RuntimeScope
from fsnotes.setup.store import SetupStore, SetupStoreBusy, open_setup_store
from fsnotes.state.audit import Auditor, AuditUnavailable, default_instance, open_audit
from fsnotes.state.shared import SharedState, StateUnavailable
from sandbox import uri as lexical
from sandbox.errors import SandboxError
from sandbox.root import Root


def run_grant(
    config: Config, *, folder: str | None, access: str | None, revoke: bool, show: bool
) -> int:
    """Run ``fsnotes grant``; a busy or unusable grant database is a ConfigError."""
    if sum([show, revoke, access is not None]) != 1:
        raise ConfigError("say one of: --access LEVEL (with --workspace), --revoke, or --list")
    prepare_state_dir(config)
    try:
        shared = SharedState.open(config.state_dir, config.database)
    except StateUnavailable as exc:
        raise ConfigError(str(exc)) from None
    try:
        audit = Auditor(
            open_audit(shared, clock=time.time), instance=config.instance or default_instance()
        )
        store = open_setup_store(shared, clock=time.time, audit=audit)
        return _run(config, store, folder=folder, access=access, revoke=revoke, show=show)
    except (SetupStoreBusy, AuditUnavailable) as exc:
        raise ConfigError(f"cannot use the grant database ({shared.where}): {exc}") from None
    finally:
        shared.close()


def _run(
    config: Config,
    store: SetupStore,
    *,
    folder: str | None,
    access: str | None,
    revoke: bool,
    show: bool,
) -> int:
    if show:
        rows = store.grants()
        if not rows:
            print("no stored grants")
        for g in rows:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(g.granted))
            print(f"{g.principal}\t{g.access.label}\t{g.path}\t({g.source}, {when})")
        return 0
    if not folder:
        raise ConfigError("--workspace PATH is required")
    path = os.path.normpath(os.path.abspath(os.path.expanduser(folder)))
    try:
        components = lexical.path_components(path)
    except SandboxError as exc:
        raise ConfigError(f"--workspace {folder!r}: {exc}") from None
    if revoke:
        gone = store.revoke(config.principal, path)
        print(
            f"revoked {config.principal}'s grant on {path}"
            if gone
            else f"{config.principal} had no stored grant on {path}; nothing changed"
        )
        return 0
    assert access is not None
    level = Access.parse(access)
    parents: list[Root] = []
    try:
        for parent in config.setup.allow:
            try:
                parents.append(Root.open(parent))
            except (SandboxError, OSError) as exc:
                raise ConfigError(f"cannot open setup allowlist folder {parent}: {exc}") from None
        scope = RuntimeScope(
            store=store,
            policy=config.setup,
            parents=parents,
            configured=config.workspace_objects(),
            stores=WorkspaceStores(),  # a grant opens no note store here
            extensions=config.extensions,
        )
        try:
            target = scope.target(components, level)
        except NotGrantable as exc:
            print(f"fsnotes: not granted: {exc} {exc.detail}".rstrip(), file=sys.stderr)
            return 2
        store.grant(config.principal, target.path, level)
    finally:
        for root in parents:
            root.close()
    print(f"granted '{level.label}' on {target.path} to {config.principal} ({target.uri})")
    return 0
