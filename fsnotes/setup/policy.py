"""What may be granted at run time, and where the setup page listens.

The allowlist bounds everything the setup page and ``fsnotes grant`` can do: a folder can be
granted only when it lies strictly below one of the configured parent directories, at an
access level no higher than ``max_access``. The same parents (and nothing else) are added to
the Landlock rules, writable only when ``max_access`` allows writing, so layer 3 enforces the
bound as well. With no allowlist, nothing can be granted at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsnotes.security.grants import Access
from sandbox import uri as lexical
from sandbox.errors import SandboxError

# The setup page's default TCP port: fixed (not ephemeral) because Landlock can allow binding
# only named ports, and because a container must publish the port it will use.
DEFAULT_SETUP_PORT = 8765
# How long a person has to act on a setup, from the moment the model asks.
SETUP_LIFETIME_S = 600.0
# The page is served on the loopback address only; the URL, Host and Origin always use it.
PAGE_HOST = "127.0.0.1"


@dataclass(frozen=True)
class SetupPolicy:
    allow: tuple[str, ...] = ()  # absolute, normalised parent directories
    max_access: Access = Access.DELETE
    port: int = DEFAULT_SETUP_PORT
    # Where the listening socket binds. 127.0.0.1 on a host; 0.0.0.0 inside a container
    # (whose port is published to the host's loopback only). The page still insists on
    # Host 127.0.0.1:port, which is what the person's browser sends.
    bind: str = PAGE_HOST
    always_on: bool = False  # --setup-port given: serve the page from start-up to exit
    lifetime: float = SETUP_LIFETIME_S

    @property
    def enabled(self) -> bool:
        return bool(self.allow)

    @property
    def origin(self) -> str:
        return f"http://{PAGE_HOST}:{self.port}"

    @property
    def host_header(self) -> str:
        return f"{PAGE_HOST}:{self.port}"

    def page_url(self, setup_id: str) -> str:
        return f"{self.origin}/setup/{setup_id}"

    def parent_of(self, components: tuple[str, ...]) -> tuple[int, tuple[str, ...]] | None:
        """(index of the allowlisted parent, the folder relative to it) when ``components``
        is strictly below one; the innermost parent wins. ``None`` otherwise."""
        best: tuple[int, tuple[str, ...]] | None = None
        for i, parent in enumerate(self.allow):
            base = lexical.path_components(parent)
            try:
                rel = lexical.contain(base, components)
            except SandboxError:
                continue
            if rel and (best is None or len(rel) < len(best[1])):
                best = (i, rel)
        return best


class PageUnavailable(Exception):
    """The setup page cannot listen (port taken, bind refused); the message says why."""
