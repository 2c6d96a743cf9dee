"""A deliberately naive containment check, for tests only: realpath, then open by name.

This is the pattern DESIGN.md section 2 warns about (the reference filesystem server uses
it): the path is checked once and then a *string* is opened, so anything swapped in between
the check and the open is followed. ``tests/sandbox/test_root_races.py`` runs the same race
against this module and asserts that it does escape, which proves the race harness can
detect an escape at all.
"""

from __future__ import annotations

import os


def contained_path(root: str, rel: str) -> str:
    """The resolved absolute path of ``rel`` below ``root``, if it is inside at check time."""
    base = os.path.realpath(root)
    target = os.path.realpath(os.path.join(base, rel))
    if os.path.commonpath([base, target]) != base:
        raise PermissionError(f"{rel}: outside the workspace")
    return target


def read(root: str, rel: str) -> bytes:
    with open(contained_path(root, rel), "rb") as f:  # opened by name: the race window
        return f.read()


def write(root: str, rel: str, data: bytes) -> None:
    with open(contained_path(root, rel), "wb") as f:
        f.write(data)
