"""Where the Streamable HTTP endpoint listens, which Host and Origin values it answers, and the
``[http]`` table of the configuration file that configures it (:func:`http_settings_from`).

Nothing here imports the HTTP stack: the configuration and ``fsnotes doctor`` read these
settings without the ``http`` extra installed.

DNS rebinding (the spec's "Security" section of both revisions' transports page: servers MUST
validate ``Origin``; a present, invalid one gets 403): a web page on ``evil.example`` whose name
is made to resolve to 127.0.0.1 reaches a loopback port with ``Host: evil.example`` and
``Origin: http://evil.example``. So every request's ``Host`` must be one of
:meth:`HttpSettings.allowed_hosts` (the loopback names with our port, the bound address when it
is a specific one, and what ``[http] allowed_hosts`` adds), and a present ``Origin`` must be one
of those as ``http://`` or ``https://`` origins or in ``[http] allowed_origins``; otherwise 403.
Browsers cannot read our answers anyway (no CORS headers are ever sent), but a POST could still
*act*; this refuses it before anything is parsed. The bearer token is the second line.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from fsnotes.security.oauth_settings import OAuthSettings, oauth_settings_from
from fsnotes.security.tokens import TokenEntry, entry_from

# The endpoint's path (the spec's examples use /mcp; every SDK client takes the whole URL).
ENDPOINT_PATH = "/mcp"
# The address --http PORT binds when no host is given: loopback only (the spec: "When running
# locally, servers SHOULD bind only to localhost").
DEFAULT_HOST = "127.0.0.1"
# Names a local client (and the conformance suite) may use for a loopback address.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


class SettingsError(ValueError):
    """An HTTP setting that cannot be used; the message says which and why."""


def parse_listen(value: str) -> tuple[str, int]:
    """``[HOST:]PORT`` (HOST a numeric IPv4 address, or IPv6 in brackets) -> (host, port)."""
    text = value.strip()
    host = DEFAULT_HOST
    port_text = text
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or text[end + 1 : end + 2] != ":":
            raise SettingsError(f"--http {value!r}: write an IPv6 address as [ADDR]:PORT")
        host, port_text = text[1:end], text[end + 2 :]
    elif ":" in text:
        host, port_text = text.rsplit(":", 1)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise SettingsError(
            f"--http {value!r}: the host must be a numeric IP address such as 127.0.0.1 "
            "(names are not resolved: the address bound is the address exposed)"
        ) from None
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise SettingsError(f"--http {value!r}: the port must be a number from 0 to 65535")
    return host, int(port_text)


def _host_literal(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class HttpSettings:
    """The HTTP endpoint's settings: ``--http``, ``--http-expose`` and the ``[http]`` table."""

    host: str = DEFAULT_HOST
    port: int = 0
    expose: bool = False  # --http-expose: binding a non-loopback address was asked for
    extra_hosts: tuple[str, ...] = ()  # [http] allowed_hosts (Host values, port optional)
    extra_origins: tuple[str, ...] = ()  # [http] allowed_origins (scheme://host[:port])
    tokens: tuple[TokenEntry, ...] = field(default=(), repr=False)  # [[http.token]]
    oauth: OAuthSettings | None = None  # [http.oauth]: OAuth access tokens too

    @property
    def loopback(self) -> bool:
        """Is the bound address a loopback one (reachable from this machine only)?"""
        return ipaddress.ip_address(self.host).is_loopback

    @property
    def wildcard(self) -> bool:
        """Is it 0.0.0.0 or ::, every interface of the machine (or of the container)?"""
        return ipaddress.ip_address(self.host).is_unspecified

    def check(self) -> None:
        """Refuse a non-loopback bind without ``expose`` (it would reach the network)."""
        if not self.loopback and not self.expose:
            raise SettingsError(
                f"--http {_host_literal(self.host)}:{self.port} is not a loopback address: "
                "it would expose the notes to every host that can reach it. Pass "
                "--http-expose to mean it (every request still needs a bearer token)"
            )

    def allowed_hosts(self, port: int) -> frozenset[str]:
        """The Host header values answered when listening on ``port`` (the bound one, which
        differs from :attr:`port` when that is 0). Compared lower-cased."""
        names = set(LOOPBACK_NAMES)
        if not self.loopback and not self.wildcard:
            names.add(_host_literal(self.host))
        out = {f"{name}:{port}" for name in names}
        if port == 80:  # a client omits the default port from Host (RFC 9110, 7.2)
            out |= names
        for extra in self.extra_hosts:
            out.add(extra.lower() if ":" in extra.rsplit("]", 1)[-1] else f"{extra}:{port}")
        return frozenset(h.lower() for h in out)

    def allowed_origins(self, port: int) -> frozenset[str]:
        """The Origin values a request may carry: each allowed host as an http(s) origin, and
        the configured ones. Compared lower-cased; ``null`` is never allowed."""
        out = set()
        for host in self.allowed_hosts(port):
            out.add(f"http://{host}")
            out.add(f"https://{host}")
        out |= {o.rstrip("/").lower() for o in self.extra_origins}
        return frozenset(out)

    def url(self, port: int) -> str:
        """The endpoint's URL on the bound address (``port``: the one bound, when 0 was asked)."""
        return f"http://{_host_literal(self.host)}:{port}{ENDPOINT_PATH}"

    def describe(self, port: int) -> str:
        """What the endpoint exposes, in one sentence (for the log and ``fsnotes doctor``)."""
        where = self.url(port)
        if self.loopback:
            reach = "this machine only (loopback)"
        elif self.wildcard:
            reach = "every network interface of this machine (or container)"
        else:
            reach = f"every host that can reach {self.host}"
        auth = "bearer token (static or OAuth)" if self.oauth is not None else "bearer token"
        return f"{where}, reachable from {reach}, {auth} required on every request"


# --- the [http] table of the configuration file -----------------------------------------------

HTTP_KEYS = {"allowed_hosts", "allowed_origins", "token", "oauth"}


def _string_list(table: dict[str, Any], key: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise SettingsError(f"[http] {key} must be a list of non-empty strings")
    return tuple(v.strip() for v in value)


def config_tokens(table: Any) -> tuple[TokenEntry, ...]:
    """The ``[[http.token]]`` entries of an ``[http]`` table already checked to be a table."""
    raw_tokens = table.get("token", [])
    if not isinstance(raw_tokens, list):
        raise SettingsError("[[http.token]] must be an array of tables")
    tokens: list[TokenEntry] = []
    for i, raw in enumerate(raw_tokens):
        try:
            tokens.append(entry_from(raw, f"[[http.token]] #{i + 1}"))
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
    return tuple(tokens)


def http_settings_from(table: Any, listen: str | None, expose: bool) -> HttpSettings | None:
    """The HTTP endpoint's settings from the configuration file's ``[http]`` table and where
    to listen (``--http``/``FSNOTES_HTTP``), checked; ``None`` when ``listen`` is (the table
    alone configures the endpoint, it does not turn it on). :class:`SettingsError` or
    :class:`~fsnotes.security.oauth_settings.OAuthConfigError` says what is wrong."""
    if not isinstance(table, dict):
        raise SettingsError("[http] must be a table")
    unknown = set(table) - HTTP_KEYS
    if unknown:
        raise SettingsError(f"unknown keys in [http]: {', '.join(sorted(unknown))}")
    tokens = config_tokens(table)
    hosts = _string_list(table, "allowed_hosts")
    origins = _string_list(table, "allowed_origins")
    oauth = oauth_settings_from(table.get("oauth"))
    if listen is None:
        return None
    host, port = parse_listen(listen)
    settings = HttpSettings(
        host=host,
        port=port,
        expose=expose,
        extra_hosts=hosts,
        extra_origins=origins,
        tokens=tokens,
        oauth=oauth,
    )
    settings.check()
    return settings
