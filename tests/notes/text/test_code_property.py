"""What is code (fsnotes/notes/text/code.py) agrees with a CommonMark parser on random
documents (hypothesis): lines made of container and indentation prefixes (list markers,
block quotes, four spaces, tabs, fences, headings, breaks) and inline pieces (wikilinks,
code spans of one to three backticks, unpaired and escaped backticks), and the links the
parser finds are exactly those CommonMark leaves outside code.

One case is left out: a '>' after four columns of indentation. CommonMark (the spec, and its
reference implementation) reads such a line as indented code, or as a lazy paragraph line;
markdown-it-py, the oracle here, continues the block quote on it.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.notes.text.test_links_property import commonmark_links, parsed_links

PREFIXES = [
    *("", "    ", "\t", "  ", "   ", "      ", "  \t"),
    *("- ", "* ", "1. ", "2) ", "> ", ">", "  - ", ">     ", "-     ", "1.     "),
    *("```", "~~~", "````", "# ", "---", "===", "text "),
]
PIECES = [
    *("[[a]]", "`[[b]]`", "``[[c]]``", "```[[d]]```", "`` ` [[e]] ``", "``[[f]]`"),
    *("`", "``", "x", "\\`[[g]]`", "[[h]]", "![[i]]"),
]
# markdown-it-py's one departure from CommonMark that these documents can hit (see above).
_QUIRK = re.compile(r"^[ \t>]*(?:\t| {4})[ \t]*>", re.MULTILINE)

line_st = st.one_of(
    st.just(""),
    st.tuples(
        st.lists(st.sampled_from(PREFIXES), max_size=2),
        st.lists(st.sampled_from(PIECES), max_size=3),
    ).map(lambda t: "".join(t[0]) + " ".join(t[1])),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(lines=st.lists(line_st, min_size=1, max_size=10))
def test_links_are_what_commonmark_leaves_outside_code(lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    assume(not _QUIRK.search(text))
    assert parsed_links(text) == commonmark_links(text), text
