"""The ATX headings of a note (fsnotes/notes/text/markdown.py's ``atx_headings``, which tries
its pattern only at the start of lines holding a '#') are exactly the pattern's matches
anywhere in the text, on random texts (hypothesis) made of the pieces that decide them:
runs of '#', blanks, tabs, carriage returns, line ends and words."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fsnotes.notes.text import markdown

INDENTS = ["", " ", "   ", "    ", "\t"]
RUNS = ["", "#", "##", "######", "#######"]
GAPS = ["", " ", "\t", "  "]
WORDS = ["a", "b c", "é", "#x", "#", " #", "\r", " "]
ENDS = ["\n", "\r\n", "\r", "\n\n"]

line_st = st.tuples(
    st.sampled_from(INDENTS),
    st.sampled_from(RUNS),
    st.sampled_from(GAPS),
    st.lists(st.sampled_from(WORDS), max_size=4),
    st.sampled_from(ENDS),
).map(lambda t: t[0] + t[1] + t[2] + "".join(t[3]) + t[4])
text_st = st.tuples(st.lists(line_st, max_size=12), st.booleans()).map(
    lambda t: "".join(t[0]).rstrip("\r\n") if t[1] else "".join(t[0])
)


def _everywhere(prose: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2).strip()) for m in markdown._HEADING.finditer(prose)]


@settings(max_examples=1000, deadline=None)
@given(text_st)
def test_headings_tried_at_line_starts_are_the_patterns_matches_anywhere(prose: str) -> None:
    assert markdown.atx_headings(prose) == _everywhere(prose)


def test_headings_of_the_kinds_a_note_holds() -> None:
    prose = "# Title\ntext #tag\n   ## Two ##\n    # code, not a heading\n#nope\n###### Six\n"
    assert markdown.atx_headings(prose) == [("#", "Title"), ("##", "Two"), ("######", "Six")]
    assert markdown.atx_headings("no heading # here") == []
    assert markdown.atx_headings("") == []
