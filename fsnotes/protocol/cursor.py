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

__all__ = ["decode", "decode_object", "encode"]


def encode(value: Any) -> str:
    """``value`` (anything ``json.dumps`` takes) as a cursor."""
    raw = json.dumps(value, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode(cursor: str) -> Any:
    """The JSON value ``cursor`` holds, unchecked; :class:`ValueError` when it is not
    base64url JSON at all."""
    # binascii.Error, UnicodeDecodeError and json's errors are all ValueErrors.
    return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))


def decode_object(cursor: str, version: int) -> dict[str, Any] | None:
    """The JSON object ``cursor`` holds when it is one of ``version`` (its ``"v"``), else
    None: the step every lister of ours starts with; the fields are still the lister's to
    check."""
    try:
        value = decode(cursor)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("v") != version:
        return None
    return value
