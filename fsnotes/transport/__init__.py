"""Transports: the only code that does client I/O (stdio and Streamable HTTP), around the
sans-IO core.

``__all__`` is what other packages use. It is imported on first use (PEP 562, as
``concurrent.futures`` does), as the server already imports the transport only once it
serves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsnotes._exports import lazy_exports

if TYPE_CHECKING:
    from fsnotes.transport.http_guard import QuietServer, guarded_server
    from fsnotes.transport.http_server import HttpUnavailable, bind, run_http
    from fsnotes.transport.http_settings import (
        LOOPBACK_NAMES,
        HttpSettings,
        SettingsError,
        config_tokens,
        http_settings_from,
    )
    from fsnotes.transport.listen import ListenRefused, listen_socket
    from fsnotes.transport.stdio import run_stdio

__all__ = [
    "LOOPBACK_NAMES",
    "HttpSettings",
    "HttpUnavailable",
    "ListenRefused",
    "QuietServer",
    "SettingsError",
    "bind",
    "config_tokens",
    "guarded_server",
    "http_settings_from",
    "listen_socket",
    "run_http",
    "run_stdio",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "HttpSettings": "http_settings",
    "HttpUnavailable": "http_server",
    "LOOPBACK_NAMES": "http_settings",
    "ListenRefused": "listen",
    "QuietServer": "http_guard",
    "SettingsError": "http_settings",
    "bind": "http_server",
    "guarded_server": "http_guard",
    "listen_socket": "listen",
    "config_tokens": "http_settings",
    "http_settings_from": "http_settings",
    "run_http": "http_server",
    "run_stdio": "stdio",
}

__getattr__ = lazy_exports(__name__, _HOME)
