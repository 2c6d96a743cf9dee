"""Sealed request state: HMAC-SHA256 over a JSON payload, with rotating key ids.

The MCP client carries ``requestState`` between the question and the answer of a
multi-round-trip request. The spec calls it attacker-controlled: whatever we read back from
it must be what we wrote, for this principal, for these arguments, and not too old. So the
state is ``v1.<kid>.<payload>.<mac>`` where ``payload`` is base64url JSON and ``mac`` is
HMAC-SHA256 under the key named by ``kid``, over ``v1.<kid>.<payload>``.

Keys live in ``<state dir>/seal-keys.json`` (mode 0600, created on first start). Every key in
the file verifies; the ``active`` one seals. Processes sharing a state directory therefore
verify each other's state, and a key can be rotated without breaking questions in flight.

A running server follows the file (:class:`Sealer` with ``version``): before every seal and
every open it compares the file's identity (one ``lstat``: device, inode, size, change time,
about a microsecond, against a seal's HMAC and JSON of some tens), and reads the file again
when it changed. So after ``fsnotes rotate-key`` and the new file given to an instance
(copied in place or renamed there), its next question is sealed with the new key, and a key
dropped from the file (retired) stops verifying at once; no restart, no signal. A file
that cannot be read meanwhile (a copy half done, a mode too loose) keeps the keys read
before, and is tried again at the next seal or open.
The file is read and written through :mod:`fsnotes.state.statedir` (never through a link,
never a FIFO, a new version given its name atomically).

Sealing gives integrity and authenticity, not secrecy: the payload is readable by the client.
It holds ids, inode numbers and hashes, never note content or host paths.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsnotes.state import statedir

_log = logging.getLogger("fsnotes.security")

STATE_FORMAT = "v1"
KEY_BYTES = 32  # 256-bit HMAC keys: the SHA-256 block-size recommendation of RFC 2104.
KEY_ID_BYTES = 6  # 48-bit random ids: collisions are irrelevant at a handful of keys.
KEYRING_NAME = "seal-keys.json"
# The longest requestState we will even try to verify: a confirmation state is a few hundred
# bytes; anything far larger is junk and is refused before any decoding work.
MAX_STATE_CHARS = 16 * 1024
# The largest keyring file we read: a key takes about 60 bytes, so this is some 16,000
# rotations; anything larger is not a keyring fsnotes wrote.
MAX_KEYRING_BYTES = 1024 * 1024


class StateInvalid(Exception):
    """The state is malformed, tampered with, or sealed by a key we do not have."""


class StateExpired(Exception):
    """The state verified but its expiry has passed."""


class StateUnknownKey(StateInvalid):
    """Well-formed, but sealed by a key id this keyring does not hold (rotated or foreign)."""


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    if not text or any(c not in _B64_ALPHABET for c in text):
        raise StateInvalid("bad encoding")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise StateInvalid("bad encoding") from None


_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@dataclass(frozen=True)
class Keyring:
    active: str
    keys: Mapping[str, bytes]

    @classmethod
    def load_or_create(cls, state_dir: Path) -> Keyring:
        """Read the keyring, creating it (0600, atomically, first writer wins) if absent."""
        path = state_dir / KEYRING_NAME
        try:
            return cls._read(path)
        except FileNotFoundError:
            pass
        kid = _b64e(secrets.token_bytes(KEY_ID_BYTES))
        tmp = cls(active=kid, keys={kid: secrets.token_bytes(KEY_BYTES)})._write_temp(state_dir)
        # Published only if the name is free: if another process created the keyring
        # meanwhile, its keys win and ours are discarded, so all processes agree on one.
        statedir.publish(tmp, path, replace=False)
        return cls._read(path)

    def _write_temp(self, state_dir: Path) -> Path:
        """This keyring in a new 0600 temp file beside the real one, synced to disk."""
        return statedir.write_temp(state_dir, KEYRING_NAME, self._dump().encode("utf-8"))

    @classmethod
    def load(cls, state_dir: Path) -> Keyring:
        """Read the keyring, never creating one (a running server re-reading its file):
        FileNotFoundError, ValueError or OSError when it cannot be used."""
        return cls._read(state_dir / KEYRING_NAME)

    @staticmethod
    def version(state_dir: Path) -> object:
        """What tells one content of the keyring file from the next (see the module)."""
        return statedir.version_of(state_dir / KEYRING_NAME)

    @classmethod
    def _read(cls, path: Path) -> Keyring:
        """The keyring at ``path``: FileNotFoundError when there is none, ValueError when it
        cannot be used (a link, a FIFO, readable by others, malformed), OSError otherwise."""
        try:
            data, mode = statedir.read_file(path, max_bytes=MAX_KEYRING_BYTES)
        except statedir.StateFileError as exc:
            raise ValueError(str(exc)) from None
        if mode & 0o077:
            raise ValueError(
                f"{KEYRING_NAME} is readable by other users (mode {mode:o}); it must be 0600"
            )
        try:
            raw = json.loads(data.decode("utf-8"))
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise ValueError(f"{KEYRING_NAME} is malformed: {exc}") from None
        try:
            keys = {str(k): base64.b64decode(v) for k, v in raw["keys"].items()}
            active = str(raw["active"])
        except (KeyError, TypeError, AttributeError, binascii.Error) as exc:
            raise ValueError(f"{KEYRING_NAME} is malformed: {exc}") from None
        if active not in keys or any(len(k) < KEY_BYTES for k in keys.values()):
            raise ValueError(f"{KEYRING_NAME} is malformed: bad active key or short key")
        return cls(active=active, keys=keys)

    def _dump(self) -> str:
        return json.dumps(
            {
                "active": self.active,
                "keys": {k: base64.b64encode(v).decode("ascii") for k, v in self.keys.items()},
            }
        )

    def rotated(self) -> Keyring:
        """A keyring with a fresh active key; older keys still verify."""
        kid = _b64e(secrets.token_bytes(KEY_ID_BYTES))
        return Keyring(active=kid, keys={**self.keys, kid: secrets.token_bytes(KEY_BYTES)})

    def save(self, state_dir: Path) -> None:
        """Atomically replace the keyring file (used by key rotation)."""
        statedir.publish(self._write_temp(state_dir), state_dir / KEYRING_NAME, replace=True)


class Sealer:
    """Seals and opens request state with a keyring.

    ``reload`` (optional) re-reads the keyring: when a state names a key id this process
    does not hold (another process sharing the state directory rotated the key after this
    one started), the keyring is reloaded once and the new active key seals from then on.
    ``version`` (optional, with ``reload``) tells whether the file changed: asked before
    every seal and open, the keyring is reloaded when its answer changed (see the module).
    """

    def __init__(
        self,
        keyring: Keyring,
        reload: Callable[[], Keyring] | None = None,
        version: Callable[[], object] | None = None,
    ) -> None:
        self._ring = keyring
        self._reload = reload
        self._version = version
        self._seen = version() if version is not None else None
        self._failed: object = None

    @property
    def active(self) -> str:
        """The key id that seals now (the file checked first)."""
        self._follow()
        return self._ring.active

    def _follow(self) -> None:
        """Reload the keyring if its file changed since it was read (a rotation, a retired
        key); on a read error keep the keys we have and try again next time."""
        if self._version is None or self._reload is None:
            return
        seen = self._version()
        if seen == self._seen:
            return
        try:
            self._ring = self._reload()
        except (OSError, ValueError) as exc:
            if seen != self._failed:  # once per content of the file, not per request
                _log.warning("cannot use the new %s (%s); sealing with the keys read before",
                             KEYRING_NAME, exc)  # fmt: skip
                self._failed = seen
            return
        self._seen = seen

    def seal(self, payload: Mapping[str, Any]) -> str:
        self._follow()
        kid = self._ring.active
        body = _b64e(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode())
        signed = f"{STATE_FORMAT}.{kid}.{body}"
        mac = hmac.new(self._ring.keys[kid], signed.encode("ascii"), hashlib.sha256).digest()
        return f"{signed}.{_b64e(mac)}"

    def open(self, state: object, *, now: float) -> dict[str, Any]:
        """Verify and decode a state; raise StateInvalid/StateUnknownKey/StateExpired.

        The payload must carry ``exp`` (unix seconds); it is checked only after the MAC.
        """
        if not isinstance(state, str) or len(state) > MAX_STATE_CHARS:
            raise StateInvalid("not a state string")
        parts = state.split(".")
        if len(parts) != 4 or parts[0] != STATE_FORMAT:
            raise StateInvalid("unknown format")
        _, kid, body, mac_text = parts
        self._follow()
        key = self._ring.keys.get(kid)
        if key is None and self._reload is not None:
            # On a read error keep the keyring we have: the state is simply not verifiable.
            with contextlib.suppress(OSError, ValueError):
                self._ring = self._reload()
            key = self._ring.keys.get(kid)
        if key is None:
            raise StateUnknownKey("sealed by an unknown key")
        mac = _b64d(mac_text)
        expected = hmac.new(key, f"{STATE_FORMAT}.{kid}.{body}".encode("ascii"), hashlib.sha256)
        if not hmac.compare_digest(mac, expected.digest()):
            raise StateInvalid("bad seal")
        try:
            payload = json.loads(_b64d(body))
        except (ValueError, UnicodeDecodeError):
            raise StateInvalid("bad payload") from None
        if not isinstance(payload, dict):
            raise StateInvalid("bad payload")
        exp = payload.get("exp")
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            raise StateInvalid("no expiry")
        if now >= exp:
            raise StateExpired("expired")
        return payload


def digest_arguments(arguments: Mapping[str, Any]) -> str:
    """A stable SHA-256 of tool arguments (canonical JSON), for binding state to a call."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
