"""``notes_setup``: a person grants a folder at run time, on a loopback page or at a terminal.

One entry point, :func:`~fsnotes.setup.part.build_setup` (``part``), which the server calls
once: it returns the part's tool, its lifespan (the page) and the authorization table with
the run-time layer. Behind it: the flow behind the tool, the setup store (requests, form
tokens, wrong-code budgets), the setup code, the allowlist and the page's address, the
run-time scope the grants widen (the grant source), the page itself (routes, guards,
rendering) and its server. ``fsnotes grant`` is the command line's (``fsnotes/app/cli_grant.py``),
over the store and the scope. Nothing here imports the configuration, the server or the
command line: what setup needs arrives as arguments.

``__all__`` is what other packages use (``code`` as a whole module). Each is imported on
first use (PEP 562, as ``concurrent.futures`` does): the page and its runner need the
optional HTTP stack and are imported only when a page runs, and importing the store (as
child processes do) does not import the flow, the notes and the protocol core with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsnotes._exports import lazy_exports

if TYPE_CHECKING:
    from fsnotes.setup import code
    from fsnotes.setup.part import SetupError, SetupPart, build_setup
    from fsnotes.setup.policy import DEFAULT_SETUP_PORT, PageUnavailable, SetupPolicy
    from fsnotes.setup.runtime import NotGrantable, RuntimeScope
    from fsnotes.setup.store import SetupStore, SetupStoreBusy, open_setup_store

__all__ = [
    "DEFAULT_SETUP_PORT",
    "NotGrantable",
    "PageUnavailable",
    "RuntimeScope",
    "SetupError",
    "SetupPart",
    "SetupPolicy",
    "SetupStore",
    "SetupStoreBusy",
    "build_setup",
    "code",
    "open_setup_store",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "DEFAULT_SETUP_PORT": "policy",
    "NotGrantable": "runtime",
    "PageUnavailable": "policy",
    "RuntimeScope": "runtime",
    "SetupError": "part",
    "SetupPart": "part",
    "SetupPolicy": "policy",
    "SetupStore": "store",
    "SetupStoreBusy": "store",
    "build_setup": "part",
    "code": "code",
    "open_setup_store": "store",
}

__getattr__ = lazy_exports(__name__, _HOME)
