"""A path deeper than layer 1 allows is refused on the wire as too deep, whatever tool and
whichever form (a file:// URI or a relative path) it came in, and nothing is created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from e2e.wire import Wire
from sandbox.uri import MAX_DEPTH

DEPTH = 500  # far past MAX_DEPTH, well under the URI and path length limits


def _deep_rel(depth: int) -> str:
    return "/".join(["d"] * (depth - 1) + ["note.md"])


def _text(result: dict[str, Any]) -> str:
    return " ".join(c.get("text", "") for c in result["content"])


def _arguments(tool: str, workspace: Path) -> dict[str, Any]:
    deep_uri = (workspace / _deep_rel(DEPTH)).as_uri()
    real_uri = (workspace / "plan.md").as_uri()
    return {
        "notes_read": {"uri": deep_uri},
        "notes_update": {"uri": deep_uri, "content": "x"},
        "notes_delete": {"uri": deep_uri},
        "notes_move": {"uri": real_uri, "newPath": _deep_rel(DEPTH)},
        "notes_create": {"path": _deep_rel(DEPTH), "content": "x"},
        "notes_list": {"folder": "/".join(["d"] * DEPTH)},
        "notes_search": {"query": "plan", "folder": "/".join(["d"] * DEPTH)},
    }[tool]


@pytest.mark.parametrize(
    "tool",
    [
        "notes_read",
        "notes_update",
        "notes_delete",
        "notes_move",
        "notes_create",
        "notes_list",
        "notes_search",
    ],
)
def test_a_path_500_levels_deep_is_refused_as_too_deep(
    wire: Wire, workspace: Path, tool: str
) -> None:
    response = wire.tool(tool, _arguments(tool, workspace))
    result = response["result"]
    assert result["isError"] is True, result
    text = _text(result)
    assert text == (
        f"That path is {DEPTH} levels deep; fsnotes allows at most {MAX_DEPTH} below a workspace."
    )
    assert "not inside a workspace" not in text
    assert str(workspace.parent) not in text.replace(str(workspace), "")  # no other host path
    assert not (workspace / "d").exists()
    assert (workspace / "plan.md").exists()


def test_a_deep_uri_outside_every_grant_still_says_not_granted(wire: Wire, workspace: Path) -> None:
    # Depth is only reported below a granted workspace: elsewhere the answer stays the one
    # that tells nothing about what exists.
    other = (workspace.parent / "notes-evil" / _deep_rel(DEPTH)).as_uri()
    text = _text(wire.tool("notes_read", {"uri": other})["result"])
    assert "not inside a workspace granted to you" in text
    assert "deep" not in text
