"""A tool declared by its function: name, title and description from the function and its
docstring, the schemas from its types, and refusals when the function does not say them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsnotes.app.config import load
from fsnotes.app.server import build
from fsnotes.notes.tools.build import TOOLS
from fsnotes.notes.tools.declare import Toolbox, ToolCall
from fsnotes.notes.tools.models import (
    NotesReadArgs,
    NotesReadResult,
    WorkspacesListArgs,
    WorkspacesListResult,
)
from fsnotes.protocol.registry import ToolAnnotations

READS = ToolAnnotations(read_only=True, destructive=False, idempotent=True)


def test_name_title_description_and_models_come_from_the_function() -> None:
    box = Toolbox()

    @box.tool(READS, facts={"MOST": "1,000"})
    def notes_peek(call: ToolCall, a: NotesReadArgs) -> NotesReadResult:
        """Peek at
        a note

        The first lines, wrapped
            over   lines.

        A second paragraph: at most {MOST} lines.
        """
        raise AssertionError("not called")

    (declared,) = box.declared
    assert declared is notes_peek
    assert declared.name == "notes_peek"
    assert declared.title == "Peek at a note"
    assert declared.description == (
        "The first lines, wrapped over lines. A second paragraph: at most 1,000 lines."
    )
    assert declared.args is NotesReadArgs and declared.result is NotesReadResult
    assert declared.annotations == ToolAnnotations(
        title="Peek at a note", read_only=True, destructive=False, idempotent=True
    )


def test_a_function_that_does_not_say_its_types_or_its_title_is_refused() -> None:
    box = Toolbox()
    with pytest.raises(TypeError, match="title and a description"):

        @box.tool(READS)
        def no_description(call: ToolCall, a: WorkspacesListArgs) -> WorkspacesListResult:
            """Only a title"""
            raise AssertionError

    with pytest.raises(TypeError, match="must be"):

        @box.tool(READS)
        def untyped(call: ToolCall, a: dict) -> WorkspacesListResult:  # type: ignore[type-arg]
            """Untyped

            Its arguments are no model.
            """
            raise AssertionError

    with pytest.raises(TypeError, match="fact MOST"):

        @box.tool(READS, facts={"MOST": "3"})
        def unused_fact(call: ToolCall, a: WorkspacesListArgs) -> WorkspacesListResult:
            """Unused

            Says no figure.
            """
            raise AssertionError

    @box.tool(READS)
    def twice(call: ToolCall, a: WorkspacesListArgs) -> WorkspacesListResult:
        """Twice

        Declared once.
        """
        raise AssertionError

    with pytest.raises(TypeError, match="declared twice"):
        box.tool(READS)(twice.function)
    assert [d.name for d in box.declared] == ["twice"]


def test_the_server_serves_the_declared_tools_in_their_order(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    cfg = load(
        workspaces=[str(tmp_path / "notes")],
        state_dir=str(tmp_path / "state"),
        principal="ada",
        env={},
    )
    srv = build(cfg)
    try:
        served = [t.name for t in srv.app.tools]
    finally:
        srv.close()
    # The notes tools, in declaration order; the setup tool (its own package) comes after.
    assert served[: len(TOOLS.declared)] == [d.name for d in TOOLS.declared]
    assert len(TOOLS.declared) == 12 and served[0] == "workspaces_list"
