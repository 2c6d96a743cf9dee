"""Pagination cursors: a JSON value written as unpadded base64url, opaque to the client.

The spec's cursors are opaque strings the client hands back unchanged; every list of ours
(tools, resources, notes, tags) writes its position the same way, so one codec serves them
all. Nothing here authenticates a cursor: a client can forge any value, so each lister checks
what it decodes (its version, the types, the names it may hold) and answers a cursor it did
not issue with its own error.
"""

from __future__ import annotations

import base64
import json
from typing import Any

__all__ = ["decode", "encode"]


def encode(value: Any) -> str:
    """``value`` (anything ``json.dumps`` takes) as a cursor."""
    raw = json.dumps(value, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode(cursor: str) -> Any:
    """The JSON value ``cursor`` holds, unchecked; :class:`ValueError` when it is not
    base64url JSON at all."""
    # binascii.Error, UnicodeDecodeError and json's errors are all ValueErrors.
    return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
