"""``notes_setup``: a person grants a folder at run time, on a loopback page or at a terminal.

The flow behind the tool, the setup store (requests, form tokens, wrong-code budgets), the
setup code, the allowlist and the page's address, the run-time scope the grants widen, the
page itself (routes, guards, rendering) and its server, and ``fsnotes grant``.

``__all__`` is what other packages use (``code`` as a whole module). Each is imported on
first use (PEP 562, as ``concurrent.futures`` does): the page and its runner need the
optional HTTP stack and are imported only when a page runs, and importing the store (as
child processes do) does not import the flow, the notes and the protocol core with it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import code
    from .admin import run_grant
    from .flow import SetupFlow, build_setup_tool
    from .page import PageFacts, build_page_app, default_facts
    from .policy import DEFAULT_SETUP_PORT, PageUnavailable, SetupPolicy
    from .runner import PageRunner
    from .runtime import NotGrantable, RuntimeScope
    from .store import Setup, SetupStore, SetupStoreBusy

__all__ = [
    "DEFAULT_SETUP_PORT",
    "NotGrantable",
    "PageFacts",
    "PageRunner",
    "PageUnavailable",
    "RuntimeScope",
    "Setup",
    "SetupFlow",
    "SetupPolicy",
    "SetupStore",
    "SetupStoreBusy",
    "build_page_app",
    "build_setup_tool",
    "code",
    "default_facts",
    "run_grant",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "DEFAULT_SETUP_PORT": "policy",
    "NotGrantable": "runtime",
    "PageFacts": "page",
    "PageRunner": "runner",
    "PageUnavailable": "policy",
    "RuntimeScope": "runtime",
    "Setup": "store",
    "SetupFlow": "flow",
    "SetupPolicy": "policy",
    "SetupStore": "store",
    "SetupStoreBusy": "store",
    "build_page_app": "page",
    "build_setup_tool": "flow",
    "code": "code",
    "default_facts": "page",
    "run_grant": "admin",
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
