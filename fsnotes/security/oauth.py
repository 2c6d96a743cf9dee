"""OAuth 2.1 access tokens for the HTTP transport: a resource server, as the MCP authorization
spec (2025-11-25, "Authorization") describes it.

An access token is a JWT signed by the configured issuer (``[http.oauth] issuer``). It is
accepted only when, all of:

- its header's ``alg`` is in :data:`ALLOWED_ALGORITHMS` (asymmetric only: never ``none``, never
  an HS* algorithm, which would let anyone holding the public key sign);
- its ``kid`` names a key of the issuer's JWKS (or, with no ``kid``, the JWKS has one key), and
  the signature verifies with it (PyJWT does the parsing and verification; nothing here parses
  a JWT by hand);
- ``iss`` is the issuer, ``aud`` names this resource (``[http.oauth] audience``, the resource's
  URL: RFC 8707; the spec: servers MUST reject tokens not issued for them), ``exp`` is present
  and not past, and ``nbf``, when present, not ahead, each with :data:`CLOCK_LEEWAY_S`;
- its principal claim (``sub``, or ``[http.oauth] principal_claim``) is a usable principal
  name (:func:`~fsnotes.security.tokens.check_principal`);
- its scopes (``scope``, space-separated, RFC 9068; or a ``scp`` list) hold at least one of
  :data:`SCOPE_ACCESS`. Otherwise it is :class:`~fsnotes.security.tokens.InsufficientScope`
  (403).

The principal then acts with its grants, lowered to the highest access its scopes name (the
``ceiling`` of its :class:`~fsnotes.security.tokens.Identity`): ``notes:read`` reads even
where the grant says ``delete``, and no scope adds a workspace. Any other failure is
:class:`~fsnotes.security.tokens.Unauthenticated`, with one message whatever the reason; the
reason is logged at debug level (never the token).

The JWKS comes over HTTPS (plain HTTP only from a loopback address), from ``jwks_uri`` or the
``jwks_uri`` of the issuer's metadata (RFC 8414, then OpenID discovery). It is cached; a token
whose ``kid`` is not in the cache makes one fetch again (so a key the issuer rotated in is
found), at most once every :data:`JWKS_MIN_REFETCH_S` (so tokens with made-up ``kid`` values
cannot make us hammer the issuer), and the cache is refreshed when older than
``[http.oauth] jwks_max_age`` (default 600 s, see
:data:`~fsnotes.security.oauth_settings.DEFAULT_JWKS_MAX_AGE_S`): so a key the issuer removed
stops verifying within that time, at the first token after it, with no restart. A fetch that
fails keeps the keys fetched before (an issuer that cannot be reached then prolongs a
removed key's life until it can). An access token itself cannot be revoked here: it is
valid until its ``exp``, which the issuer keeps short.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import jwt

from fsnotes.security.oauth_settings import SCOPE_ACCESS, OAuthSettings, check_url
from fsnotes.security.tokens import (
    BearerTokens,
    Identity,
    InsufficientScope,
    Unauthenticated,
    bearer_token,
    check_principal,
)

_log = logging.getLogger("fsnotes.security")

# Asymmetric signatures only (RFC 8725 3.1: the verifier chooses the algorithms). HS* would
# let anyone holding the (public) JWKS sign a token; "none" signs nothing.
ALLOWED_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
# Clocks of the issuer and of this host differ a little; 60 s is what most resource-server
# libraries default to (Spring Security, Microsoft.IdentityModel use 60 s to 5 min).
CLOCK_LEEWAY_S = 60
# A token whose kid is unknown fetches the JWKS again, but not more often than this.
JWKS_MIN_REFETCH_S = 5.0
# Fetching the JWKS or the issuer's metadata gives up after this long (a request waits on it).
FETCH_TIMEOUT_S = 10.0
# A JWKS holds a few keys of a few hundred bytes; metadata documents are a few KiB.
MAX_DOCUMENT_BYTES = 256 * 1024
# An access token longer than this is not one (Entra ID tokens, among the largest, stay under
# 4 KiB); refused without parsing.
MAX_JWT_CHARS = 8192


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an error: it could lead to plain HTTP or to a port the jail refuses, and
    the issuer's documents are published at the URLs configured or discovered."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _fetch_json(url: str) -> Any:
    """GET ``url`` as JSON (bounded in size and time); OSError or ValueError on failure."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    opener = urllib.request.build_opener(
        _NoRedirects, urllib.request.HTTPSHandler(context=ssl.create_default_context())
    )
    with opener.open(request, timeout=FETCH_TIMEOUT_S) as answer:
        body = answer.read(MAX_DOCUMENT_BYTES + 1)
    if len(body) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"{url} sent more than {MAX_DOCUMENT_BYTES} bytes")
    return json.loads(body)


def discover_jwks_uri(issuer: str) -> str:
    """The ``jwks_uri`` of the issuer's metadata: RFC 8414's well-known path first, then
    OpenID Connect discovery's. The metadata's ``issuer`` must be the issuer (RFC 8414 3.3)."""
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    base = f"{parts.scheme}://{parts.netloc}"
    candidates = [
        f"{base}/.well-known/oauth-authorization-server{path}",
        f"{base}{path}/.well-known/openid-configuration",
    ]
    problem = "no metadata found"
    for url in candidates:
        try:
            doc = _fetch_json(url)
        except (OSError, ValueError) as exc:
            problem = str(exc)
            continue
        if not isinstance(doc, dict) or doc.get("issuer") != issuer:
            problem = f"{url} is not the metadata of {issuer}"
            continue
        jwks_uri = doc.get("jwks_uri")
        if isinstance(jwks_uri, str):
            check_url(jwks_uri, "the issuer's jwks_uri")
            return jwks_uri
        problem = f"{url} names no jwks_uri"
    raise OSError(f"cannot discover the JWKS of {issuer}: {problem}")


class OAuthTokens:
    """The :class:`~fsnotes.security.tokens.Authenticator` of OAuth access tokens (see the
    module docstring). :meth:`prefetch` before the jail fetches the keys once (a failure is
    logged, and retried at the first token)."""

    def __init__(self, settings: OAuthSettings, *, clock: Any = time.monotonic) -> None:
        settings.check()
        self.settings = settings
        self._clock = clock
        self._jwks_uri = settings.jwks_uri
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at: float | None = None  # when the keys were last fetched (successfully)
        self._tried_at: float | None = None  # when a fetch was last tried
        self._lock = threading.Lock()  # one fetch at a time
        self.fetches = 0  # how many JWKS fetches were made (for tests and doctor)

    def tcp_ports(self) -> list[int]:
        """The TCP ports fetches go to: the settings' and a discovered ``jwks_uri``'s."""
        ports = set(self.settings.tcp_ports())
        if self._jwks_uri is not None:
            parts = urllib.parse.urlsplit(self._jwks_uri)
            ports.add(parts.port or (443 if parts.scheme == "https" else 80))
        return sorted(ports)

    def prefetch(self) -> None:
        """Fetch the JWKS now (at start-up); a failure is logged, not raised."""
        try:
            self._refetch(force=True)
        except (OSError, ValueError) as exc:
            _log.warning("cannot fetch the OAuth issuer's keys yet: %s", exc)

    def _refetch(self, *, force: bool) -> None:
        with self._lock:
            now = self._clock()
            recent = self._tried_at is not None and now - self._tried_at < JWKS_MIN_REFETCH_S
            if recent and not force:
                return
            self._tried_at = now
            if self._jwks_uri is None:
                self._jwks_uri = discover_jwks_uri(self.settings.issuer)
            self.fetches += 1
            doc = _fetch_json(self._jwks_uri)
            try:
                keyset = jwt.PyJWKSet.from_dict(doc)
            except jwt.PyJWKSetError as exc:
                raise ValueError(f"the issuer's JWKS is unusable: {exc}") from None
            keys: dict[str | None, jwt.PyJWK] = {}
            for key in keyset.keys:
                if key.public_key_use in (None, "sig"):
                    keys[key.key_id] = key
            self._keys = keys
            self._fetched_at = now

    def _key_for(self, kid: Any) -> jwt.PyJWK | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid) if isinstance(kid, str) else None

    def _lookup(self, kid: Any) -> jwt.PyJWK | None:
        age = None if self._fetched_at is None else self._clock() - self._fetched_at
        stale = age is None or age > self.settings.jwks_max_age_s
        key = None if stale else self._key_for(kid)
        if key is None:
            try:
                self._refetch(force=False)
            except (OSError, ValueError) as exc:
                _log.warning("cannot fetch the OAuth issuer's keys: %s", exc)
            key = self._key_for(kid)
        return key

    def verify(self, token: str) -> Identity:
        """The principal of a valid ``token`` with its scopes' ceiling (blocking: it may fetch
        the JWKS). Raises Unauthenticated or InsufficientScope."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated() from None
        if header.get("alg") not in ALLOWED_ALGORITHMS:
            _log.debug("refused an access token: algorithm not allowed")
            raise Unauthenticated()
        key = self._lookup(header.get("kid"))
        if key is None:
            _log.debug("refused an access token: unknown key id")
            raise Unauthenticated()
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=list(ALLOWED_ALGORITHMS),
                audience=self.settings.audience,
                issuer=self.settings.issuer,
                leeway=CLOCK_LEEWAY_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            _log.debug("refused an access token: %s", type(exc).__name__)
            raise Unauthenticated() from None
        name = claims.get(self.settings.principal_claim)
        try:
            principal = check_principal(name) if isinstance(name, str) else None
        except ValueError:
            principal = None
        if principal is None:
            _log.debug("refused an access token: no usable %s claim", self.settings.principal_claim)
            raise Unauthenticated()
        levels = [SCOPE_ACCESS[s] for s in _scopes(claims) if s in self.settings.scopes_supported]
        if not levels:
            raise InsufficientScope()
        return Identity(principal, max(levels))

    async def authenticate(self, headers: Mapping[str, str]) -> Identity:
        token = bearer_token(headers.get("authorization"), max_chars=MAX_JWT_CHARS)
        if token is None:
            raise Unauthenticated()
        return await anyio.to_thread.run_sync(self.verify, token)


def _scopes(claims: Mapping[str, Any]) -> Sequence[str]:
    scope = claims.get("scope")
    if isinstance(scope, str):
        return scope.split()
    scp = claims.get("scp")
    if isinstance(scp, list):
        return [s for s in scp if isinstance(s, str)]
    if isinstance(scp, str):
        return scp.split()
    return ()


class Chained:
    """Static bearer tokens first, then OAuth access tokens: a token the static ones know
    acts for its principal (full grants); any other goes to OAuth. A static token is a short
    random string, a JWT is three base64url parts, so the two never collide."""

    def __init__(self, static: BearerTokens | None, oauth: OAuthTokens) -> None:
        self.static = static
        self.oauth = oauth

    def principals(self) -> list[str]:
        """The static tokens' principals (OAuth's are whoever the issuer names)."""
        return self.static.principals() if self.static is not None else []

    async def authenticate(self, headers: Mapping[str, str]) -> Identity:
        if self.static is not None:
            principal = self.static.match(bearer_token(headers.get("authorization")))
            if principal is not None:
                return Identity(principal)
        return await self.oauth.authenticate(headers)
