"""notes_update's edits by heading and by frontmatter key on the wire, in both eras."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.eras import EraWire
from fsnotes.notes.text.markdown import split_frontmatter

NOTE = """---
title: Shed
status: planning   # the person's comment stays
tags:
  - diy
---
# Projects

## Shed

- wood

```
## Shed (in code: not a heading)
```

# Archive

## Shed

old
"""


@pytest.fixture(params=["legacy", "modern"])
def era_wire(request: pytest.FixtureRequest, workspace: Path, tmp_path: Path) -> Iterator[EraWire]:
    (workspace / "shed.md").write_text(NOTE)
    w = EraWire(workspace, tmp_path / "state", request.param)
    yield w
    w.close()


def test_each_edit_kind_in_one_guarded_update(era_wire: EraWire, workspace: Path) -> None:
    uri = (workspace / "shed.md").as_uri()
    etag = era_wire.tool("notes_read", {"uri": uri})["structuredContent"]["etag"]
    result = era_wire.tool(
        "notes_update",
        {
            "uri": uri,
            "etag": etag,
            "edits": [
                {"heading": "Projects > Shed", "op": "append", "text": "- nails"},
                {"heading": "Archive > Shed", "op": "replace", "text": "moved"},
                {"heading": "Projects", "op": "prepend", "text": "Intro."},
                {"frontmatterKey": "status", "op": "set", "value": "building"},
                {"frontmatterKey": "due", "op": "set", "value": "2026-12-24"},
                {"frontmatterKey": "tags", "op": "remove"},
                {"oldText": "old", "newText": "unused"},
            ],
        },
    )
    # The exact-text edit comes last and finds nothing ("old" was replaced): all or none.
    assert result["isError"] is True
    assert "Edit 7: oldText occurs nowhere" in result["content"][0]["text"]
    assert (workspace / "shed.md").read_text() == NOTE

    result = era_wire.tool(
        "notes_update",
        {
            "uri": uri,
            "etag": etag,
            "edits": [
                {"heading": "Projects > Shed", "op": "append", "text": "- nails"},
                {"heading": "Archive > Shed", "op": "replace", "text": "moved"},
                {"heading": "Projects", "op": "prepend", "text": "Intro."},
                {"frontmatterKey": "status", "op": "set", "value": "building"},
                {"frontmatterKey": "due", "op": "set", "value": "2026-12-24"},
                {"frontmatterKey": "tags", "op": "remove"},
            ],
        },
    )
    assert result.get("isError") is not True, result
    text = (workspace / "shed.md").read_text()
    assert text == (
        "---\ntitle: Shed\nstatus: building\ndue: 2026-12-24\n---\n# Projects\n\nIntro.\n"
        # The code block belongs to the Projects > Shed section: "- nails" goes after it.
        "## Shed\n\n- wood\n\n```\n## Shed (in code: not a heading)\n```\n- nails\n\n"
        "# Archive\n\n## Shed\n\nmoved\n"
    )
    assert result["structuredContent"]["etag"] == json.loads(result["content"][0]["text"])["etag"]
    read = era_wire.tool("notes_read", {"uri": uri})["structuredContent"]
    assert read["frontmatter"] == {"title": "Shed", "status": "building", "due": "2026-12-24"}
    # The old etag no longer matches: a second update with it writes nothing.
    stale = era_wire.tool(
        "notes_update",
        {"uri": uri, "etag": etag, "edits": [{"frontmatterKey": "x", "op": "set", "value": 1}]},
    )
    assert stale["isError"] is True and "changed since you read it" in stale["content"][0]["text"]


def test_ambiguous_and_missing_headings_name_the_candidates(
    era_wire: EraWire, workspace: Path
) -> None:
    uri = (workspace / "shed.md").as_uri()
    result = era_wire.tool(
        "notes_update", {"uri": uri, "edits": [{"heading": "Shed", "op": "append", "text": "x"}]}
    )
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "matches 2 headings" in text
    assert "'Projects > Shed' (line 9)" in text and "'Archive > Shed' (line 19)" in text
    assert "in code" not in text
    result = era_wire.tool(
        "notes_update", {"uri": uri, "edits": [{"heading": "Sheds", "op": "append", "text": "x"}]}
    )
    assert result["isError"] is True
    assert "No heading matches 'Sheds'" in result["content"][0]["text"]
    assert "'Archive' (line 17)" in result["content"][0]["text"]
    assert (workspace / "shed.md").read_text() == NOTE


def test_malformed_edits_are_argument_errors_that_change_nothing(
    era_wire: EraWire, workspace: Path
) -> None:
    uri = (workspace / "shed.md").as_uri()
    for edit, expected in [
        ({"heading": "Shed"}, "edits.0.section.op: required field is missing"),
        ({"frontmatterKey": "k", "op": "set"}, "'set' needs a 'value'"),
        ({"frontmatterKey": "k", "op": "set", "value": {"a": 1}}, "value"),
        ({"nothing": 1}, "each edit needs 'oldText'"),
        ({"frontmatterKey": "k", "op": "set", "value": "two\nlines"}, "one line of text"),
    ]:
        result = era_wire.tool("notes_update", {"uri": uri, "edits": [edit]})
        assert result["isError"] is True, edit
        assert expected in result["content"][0]["text"], result["content"][0]["text"]
    assert (workspace / "shed.md").read_text() == NOTE


def test_the_update_schema_offers_every_edit_kind(era_wire: EraWire) -> None:
    tools = {t["name"]: t for t in era_wire.result("tools/list")["tools"]}
    items = tools["notes_update"]["inputSchema"]["properties"]["edits"]["anyOf"][0]["items"]
    kinds = [set(alt["required"]) for alt in items["oneOf"]]
    assert kinds == [{"oldText", "newText"}, {"heading", "op", "text"}, {"frontmatterKey", "op"}]


def test_the_documented_quoting_examples_are_written_as_documented(
    era_wire: EraWire, workspace: Path
) -> None:
    # Issue 26: docs/tools.md's examples of quoted values, set over the wire, are in the
    # file as the manual shows them (and a value with a quote that needs none stays plain).
    manual = (Path(__file__).resolve().parents[2] / "docs" / "tools.md").read_text()
    (examples,) = re.findall(r"in single quotes[^(]*\(([^)]*)\)", " ".join(manual.split()))
    shown = [e.strip("`") for e in re.findall(r"``?[^`]+``?", examples)]
    uri = (workspace / "shed.md").as_uri()
    for written in [*shown, "it's"]:
        value = split_frontmatter(f"---\nk: {written}\n---\n")[0]["k"]
        etag = era_wire.tool("notes_read", {"uri": uri})["structuredContent"]["etag"]
        result = era_wire.tool(
            "notes_update",
            {
                "uri": uri,
                "etag": etag,
                "edits": [{"frontmatterKey": "k", "op": "set", "value": value}],
            },
        )
        assert result.get("isError") is not True, result
        assert f"\nk: {written}\n" in (workspace / "shed.md").read_text(), written
