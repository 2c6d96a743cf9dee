"""Setting and removing one frontmatter key (fsnotes/notes/text/frontedit.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fsnotes.notes.text.frontedit import (
    MAX_LIST_ITEMS,
    MAX_VALUE_CHARS,
    FrontmatterError,
    _verify,
    edit,
)
from fsnotes.notes.text.markdown import split_frontmatter

NOTE = """---
title: "Trip plan"   # trailing spaces and a comment
# a comment the person wrote
tags:
  - travel
  - "2027"
rating: 4
odd:   spacing  here
---
# Body

status: not frontmatter
"""


def _reads(text: str) -> dict[str, Any]:
    return split_frontmatter(text)[0]


def test_set_existing_key_changes_only_its_line() -> None:
    out = edit(NOTE, "rating", "set", 5)
    assert out == NOTE.replace("rating: 4\n", "rating: 5\n")


def test_set_new_key_goes_at_the_end_of_the_block() -> None:
    out = edit(NOTE, "status", "set", "done")
    assert out == NOTE.replace("here\n---\n", "here\nstatus: done\n---\n")
    assert _reads(out)["status"] == "done"


def test_set_block_list_keeps_block_style_and_other_lines() -> None:
    out = edit(NOTE, "tags", "set", ["travel", "gear"])
    assert out == NOTE.replace('  - travel\n  - "2027"\n', "  - travel\n  - gear\n")


def test_set_list_in_flow_style_quotes_what_needs_it() -> None:
    items = ["a b", "c,d", "yes", 3, True, "it's", 'say "x"', "last"]
    out = edit("---\nx: 1\n---\n", "tags", "set", items)
    assert out == (
        "---\nx: 1\ntags: [a b, 'c,d', 'yes', 3, true, 'it''s', 'say \"x\"', last]\n---\n"
    )
    assert _reads(out)["tags"] == items


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("plain words", "plain words"),
        ("2026-12-03", "2026-12-03"),
        ("yes", "'yes'"),
        ("Null", "'Null'"),
        ("3", "'3'"),
        ("-1.5", "'-1.5'"),
        ("a: b", "'a: b'"),
        ("a #b", "'a #b'"),
        ("#tag", "'#tag'"),
        ("- item", "'- item'"),
        ("[x]", "'[x]'"),
        ("'quoted'", "'''quoted'''"),
        ('say "hi"', 'say "hi"'),
        ("it's", "it's"),
        (" padded", "' padded'"),
        ("", "''"),
        ("C#", "C#"),
        ("ends:", "'ends:'"),
        (None, "null"),
        (False, "false"),
        (-7, "-7"),
        (2.5, "2.5"),
        ([], "[]"),
    ],
)
def test_values_are_written_as_yaml_that_reads_back_the_same(value: Any, written: str) -> None:
    out = edit("---\n---\nbody\n", "k", "set", value)
    assert out == f"---\nk: {written}\n---\nbody\n"
    assert _reads(out) == {"k": None if value == [] else value}


def test_set_on_a_note_without_frontmatter_creates_it() -> None:
    assert edit("# Hi\n", "status", "set", "draft") == "---\nstatus: draft\n---\n# Hi\n"
    assert edit("a\r\nb\r\n", "k", "set", 1) == "---\r\nk: 1\r\n---\r\na\r\nb\r\n"


def test_crlf_frontmatter_gets_crlf_lines() -> None:
    text = "---\r\na: 1\r\n---\r\nbody\r\n"
    assert edit(text, "b", "set", 2) == "---\r\na: 1\r\nb: 2\r\n---\r\nbody\r\n"
    assert edit(text, "a", "remove") == "---\r\n---\r\nbody\r\n"


def test_remove_takes_the_key_and_its_list_lines_only() -> None:
    out = edit(NOTE, "tags", "remove")
    assert out == NOTE.replace('tags:\n  - travel\n  - "2027"\n', "")
    assert "tags" not in _reads(out)


@pytest.mark.parametrize(
    ("text", "key", "op", "value", "message"),
    [
        (NOTE, "missing", "remove", None, "has no key 'missing'"),
        ("# no fm\n", "k", "remove", None, "no frontmatter"),
        (NOTE, "bad: key", "set", 1, "not a plain name"),
        (NOTE, "-dash", "set", 1, "not a plain name"),
        (NOTE, "two  spaces", "set", 1, "not a plain name"),
        (NOTE, "k", "set", "line\nbreak", "one line"),
        (NOTE, "k", "set", "tab\there", "one line"),
        (NOTE, "k", "set", "x" * (MAX_VALUE_CHARS + 1), "at most"),
        (NOTE, "k", "set", ["x"] * (MAX_LIST_ITEMS + 1), "at most"),
        (NOTE, "k", "set", 10**19, "digits"),
        (NOTE, "k", "set", 1e300, "plain decimal"),
        ("---\nk: 1\nk: 2\n---\n", "k", "set", 3, "2 times"),
    ],
)
def test_refused_edits_say_why(text: str, key: str, op: Any, value: Any, message: str) -> None:
    with pytest.raises(FrontmatterError, match=message):
        edit(text, key, op, value)


def test_a_stray_item_line_stays_where_it_was() -> None:
    # An item line after a comment belongs to no key line directly above it: it stays, and
    # the key reads as the value given.
    text = "---\nk:\n# note\n- stray\nj: 1\n---\n"
    out = edit(text, "k", "set", ["a"])
    assert out == "---\nk: [a]\n# note\n- stray\nj: 1\n---\n"
    assert _reads(out) == {"k": ["a"], "j": 1}


def test_the_block_is_read_again_and_a_change_elsewhere_refused() -> None:
    # The guard behind every edit: a result in which another key, or the body, reads
    # differently is refused (whatever produced it).
    before = {"k": 1, "j": 2}
    _verify("---\nk: 5\nj: 2\n---\nbody", before, "body", "k", "set", 5)  # fine
    with pytest.raises(FrontmatterError, match="change how the rest"):
        _verify("---\nk: 5\nj: 3\n---\nbody", before, "body", "k", "set", 5)
    with pytest.raises(FrontmatterError, match="change how the rest"):
        _verify("---\nk: 5\nj: 2\n---\nBODY", before, "body", "k", "set", 5)
    with pytest.raises(FrontmatterError, match="change how the rest"):
        _verify("---\nj: 2\n---\nbody", before, "body", "k", "set", 5)


REPO = Path(__file__).resolve().parents[3]
# The examples of quoted values in the manual and in the writer's docstring.
_DOCUMENTED = re.compile(r"in single quotes[^(]*\(([^)]*)\)")


def documented_quoting(text: str) -> list[str]:
    (examples,) = _DOCUMENTED.findall(" ".join(text.split()))
    return [e.strip("`") for e in re.findall(r"``?[^`]+``?", examples)]


@pytest.mark.parametrize(
    "source", [REPO / "docs" / "tools.md", REPO / "fsnotes" / "notes" / "text" / "frontedit.py"]
)
def test_the_documented_quoting_examples_are_what_the_writer_writes(source: Path) -> None:
    # Issue 26: the manual showed 'it''s' for a value the writer writes plain as it's.
    examples = documented_quoting(source.read_text())
    assert len(examples) >= 4, examples
    for written in examples:
        value = _reads(f"---\nk: {written}\n---\n")["k"]
        assert edit("---\n---\n", "k", "set", value) == f"---\nk: {written}\n---\n", written
