"""A listening TCP socket, bound by us before uvicorn serves on it.

Both servers of ours (the MCP endpoint and the setup page) bind their socket themselves and
hand it to uvicorn, so a port that is taken or a bind that is refused becomes a sentence the
caller can show instead of uvicorn's ``sys.exit``, and the endpoint can bind before the jail.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

__all__ = ["ListenRefused", "listen_socket"]


class ListenRefused(Exception):
    """The socket cannot listen; ``reason`` says why in words, ``errno`` the OS's code (None
    when the host is not a numeric address)."""

    def __init__(self, reason: str, errno: int | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.errno = errno


def listen_socket(host: str, port: int, *, backlog: int) -> socket.socket:
    """A non-blocking TCP socket listening on the numeric address ``host`` (IPv4 or IPv6)
    and ``port`` (0: one the kernel picks).

    Raises:
        ListenRefused: ``host`` is not a numeric IP address, or the bind was refused.
    """
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        raise ListenRefused(f"{host!r} is not a numeric IP address", None) from None
    # Protocol TCP, not 0: asyncio turns Nagle's algorithm off only on sockets that say TCP
    # (base_events._set_nodelay), and accepted sockets inherit it. With 0, an answer written as
    # head then body waited for the client's delayed ACK: 40 ms a request on Linux.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        # Rebinding right after a restart must not wait for TIME_WAIT connections to clear;
        # this does not let two listeners share the port (that needs SO_REUSEPORT).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise ListenRefused(_reason(exc), exc.errno) from None
    return sock


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "the port is already in use"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "binding was refused (a port below 1024 needs privileges)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return "that address is not on this machine"
    return exc.strerror or str(exc)
