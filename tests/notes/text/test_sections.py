"""Headings and section edits (fsnotes/notes/text/sections.py): pure text in, text out."""

from __future__ import annotations

import pytest

from fsnotes.notes.text.sections import SectionError, edit, find, headings

NOTE = """---
title: Plans
# not a heading: frontmatter comment
---
# Projects

Intro.

## Shed

- wood
- nails

### Roof

tiles

## Garden

```python
# not a heading: code
## nor this
```

Beds
====

~~~~
# still code
```
# still code after a shorter, other fence
~~~~

# Archive

## Shed

old shed notes
"""


def test_headings_skip_frontmatter_and_fenced_code_and_count_setext() -> None:
    found = [(h.level, h.text, h.line) for h in headings(NOTE)]
    assert found == [
        (1, "Projects", 5),
        (2, "Shed", 9),
        (3, "Roof", 14),
        (2, "Garden", 18),
        (1, "Beds", 25),
        (1, "Archive", 34),
        (2, "Shed", 36),
    ]
    assert [h.label() for h in headings(NOTE)][2] == "Projects > Shed > Roof"


def test_setext_needs_a_paragraph_not_a_list_or_a_break() -> None:
    text = "Title\n=====\n\n- item\n---\n\nPara one\nline two\n--\n\n---\n\n    indented\n---\n"
    assert [(h.level, h.text) for h in headings(text)] == [
        (1, "Title"),
        (2, "Para one line two"),
    ]


def test_atx_variants() -> None:
    text = "#nospace\n# Closed ##\n#\tTab\n    # indented code\n###### Six\n####### seven\n"
    assert [(h.level, h.text) for h in headings(text)] == [(1, "Closed"), (1, "Tab"), (6, "Six")]


def test_unclosed_fence_hides_everything_after_it() -> None:
    assert [h.text for h in headings("# A\n```\n# B\n")] == ["A"]


def test_path_picks_the_heading_inside_its_parent() -> None:
    shed, end, _ = find(NOTE, "Projects > Shed")
    assert (shed.line, shed.label()) == (9, "Projects > Shed")
    # The section ends at the next heading of the same or a higher level (Garden), and
    # holds its sub-section (Roof).
    assert NOTE.split("\n")[end] == "## Garden"
    assert find(NOTE, "archive>shed")[0].line == 36  # case and spaces ignored
    assert find(NOTE, "## Roof")[0].line == 14  # leading '#' marks ignored
    assert find(NOTE, "Projects > Roof")[0].line == 14  # an ancestor, not only the parent


def test_ambiguous_heading_names_every_candidate() -> None:
    with pytest.raises(SectionError) as err:
        find(NOTE, "Shed")
    message = str(err.value)
    assert "matches 2 headings" in message
    assert "'Projects > Shed' (line 9)" in message and "'Archive > Shed' (line 36)" in message


def test_missing_heading_names_the_candidates() -> None:
    with pytest.raises(SectionError) as err:
        find(NOTE, "Garden > Shed")
    assert "headings with that text" in str(err.value)
    assert "'Projects > Shed' (line 9)" in str(err.value)
    with pytest.raises(SectionError) as err:
        find(NOTE, "Nowhere")
    assert "the note's headings" in str(err.value) and "'Projects > Garden' (line 18)" in str(
        err.value
    )
    with pytest.raises(SectionError, match="has no headings"):
        find("just text\n", "A")
    with pytest.raises(SectionError, match="empty part"):
        find(NOTE, "Projects > ")
    with pytest.raises(SectionError, match="No heading matches"):
        find(NOTE, "# not a heading: code")  # code lines are never headings


def test_append_goes_after_the_last_line_before_the_blank_lines() -> None:
    out = edit(NOTE, "Projects > Shed", "append", "- screws")
    assert "tiles\n- screws\n\n## Garden" in out
    assert out.replace("- screws\n", "", 1) == NOTE


def test_prepend_goes_before_the_first_line() -> None:
    out = edit(NOTE, "Archive > Shed", "prepend", "new first line\n")
    assert out.endswith("## Shed\n\nnew first line\nold shed notes\n")


def test_replace_keeps_heading_and_surrounding_blank_lines() -> None:
    out = edit(NOTE, "Projects > Shed", "replace", "- steel")
    assert "## Shed\n\n- steel\n\n## Garden" in out
    assert "Roof" not in out  # sub-sections are part of the section
    assert out.startswith(NOTE.split("## Shed")[0])


def test_empty_section_and_end_of_note_without_newline() -> None:
    assert edit("# A\n# B\n", "A", "append", "x") == "# A\nx\n# B\n"
    # A's section holds its sub-sections: appending to it goes after them.
    assert edit("# A\n## B\n", "A", "append", "x") == "# A\n## B\nx\n"
    assert edit("# A\n\n# B", "B", "append", "x") == "# A\n\n# B\nx\n"
    assert edit("# A\nold", "A", "append", "new") == "# A\nold\nnew\n"
    assert edit("# A\r\nold\r\n", "A", "append", "x\ny") == "# A\r\nold\r\nx\r\ny\r\n"


def test_setext_section_edits_below_the_underline() -> None:
    out = edit("Title\n=====\nbody\n", "Title", "prepend", "first")
    assert out == "Title\n=====\nfirst\nbody\n"


def test_code_is_what_links_and_tags_take_for_code() -> None:
    # One definition of code (fsnotes.notes.text.code): a tab-indented block, a fence inside
    # a list item, a longer fence not closed by a shorter one.
    text = (
        "# A\n\ntext\n\n\t# tab code\n\n- item\n\n  ```\n  # fenced in item\n  ```\n\n"
        "````\n```\n# still code\n````\n# B\n"
    )
    assert [h.text for h in headings(text)] == ["A", "B"]
