"""Transports: the only code that does client I/O (stdio and Streamable HTTP), around the
sans-IO core.

``__all__`` is what other packages use. It is imported on first use (PEP 562, as
``concurrent.futures`` does), as the server already imports the transport only once it
serves.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .http_server import HttpUnavailable, bind, run_http
    from .http_settings import LOOPBACK_NAMES, HttpSettings, SettingsError, parse_listen
    from .stdio import run_stdio

__all__ = [
    "LOOPBACK_NAMES",
    "HttpSettings",
    "HttpUnavailable",
    "SettingsError",
    "bind",
    "parse_listen",
    "run_http",
    "run_stdio",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "LOOPBACK_NAMES": "http_settings",
    "HttpSettings": "http_settings",
    "HttpUnavailable": "http_server",
    "SettingsError": "http_settings",
    "bind": "http_server",
    "parse_listen": "http_settings",
    "run_http": "http_server",
    "run_stdio": "stdio",
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
