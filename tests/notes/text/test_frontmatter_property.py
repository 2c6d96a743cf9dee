"""Splitting a note into frontmatter and body (fsnotes/notes/text/markdown.py's ``_split``,
which walks the text line by line) gives what the rule says on the text split into lines
(``frontmatter_close`` on ``text.split("\\n")``), on random texts (hypothesis) of the lines
that decide it: opens and closes with and without carriage returns and blanks, keys, empty
lines, and texts with no final line end; and frontmatter longer than the bound."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fsnotes.notes.text import markdown

LINES = ["---", "--- ", "---\r", "...", "....", "----", "", "\r", "a: 1", "tags: [x]", "- y", "b"]


def _by_lines(text: str) -> tuple[list[str], str, int]:
    """The rule, read off the whole list of lines."""
    lines = text.split("\n")
    close = markdown.frontmatter_close(lines)
    if close is None:
        return [], text, 1
    return [ln.rstrip("\r") for ln in lines[1:close]], "\n".join(lines[close + 1 :]), close + 2


text_st = st.tuples(
    st.lists(st.sampled_from(LINES), max_size=14), st.sampled_from(["", "\n", "\r\n"])
).map(lambda t: "\n".join(t[0]) + t[1])


@settings(max_examples=1000, deadline=None)
@given(text_st)
def test_the_split_walked_line_by_line_is_the_rule_on_the_texts_lines(text: str) -> None:
    assert markdown._split(text) == _by_lines(text)


def test_a_close_past_the_bound_is_no_frontmatter_and_one_at_it_is() -> None:
    bound = markdown.MAX_FRONTMATTER_LINES
    at_bound = "---\n" + "k: v\n" * (bound - 1) + "---\nbody"
    past = "---\n" + "k: v\n" * bound + "---\nbody"
    assert markdown._split(at_bound) == _by_lines(at_bound)
    assert markdown._split(at_bound)[1:] == ("body", bound + 2)
    assert markdown._split(past) == ([], past, 1) == _by_lines(past)
    assert markdown._split("---") == ([], "---", 1)
    assert markdown._split("---\n---") == ([], "", 3)
