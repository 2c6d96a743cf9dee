"""The ``[http.oauth]`` settings (see :mod:`fsnotes.security.oauth`), readable without the
``oauth`` extra installed: the configuration and ``fsnotes doctor`` use them."""

from __future__ import annotations

import ipaddress
import urllib.parse
from dataclasses import dataclass
from typing import Any

from fsnotes.security.grants import Access

# What the name resolver reads on a later fetch (the jail leaves them readable).
RESOLVER_FILES = ("/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/gai.conf")
# Scopes and the most each allows; a token's ceiling is the highest it holds.
SCOPE_ACCESS = {
    "notes:read": Access.READ,
    "notes:write": Access.WRITE,
    "notes:delete": Access.DELETE,
}


class OAuthConfigError(ValueError):
    """The ``[http.oauth]`` settings cannot be used; the message says which and why."""


def check_url(url: str, what: str) -> urllib.parse.SplitResult:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise OAuthConfigError(f"[http.oauth] {what} must be an https:// URL, not {url!r}")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise OAuthConfigError(
            f"[http.oauth] {what} must be https:// (plain http only on a loopback address)"
        )
    return parts


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _port_of(parts: urllib.parse.SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


# The cached JWKS is fetched again when older than this (seconds): a key the issuer removed
# stops verifying within it. Ten minutes, as the `jose` library's remote key sets; an
# operator who rotates out a leaked key can lower it ([http.oauth] jwks_max_age).
DEFAULT_JWKS_MAX_AGE_S = 600.0
# Not below the refetch floor (a fetch at most every 5 s whatever the tokens say), not above
# a day (a removed key must stop working some day without a restart).
MIN_JWKS_MAX_AGE_S = 5.0
MAX_JWKS_MAX_AGE_S = 86400.0


@dataclass(frozen=True)
class OAuthSettings:
    """The ``[http.oauth]`` table."""

    issuer: str
    audience: str  # this resource's URL, e.g. https://notes.example.com/mcp
    jwks_uri: str | None = None  # default: the issuer's metadata's
    scopes_supported: tuple[str, ...] = tuple(SCOPE_ACCESS)
    principal_claim: str = "sub"
    # How old the cached JWKS may get before a token makes it fetched again: the longest a
    # key removed at the issuer (a leaked signing key) keeps verifying here.
    jwks_max_age_s: float = DEFAULT_JWKS_MAX_AGE_S

    def check(self) -> None:
        """Refuse URLs that cannot be used, and scopes that map to no access level."""
        check_url(self.issuer, "issuer")
        parts = check_url(self.audience, "audience")
        if parts.query or parts.fragment:
            raise OAuthConfigError("[http.oauth] audience must have no query or fragment")
        if self.jwks_uri is not None:
            check_url(self.jwks_uri, "jwks_uri")
        unknown = [s for s in self.scopes_supported if s not in SCOPE_ACCESS]
        if unknown or not self.scopes_supported:
            raise OAuthConfigError(
                f"[http.oauth] scopes_supported: use some of {', '.join(SCOPE_ACCESS)}"
            )
        if not self.principal_claim:
            raise OAuthConfigError("[http.oauth] principal_claim must be a claim's name")
        if not MIN_JWKS_MAX_AGE_S <= self.jwks_max_age_s <= MAX_JWKS_MAX_AGE_S:
            raise OAuthConfigError(
                f"[http.oauth] jwks_max_age is seconds from {MIN_JWKS_MAX_AGE_S:g} to "
                f"{MAX_JWKS_MAX_AGE_S:g}"
            )

    @property
    def metadata_paths(self) -> tuple[str, str]:
        """Where the protected resource metadata is served (RFC 9728 3.1: the well-known path
        with the resource's path appended; clients also try the bare one)."""
        path = urllib.parse.urlsplit(self.audience).path.rstrip("/")
        return "/.well-known/oauth-protected-resource" + path, (
            "/.well-known/oauth-protected-resource"
        )

    @property
    def metadata_url(self) -> str:
        """The metadata's URL, as ``WWW-Authenticate: Bearer resource_metadata=`` names it."""
        parts = urllib.parse.urlsplit(self.audience)
        return f"{parts.scheme}://{parts.netloc}{self.metadata_paths[0]}"

    def metadata(self) -> dict[str, Any]:
        """The protected resource metadata document (RFC 9728 2)."""
        return {
            "resource": self.audience,
            "authorization_servers": [self.issuer],
            "scopes_supported": list(self.scopes_supported),
            "bearer_methods_supported": ["header"],
            "resource_name": "fsnotes",
        }

    def tcp_ports(self) -> list[int]:
        """The TCP ports fetches go to (the jail allows connecting to these)."""
        urls = [self.issuer, *([self.jwks_uri] if self.jwks_uri else [])]
        return sorted({_port_of(urllib.parse.urlsplit(u)) for u in urls})


OAUTH_KEYS = {
    "issuer",
    "audience",
    "jwks_uri",
    "scopes_supported",
    "principal_claim",
    "jwks_max_age",
}


def oauth_settings_from(table: Any) -> OAuthSettings | None:
    """The ``[http.oauth]`` table of the configuration file (see :mod:`fsnotes.security.oauth`)
    as settings, checked; ``None`` without one. :class:`OAuthConfigError` says what is wrong."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise OAuthConfigError("[http.oauth] must be a table")
    unknown = set(table) - OAUTH_KEYS
    if unknown:
        raise OAuthConfigError(f"unknown keys in [http.oauth]: {', '.join(sorted(unknown))}")
    for key in ("issuer", "audience"):
        if not isinstance(table.get(key), str) or not table[key].strip():
            raise OAuthConfigError(f"[http.oauth] needs {key} (a URL)")
    jwks_uri = table.get("jwks_uri")
    claim = table.get("principal_claim", "sub")
    if (jwks_uri is not None and not isinstance(jwks_uri, str)) or not isinstance(claim, str):
        raise OAuthConfigError("[http.oauth] jwks_uri and principal_claim must be strings")
    scopes = table.get("scopes_supported", list(SCOPE_ACCESS))
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise OAuthConfigError("[http.oauth] scopes_supported must be a list of strings")
    max_age = table.get("jwks_max_age", DEFAULT_JWKS_MAX_AGE_S)
    if isinstance(max_age, bool) or not isinstance(max_age, int | float):
        raise OAuthConfigError("[http.oauth] jwks_max_age must be a number of seconds")
    settings = OAuthSettings(
        issuer=table["issuer"].strip(),
        audience=table["audience"].strip(),
        jwks_uri=jwks_uri.strip() if jwks_uri else None,
        scopes_supported=tuple(scopes),
        principal_claim=claim,
        jwks_max_age_s=float(max_age),
    )
    settings.check()
    return settings
