"""Whom an HTTP server's tokens act for, and whether any workspace is granted to them.

A bearer token acts for its own principal, and ``--workspace`` grants its folders to the
principal the server *serves* (``--principal``, ``FSNOTES_PRINCIPAL``, the configuration's
``principal``, else the OS user). A token made for another name is accepted, and its every
call then finds no workspace: nothing fails, so nothing would say why. ``fsnotes serve
--http`` warns at start, and ``fsnotes doctor --http`` says so, with :func:`ungranted_advice`.

Limits: the check sees the tokens and grants there are at that moment. A token added or a
folder granted while the server runs is not re-checked (the server reads new tokens at its
next request); OAuth subjects are whoever the issuer names, so they cannot be checked here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from fsnotes.app.config import Config
from fsnotes.state.shared import DB_FILES

log = logging.getLogger("fsnotes")


def ungranted(principals: Iterable[str], has_grant: Callable[[str], bool]) -> list[str]:
    """The principals, sorted, to whom no workspace at all is granted."""
    return sorted({p for p in principals if not has_grant(p)})


def ungranted_advice(missing: list[str], served: str) -> str:
    """One sentence for the operator: which token principals see no notes, and the fixes."""
    names = ", ".join(repr(p) for p in missing)
    first = missing[0]
    return (
        f"no workspace is granted to {names}, for whom a bearer token acts: its calls will find "
        f"no notes. --workspace grants to the principal served, {served!r} (--principal, "
        f"FSNOTES_PRINCIPAL, the configuration's principal, else the OS user): serve with "
        f"--principal {first}, or make the token for {served!r} (fsnotes token add --principal "
        f"{served}), or grant {first!r} a workspace ([[grant]] in the configuration, or "
        "fsnotes grant)"
    )


def configured_has_grant(config: Config) -> Callable[[str], bool]:
    """Whether a principal holds a grant, as far as ``fsnotes doctor`` can tell without
    serving: the configuration's grants (``--workspace`` ones included), and the run-time
    grants stored in the state directory or the shared database that the current setup
    allowlist still honours. Reading the stored ones never creates a state directory or a
    database that is not there yet; a store that cannot be read counts as holding none (and
    is logged)."""
    holders = {g.principal for g in config.grants}
    holders |= _stored_holders(config)
    return lambda principal: principal in holders


def _stored_holders(config: Config) -> set[str]:
    if not config.setup.allow:
        return set()  # grants follow the current allowlist: with none, none is honoured
    if config.database is None and not (config.state_dir / DB_FILES["setup"]).exists():
        return set()
    from fsnotes.setup.store import SetupStoreBusy, open_setup_store
    from fsnotes.state.shared import SharedState, StateUnavailable
    from sandbox import uri as lexical
    from sandbox.errors import SandboxError

    try:
        shared = SharedState.open(config.state_dir, config.database)
    except StateUnavailable as exc:
        log.warning("cannot read the run-time grants: %s", exc)
        return set()
    try:
        stored = open_setup_store(shared, clock=time.time, audit=None).grants()
    except (SetupStoreBusy, OSError) as exc:
        log.warning("cannot read the run-time grants (%s): %s", shared.where, exc)
        return set()
    finally:
        shared.close()
    holders = set()
    for grant in stored:
        try:
            components = lexical.path_components(grant.path)
        except SandboxError:
            continue
        if config.setup.parent_of(components) is not None:
            holders.add(grant.principal)
    return holders
