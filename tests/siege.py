"""Sockets held open against a real server, as a local attacker holds them.

``Siege`` opens ``silent`` connections that send nothing and ``partial`` ones that send the
start of a request line and stop there. A thread watches them: when the server closes one,
it is opened again at once (``reopen``), so the server never sees fewer than the given number
for longer than a reconnect takes. ``closed`` counts the connections the server closed.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from types import TracebackType

PARTIAL_REQUEST_LINE = b"GET /setup/"
# How often the watcher looks for closed sockets (a reconnect follows at most this late).
WATCH_S = 0.02


class Siege:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        silent: int,
        partial: int,
        reopen: bool = True,
        partial_bytes: bytes = PARTIAL_REQUEST_LINE,
    ) -> None:
        self.address = (host, port)
        self.reopen = reopen
        self.partial_bytes = partial_bytes
        self.closed = 0  # connections the server closed (EOF or reset)
        self.reopened = 0
        self._kinds: dict[socket.socket, bool] = {}  # socket -> sends a partial request line
        self._want = [False] * silent + [True] * partial
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._lock = threading.Lock()

    def _open(self, partial: bool) -> bool:
        try:
            sock = socket.create_connection(self.address, timeout=5)
            if partial:
                sock.sendall(self.partial_bytes)
        except OSError:
            return False  # the server is not accepting this instant: try again next round
        sock.setblocking(False)
        self._kinds[sock] = partial
        return True

    def _watch(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                socks = list(self._kinds)
            readable = select.select(socks, [], [], WATCH_S)[0] if socks else []
            with self._lock:
                for sock in readable:
                    try:
                        gone = sock.recv(4096) == b""  # an answer (a 503, say) is not a close
                    except BlockingIOError:
                        gone = False
                    except OSError:
                        gone = True
                    if not gone:
                        continue
                    partial = self._kinds.pop(sock)
                    sock.close()
                    self.closed += 1
                    if self.reopen:
                        self._want.append(partial)
                if self._want:
                    missing, self._want = self._want, []
                    for partial in missing:
                        if self._open(partial):
                            self.reopened += 1
                        else:
                            self._want.append(partial)
            if not socks:
                time.sleep(WATCH_S)

    @property
    def held(self) -> int:
        with self._lock:
            return len(self._kinds)

    def __enter__(self) -> Siege:
        missing, self._want = self._want, []
        for partial in missing:
            if not self._open(partial):
                self._want.append(partial)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(5)
        with self._lock:
            for sock in self._kinds:
                with contextlib.suppress(OSError):
                    sock.close()
            self._kinds.clear()
