"""Every field of every tool's schemas carries a title a person can read ("Workspace URI",
not "Workspaceuri"): hosts such as the Inspector show it as the field's label."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.protocol.handlers import describe
from fsnotes.protocol.tool_schema import field_title


@pytest.fixture
def every_tool(tmp_path: Path) -> Iterator[Server]:
    """A server with every tool on: notes_setup too (it needs an allowlisted parent)."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "shared").mkdir()
    cfg = load(
        workspaces=[str(tmp_path / "notes")],
        state_dir=str(tmp_path / "state"),
        principal="ada",
        setup_allow=[str(tmp_path / "shared")],
        env={},
    )
    srv = build(cfg)
    yield srv
    srv.close()


def fields(node: Any) -> Iterator[tuple[str, Any]]:
    """(wire name, schema) of every property anywhere in a schema."""
    if isinstance(node, dict):
        properties = node.get("properties")
        if isinstance(properties, dict):
            yield from properties.items()
        for value in node.values():
            yield from fields(value)
    elif isinstance(node, list):
        for value in node:
            yield from fields(value)


# What every title is made of: words, the first one capitalised, each other one in lower
# case or a known abbreviation spelt as it is spelt.
TITLE = re.compile(r"[A-Z][a-z0-9]*( ([a-z0-9]+|URI|ETag))*|URI|ETag")


def test_every_tool_field_has_a_readable_title_from_its_wire_name(every_tool: Server) -> None:
    names = {tool.name for tool in every_tool.app.tools}
    assert {"notes_read", "notes_update", "notes_setup"} <= names
    titles: dict[str, str] = {}
    for tool in every_tool.app.tools:
        descriptor = describe(tool).descriptor
        for key in ("inputSchema", "outputSchema"):
            for name, schema in fields(descriptor.get(key, {})):
                title = schema.get("title")
                assert isinstance(title, str), (tool.name, key, name)
                assert TITLE.fullmatch(title), (tool.name, key, name, title)
                assert title.replace(" ", "").lower() == name.lower(), (tool.name, name, title)
                titles[name] = title
    assert titles["workspaceUri"] == "Workspace URI"
    assert titles["startLine"] == "Start line"
    assert titles["etag"] == "ETag"
    assert titles["updateLinks"] == "Update links"
    assert titles["uri"] == "URI"


@pytest.mark.parametrize(
    ("name", "title"),
    [
        ("workspaceUri", "Workspace URI"),
        ("startLine", "Start line"),
        ("frontmatterKey", "Frontmatter key"),
        ("etag", "ETag"),
        ("previousUri", "Previous URI"),
        ("uri", "URI"),
        ("max_size_mib", "Max size mib"),
        ("HTTPServer", "HTTP server"),
        ("line2", "Line2"),
    ],
)
def test_a_title_is_the_wire_name_in_words(name: str, title: str) -> None:
    assert field_title(name) == title
