"""Bearer tokens for the HTTP transport: who a request acts for.

Every HTTP request carries ``Authorization: Bearer <token>``, also on loopback (any local
process, and any web page through the browser, can reach a loopback port). A token maps to one
principal, whose grants then apply exactly as for stdio. Tokens are kept only as SHA-256
digests, in two places:

- the TOML configuration, ``[[http.token]]`` with ``principal`` and ``sha256`` (for operators
  who manage configuration files);
- ``<state dir>/http-tokens.json`` (0600, through :mod:`fsnotes.state.statedir`), where
  ``fsnotes token add --principal NAME`` puts the digest of the token it prints once.

A running server sees a token added to or removed from either at its next request: each
file's identity is checked at every request, and the file read again only when it changed
(the configuration's side is :mod:`fsnotes.app.config_tokens`). No restart revokes a token.

Why a plain SHA-256 is enough: a token is 32 random bytes from :mod:`secrets` (256 bits). Slow,
salted password hashes exist because passwords are guessable; a 256-bit random value is not,
so finding a token from its digest means a 2^256 preimage search, and precomputed tables
cannot help either. The digest only has to make a leaked configuration or state file useless
for logging in, which it does.

Comparison is constant-time (:func:`hmac.compare_digest` on the digests, over every entry
without stopping at a match), so timing tells nothing about how close a guess was. Tokens are
never logged, and a refusal says nothing about why (:class:`Unauthenticated` has one message).

:class:`Authenticator` is the interface the transport asks; :mod:`fsnotes.security.oauth`
implements it with OAuth access tokens, beside these.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from fsnotes.security.grants import Access
from fsnotes.state import statedir

_log = logging.getLogger("fsnotes.security")

TOKENS_FILE = "http-tokens.json"
TOKENS_LOCK = "http-tokens.lock"
# A token is this prefix and 32 random bytes, base64url (43 characters): the prefix makes a
# leaked token easy to recognise in logs and secret scanners.
TOKEN_PREFIX = "fsn_"
TOKEN_BYTES = 32  # 256 bits, see the module docstring
# A longer Authorization value is not one of our tokens; refused without hashing it.
MAX_TOKEN_CHARS = 256
# The tokens file holds a few hundred bytes per token; these bound what a start reads.
MAX_TOKENS = 4096
MAX_FILE_BYTES = 1024 * 1024
# How long `fsnotes token add` waits for another one writing the file at the same moment.
LOCK_TIMEOUT_S = 10.0
# A principal is a name in grants and logs: printable, no spaces at either end, bounded.
MAX_PRINCIPAL_CHARS = 128
_DIGEST_RE = re.compile(r"[0-9a-f]{64}")
# RFC 6750 section 2.1: "Bearer" 1*SP b68token (the scheme is case-insensitive, RFC 9110 11.1).
_BEARER_RE = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +([A-Za-z0-9\-._~+/]+=*) *")


class Unauthenticated(Exception):
    """No usable credentials: answered 401 with ``WWW-Authenticate: Bearer`` and nothing
    else, whatever the reason (missing, malformed, unknown, revoked)."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


class InsufficientScope(Exception):
    """Valid credentials whose scopes allow nothing here: answered 403 with
    ``WWW-Authenticate: Bearer error="insufficient_scope"`` (RFC 6750 3.1)."""

    def __init__(self) -> None:
        super().__init__("Forbidden: insufficient scope")


class TokenFileError(Exception):
    """The tokens file cannot be used; the message says why (it names no token)."""


@dataclass(frozen=True)
class Identity:
    """Who a request acts for, and the most its credentials allow.

    ``principal`` is the plain name grants are given to. ``ceiling`` is a limit the
    credentials set on top of the grants (an OAuth access token's scopes, see
    :mod:`fsnotes.security.oauth`), or ``None`` for credentials that set none (a static
    bearer token). Two identities are equal only when both are: an HTTP session opened by
    one is not used by a token of the same subject with other scopes.
    """

    principal: str
    ceiling: Access | None = None

    @property
    def ceiling_label(self) -> Literal["read", "write", "delete"] | None:
        """The ceiling by its level's name (how the protocol's request context carries it)."""
        return None if self.ceiling is None else self.ceiling.label


class Authenticator(Protocol):
    """Who an HTTP request acts for, from its headers (names lower-cased, each at most once:
    the transport refuses a request that repeats ``Authorization``)."""

    async def authenticate(self, headers: Mapping[str, str]) -> Identity:
        """Who the request acts for; raises :class:`Unauthenticated` otherwise."""
        ...


@dataclass(frozen=True)
class TokenEntry:
    """One accepted token, known by its SHA-256 digest, and the principal it acts for."""

    principal: str
    digest: bytes
    created: str | None = None

    @property
    def id(self) -> str:
        """A short public name for the entry (the digest's first 12 hex digits): what
        ``fsnotes token list`` shows and ``revoke --id`` takes. It reveals nothing usable."""
        return self.digest.hex()[:12]


def new_token() -> str:
    """A fresh token: :data:`TOKEN_PREFIX` and :data:`TOKEN_BYTES` random bytes."""
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def digest_of(token: str) -> bytes:
    """The SHA-256 digest a token is stored and compared as."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def check_principal(name: str) -> str:
    """``name`` if it can be a principal, else ValueError saying why."""
    if not name or name != name.strip():
        raise ValueError("a principal name must be non-empty, without spaces at either end")
    if len(name) > MAX_PRINCIPAL_CHARS:
        raise ValueError(f"a principal name has at most {MAX_PRINCIPAL_CHARS} characters")
    if not name.isprintable():
        raise ValueError("a principal name may not hold control or invisible characters")
    return name


def entry_from(raw: Any, where: str) -> TokenEntry:
    """A :class:`TokenEntry` from its stored form ``{principal, sha256, created?}``."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a table with principal and sha256")
    principal, digest = raw.get("principal"), raw.get("sha256")
    if not isinstance(principal, str) or not isinstance(digest, str):
        raise ValueError(f"{where} needs principal and sha256 strings")
    if not _DIGEST_RE.fullmatch(digest):
        raise ValueError(f"{where}: sha256 must be 64 lower-case hex digits")
    created = raw.get("created")
    try:
        check_principal(principal)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return TokenEntry(
        principal, bytes.fromhex(digest), created if isinstance(created, str) else None
    )


def _stored(entry: TokenEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"principal": entry.principal, "sha256": entry.digest.hex()}
    if entry.created is not None:
        out["created"] = entry.created
    return out


def read_tokens(state_dir: Path) -> list[TokenEntry]:
    """The entries of the state directory's tokens file (none when it is missing)."""
    path = state_dir / TOKENS_FILE
    try:
        data, _mode = statedir.read_file(path, max_bytes=MAX_FILE_BYTES)
    except FileNotFoundError:
        return []
    except (OSError, statedir.StateFileError) as exc:
        raise TokenFileError(f"cannot read {TOKENS_FILE}: {exc}") from None
    try:
        doc = json.loads(data)
    except ValueError:
        raise TokenFileError(f"{TOKENS_FILE} is not valid JSON") from None
    raw = doc.get("tokens") if isinstance(doc, dict) else None
    if not isinstance(raw, list) or len(raw) > MAX_TOKENS:
        raise TokenFileError(f"{TOKENS_FILE} must hold a list of at most {MAX_TOKENS} tokens")
    try:
        return [entry_from(item, f"{TOKENS_FILE} entry #{i + 1}") for i, item in enumerate(raw)]
    except ValueError as exc:
        raise TokenFileError(str(exc)) from None


def _write_tokens(state_dir: Path, entries: Sequence[TokenEntry]) -> None:
    body = json.dumps({"version": 1, "tokens": [_stored(e) for e in entries]}, indent=1)
    tmp = statedir.write_temp(state_dir, TOKENS_FILE, body.encode() + b"\n")
    statedir.publish(tmp, state_dir / TOKENS_FILE, replace=True)


def _locked(state_dir: Path) -> Any:
    return statedir.exclusive(
        state_dir / TOKENS_LOCK,
        timeout=LOCK_TIMEOUT_S,
        held_by_other="another fsnotes is changing the tokens file",
    )


def add_token(state_dir: Path, principal: str) -> tuple[str, TokenEntry]:
    """Make a token for ``principal``, store its digest in the tokens file, and return the
    token (to be shown once, never stored) with its entry. Raises ValueError for a bad name,
    TokenFileError when the file cannot be used."""
    check_principal(principal)
    token = new_token()
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    entry = TokenEntry(principal, digest_of(token), created)
    try:
        with _locked(state_dir):
            entries = read_tokens(state_dir)
            if len(entries) >= MAX_TOKENS:
                raise TokenFileError(f"{TOKENS_FILE} already holds {MAX_TOKENS} tokens")
            _write_tokens(state_dir, [*entries, entry])
    except (OSError, statedir.StateFileError, statedir.SetupLockTimeout) as exc:
        raise TokenFileError(f"cannot write {TOKENS_FILE}: {exc}") from None
    return token, entry


def revoke_tokens(
    state_dir: Path, *, principal: str | None = None, token_id: str | None = None
) -> int:
    """Remove the tokens file's entries of ``principal`` or with the id ``token_id`` (a
    prefix of at least 8 hex digits of the digest); return how many were removed."""
    if token_id is not None and (len(token_id) < 8 or not re.fullmatch(r"[0-9a-f]+", token_id)):
        raise ValueError("a token id is at least 8 hex digits (see `fsnotes token list`)")
    try:
        with _locked(state_dir):
            entries = read_tokens(state_dir)
            kept = [
                e
                for e in entries
                if not (
                    (principal is not None and e.principal == principal)
                    or (token_id is not None and e.digest.hex().startswith(token_id))
                )
            ]
            if len(kept) != len(entries):
                _write_tokens(state_dir, kept)
    except (OSError, statedir.StateFileError, statedir.SetupLockTimeout) as exc:
        raise TokenFileError(f"cannot write {TOKENS_FILE}: {exc}") from None
    return len(entries) - len(kept)


def _fixed(entries: tuple[TokenEntry, ...]) -> Callable[[], tuple[TokenEntry, ...]]:
    return lambda: entries


def bearer_token(authorization: str | None, *, max_chars: int = MAX_TOKEN_CHARS) -> str | None:
    """The token of an ``Authorization: Bearer`` value, or ``None`` if it is not one (or is
    longer than ``max_chars``)."""
    if authorization is None or len(authorization) > max_chars + 16:
        return None
    match = _BEARER_RE.fullmatch(authorization)
    return match.group(1) if match else None


class BearerTokens:
    """The :class:`Authenticator` of configured tokens and the state directory's tokens file.

    ``configured``: the TOML file's entries, fixed, or a function giving them as of now (a
    :class:`~fsnotes.app.config_tokens.ConfigTokens`, asked at every request). ``state_dir``:
    where the tokens file is, or ``None`` for configured tokens only. A tokens file that
    becomes unusable while serving (damaged by hand) keeps the last good entries, with one
    warning per change: only ``fsnotes token`` writes it, under a lock and by rename, so a
    damaged one is not an edit that meant to revoke.
    """

    def __init__(
        self,
        configured: Sequence[TokenEntry] | Callable[[], Sequence[TokenEntry]],
        state_dir: Path | None,
    ) -> None:
        self._configured = configured if callable(configured) else _fixed(tuple(configured))
        self._state_dir = state_dir
        self._file_version: tuple[int, int, int, int] | None = None
        self._from_file: tuple[TokenEntry, ...] = ()
        self.problem: str | None = None
        self._refresh()

    def _refresh(self) -> None:
        if self._state_dir is None:
            return
        path = self._state_dir / TOKENS_FILE
        version = statedir.version_of(path)
        if version == self._file_version and self._file_version is not None:
            return
        if version is None:
            self._file_version, self._from_file, self.problem = None, (), None
            return
        try:
            self._from_file = tuple(read_tokens(self._state_dir))
            self.problem = None
        except TokenFileError as exc:
            if self.problem != str(exc):
                _log.warning("%s; keeping the tokens read before", exc)
            self.problem = str(exc)
        self._file_version = version

    @property
    def entries(self) -> tuple[TokenEntry, ...]:
        """Every accepted token's entry, as of now (the tokens file checked first)."""
        self._refresh()
        return tuple(self._configured()) + self._from_file

    def principals(self) -> list[str]:
        """The principals some token acts for (for start-up lines and ``fsnotes doctor``)."""
        return sorted({e.principal for e in self.entries})

    def match(self, token: str | None) -> str | None:
        """The principal of ``token``, or ``None``; constant-time over every entry."""
        entries = self.entries
        if token is None or len(token) > MAX_TOKEN_CHARS:
            return None
        digest = digest_of(token)
        found: str | None = None
        for entry in entries:
            if hmac.compare_digest(digest, entry.digest):
                found = entry.principal  # no break: the time does not depend on the position
        return found

    async def authenticate(self, headers: Mapping[str, str]) -> Identity:
        principal = self.match(bearer_token(headers.get("authorization")))
        if principal is None:
            raise Unauthenticated()
        return Identity(principal)
