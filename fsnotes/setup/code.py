"""The setup code: proof that the person on the setup page operates this server.

A fresh code is made at every server start, printed on stderr and written to
``<state dir>/setup-code`` (mode 0600). The setup page asks for it before it grants anything.
The model never sees it: it is not in any MCP message, and the state directory is outside
every workspace (the configuration refuses otherwise).

Processes sharing a state directory share the file: the newest start wins, and every page
checks against the file's current content, so they never disagree about which code is valid.
A code printed by an older process is then stale; the file is the reference. The file is
read and written through :mod:`fsnotes.state.statedir` (never through a link, never a
FIFO, a new code given the name atomically).

Codes are 16 letters from Crockford's base-32 alphabet (no I, L, O, U), shown in groups of
four: 80 random bits. Input is compared after upper-casing and dropping spaces and dashes,
and ``O``/``I``/``L`` typed by mistake are read as ``0``/``1``/``1``.
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

from fsnotes.state import statedir

CODE_FILE = "setup-code"
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base 32
CODE_LETTERS = 16
GROUP = 4
# Longest input worth normalising; anything longer is not a code.
MAX_INPUT_CHARS = 64
# The most of the code file read: a code with its dashes and newline is 20 bytes.
MAX_FILE_BYTES = 256
_TYPO = str.maketrans({"O": "0", "I": "1", "L": "1"})


def new_code() -> str:
    letters = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LETTERS))
    return "-".join(letters[i : i + GROUP] for i in range(0, CODE_LETTERS, GROUP))


def normalise(text: str) -> str:
    if len(text) > MAX_INPUT_CHARS:
        return ""
    return "".join(c for c in text.upper() if c not in " -\t").translate(_TYPO)


def write_code(state_dir: Path, code: str) -> Path:
    """Write ``code`` to the code file atomically, readable by the owner only."""
    path = state_dir / CODE_FILE
    statedir.publish(
        statedir.write_temp(state_dir, CODE_FILE, (code + "\n").encode()), path, replace=True
    )
    return path


def read_code(state_dir: Path) -> str | None:
    """The current code, or ``None`` when the file is missing, unreadable or malformed."""
    try:
        data, _ = statedir.read_file(state_dir / CODE_FILE, max_bytes=MAX_FILE_BYTES)
    except (OSError, statedir.StateFileError):
        return None
    code = normalise(data.decode("ascii", "replace").strip())
    if len(code) != CODE_LETTERS or any(c not in ALPHABET for c in code):
        return None
    return code


def check(state_dir: Path, candidate: str) -> bool:
    """Whether ``candidate`` is the current code (constant-time comparison)."""
    expected = read_code(state_dir)
    if expected is None:
        return False
    return hmac.compare_digest(normalise(candidate).encode(), expected.encode())
