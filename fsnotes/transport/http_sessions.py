"""2025-11-25 sessions over Streamable HTTP: one :class:`HttpSession` per ``Mcp-Session-Id``.

A session is what ``initialize`` opened (2025-11-25 transports, "Session Management"): its
:class:`~fsnotes.runtime.connection.ServerConnection` (which holds the protocol's
:class:`~fsnotes.protocol.session.Session` and the runner of its requests: those in flight,
their cancel scopes, and our requests to the client waiting for an answer), and the messages
for its GET stream. The 2026-07-28 era has no session at all.

:class:`SessionTable` bounds them: at most :data:`MAX_SESSIONS` live at once and
:data:`MAX_SESSIONS_PER_PRINCIPAL` per principal (a principal at its bound that opens another
loses its least recently used idle one), and a session idle for :data:`SESSION_IDLE_S` (no
request, no open GET stream) is ended. Every end is logged with its reason; a request naming
an ended session gets 404, after which the client opens a new one (the spec's rule). A session
is bound to the principal whose token opened it: another principal's request naming its id is
answered as if the id did not exist.
"""

from __future__ import annotations

import logging
import secrets
from collections import deque

import anyio

from fsnotes.runtime.connection import ServerConnection
from fsnotes.security.tokens import Identity

_log = logging.getLogger("fsnotes.transport")

# Most live sessions. Each holds a few KiB of state (what initialize declared, the roots it
# reported, its messages for the GET stream: at most STREAM_BACKLOG_BYTES); its requests and
# their answers are charged to the server's in-flight and answer budgets, shared by every
# session and stateless request. A desktop host opens one session per configured server, so
# 32 serve a team of hosts behind one process.
MAX_SESSIONS = 32
# Most live sessions of one principal: one token holder cannot take every slot.
MAX_SESSIONS_PER_PRINCIPAL = 8
# A session with no request and no open GET stream for this long is ended. A connected host
# keeps its GET stream open (a session with one is never idle); an hour without either is a
# host that went away without DELETE (a crash, a laptop put to sleep).
SESSION_IDLE_S = 3600.0
# How often idle sessions are looked for.
SESSION_SWEEP_S = 60.0
# Messages meant for the GET stream while none is open (a roots/list sent right after
# notifications/initialized, before the client's GET arrives) are kept up to this many bytes;
# older ones are dropped past it (a request among them then times out).
STREAM_BACKLOG_BYTES = 1024 * 1024
# Session ids: 32 random bytes, base64url (43 visible ASCII characters, as the spec requires:
# "globally unique and cryptographically secure").
SESSION_ID_BYTES = 32


class SessionsFull(Exception):
    """No session can be opened now; the message says why (for a 503 answer)."""


class HttpSession:
    """One legacy session. See the module docstring."""

    def __init__(self, session_id: str, identity: Identity, conn: ServerConnection, now: float):
        self.id = session_id
        self.identity = identity  # who opened it: its principal and its token's ceiling
        self.conn = conn
        self.last_active = now
        self.busy = 0  # POSTs being answered and GET streams open
        self.streaming = False  # a GET stream is open
        self.ended = False
        self._outbox: deque[bytes] = deque()
        self._outbox_bytes = 0
        self._outbox_changed = anyio.Event()

    @property
    def principal(self) -> str:
        return self.identity.principal

    @property
    def version(self) -> str | None:
        return self.conn.legacy_version

    # --- the GET stream --------------------------------------------------------------------

    def to_stream(self, line: bytes) -> None:
        """Queue ``line`` (one encoded message) for the GET stream (2025-11-25: messages not
        tied to a request, or whose request's own stream has closed, go there)."""
        if self.ended:
            return
        self._outbox.append(line)
        self._outbox_bytes += len(line)
        while self._outbox_bytes > STREAM_BACKLOG_BYTES and len(self._outbox) > 1:
            dropped = self._outbox.popleft()
            self._outbox_bytes -= len(dropped)
            _log.warning("session GET stream backlog full: dropped a %d-byte message", len(dropped))
        changed, self._outbox_changed = self._outbox_changed, anyio.Event()
        changed.set()

    async def next_for_stream(self, timeout: float) -> bytes | None:
        """The next message for the GET stream, waiting at most ``timeout``; ``None`` when
        nothing came (or the session ended)."""
        if not self._outbox and not self.ended:
            changed = self._outbox_changed
            with anyio.move_on_after(timeout):
                await changed.wait()
        if self._outbox:
            line = self._outbox.popleft()
            self._outbox_bytes -= len(line)
            return line
        return None

    # --- the end ---------------------------------------------------------------------------

    def end(self) -> None:
        """End the session: no request of it runs on, none of our requests waits, its GET
        stream closes. Idempotent."""
        if self.ended:
            return
        self.ended = True
        self.conn.runner.cancel_all()
        self._outbox.clear()
        self._outbox_bytes = 0
        self._outbox_changed.set()


class SessionTable:
    """The live sessions, bounded (see the module docstring)."""

    def __init__(
        self,
        *,
        max_sessions: int = MAX_SESSIONS,
        max_per_principal: int = MAX_SESSIONS_PER_PRINCIPAL,
        idle_s: float = SESSION_IDLE_S,
    ) -> None:
        self.max_sessions = max_sessions
        self.max_per_principal = max_per_principal
        self.idle_s = idle_s
        self._live: dict[str, HttpSession] = {}

    def __len__(self) -> int:
        return len(self._live)

    @staticmethod
    def new_id() -> str:
        return secrets.token_urlsafe(SESSION_ID_BYTES)

    def get(self, session_id: str, identity: Identity) -> HttpSession | None:
        """The live session ``session_id`` of ``identity``; ``None`` for an unknown or ended
        id, and for another principal's (whose id is not this caller's to use)."""
        session = self._live.get(session_id)
        # Bound to the principal and to its ceiling (an OAuth token's scopes): a token with
        # other scopes cannot act in a session another token opened.
        if (
            session is None
            or session.ended
            or session.identity.principal != identity.principal
            or session.identity.ceiling != identity.ceiling
        ):
            return None
        return session

    def make_room(self, principal: str) -> None:
        """Make room for one more session of ``principal``, or raise :class:`SessionsFull`."""
        own = [s for s in self._live.values() if s.principal == principal]
        if len(own) >= self.max_per_principal:
            idle = [s for s in own if not s.busy]
            if not idle:
                raise SessionsFull(
                    f"this principal has {len(own)} sessions open, each with a request or GET "
                    f"stream running (at most {self.max_per_principal}); end one with DELETE"
                )
            oldest = min(idle, key=lambda s: s.last_active)
            self.remove(
                oldest.id,
                f"its principal opened session {self.max_per_principal + 1}, and it was the "
                "least recently used",
            )
        if len(self._live) >= self.max_sessions:
            raise SessionsFull(
                f"{len(self._live)} sessions are open (at most {self.max_sessions}); retry "
                "later, or end an unused one with DELETE"
            )

    def add(self, session: HttpSession) -> None:
        self._live[session.id] = session

    def remove(self, session_id: str, reason: str) -> None:
        session = self._live.pop(session_id, None)
        if session is not None:
            session.end()
            _log.info("ended an HTTP session of %r: %s", session.principal, reason)

    def expire(self, now: float) -> None:
        """End the sessions idle for longer than the idle limit."""
        for session in list(self._live.values()):
            if not session.busy and now - session.last_active > self.idle_s:
                self.remove(session.id, f"idle for more than {self.idle_s:g} s")

    def end_all(self, reason: str) -> None:
        for session_id in list(self._live):
            self.remove(session_id, reason)
