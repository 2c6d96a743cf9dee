"""A legacy (2025-11-25) session: what one client's ``initialize`` negotiated and what it has
told the server since.

One per stdio process (the :class:`~fsnotes.runtime.connection.ServerConnection` owns it);
over Streamable HTTP one per ``Mcp-Session-Id``. The 2026-07-28 era has no session:
its requests carry everything in ``_meta`` and are served with ``session=None``. A session holds
no I/O and no process: the channel a request arrives on is passed beside it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fsnotes.protocol.registry import JSONObject

# Legacy logging/setLevel default: before any setLevel the server chooses (2025-11-25 logging).
DEFAULT_LEGACY_LOG_LEVEL = "warning"


@dataclass
class Session:
    """The legacy-era state of one client. See the module docstring."""

    version: str
    capabilities: JSONObject
    client_info: JSONObject | None
    log_level: str = DEFAULT_LEGACY_LOG_LEVEL
    initialized: bool = False
    # The roots the client last reported (roots/list), as it sent them: hints only (see
    # RequestContext.roots). Empty until it reports any.
    roots: tuple[JSONObject, ...] = ()
    # Legacy elicitation/complete senders by elicitation id, one per id so callers can
    # de-duplicate. Bounded in practice by the handlers that ask (the setup flow: a few
    # pending setups per principal).
    completion_notifiers: dict[str, Callable[[], Awaitable[None]]] = field(default_factory=dict)
    # resources/subscribe: the updated-sender handed to the app, by URI (at most
    # limits.MAX_SUBSCRIPTIONS_PER_SESSION).
    subscriptions: dict[str, Callable[[], Awaitable[None]]] = field(default_factory=dict)
    # roots/list scheduling: a fetch is running; another was asked for meanwhile.
    roots_running: bool = False
    roots_again: bool = False

    def record_roots(self, roots: list[JSONObject]) -> None:
        """Keep ``roots`` (the objects of a roots/list answer) as the session's latest."""
        self.roots = tuple(roots)

    def want_roots(self) -> bool:
        """A notification asked for the roots: should a fetch start now? If one is running, it
        asks once more when it is done instead (so at most one runs per session)."""
        if self.roots_running:
            self.roots_again = True
            return False
        self.roots_running = True
        return True
