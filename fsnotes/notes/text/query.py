"""Search queries: what a person or model types, parsed into terms and turned into FTS5.

The syntax (also in the ``notes_search`` tool description):

* a query is a ranked any-word search: ``shed roof`` finds notes holding either word, the
  ones holding both (and those with the words in their title) first; how terms are chosen
  and ranked (very common words, the term bound) is fsnotes/notes/index/search.py's;
* ``"quoted phrases"`` match those words in that order, next to each other;
* ``prefix*`` matches every word starting with ``prefix`` (at least
  :data:`MIN_PREFIX_CHARS` letters or digits);
* matching ignores case and diacritics (``cafe`` finds ``Café``) and English word endings
  (FTS5's Porter stemmer: ``plan`` finds ``planned`` and ``plans``); punctuation separates
  words (``foo-bar`` is the phrase ``"foo bar"``).

Nothing else is syntax: ``AND``, ``OR``, ``NEAR``, ``-``, ``^``, ``:``, parentheses are
words or punctuation like any other. User input never reaches SQL as text: every term is
rendered as an FTS5 string (``"..."``, with ``"`` doubled) and the whole expression is
bound as a parameter.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field, replace

# Terms searched at most: each is one doclist to read. A longer query is not refused: the
# search keeps this many of its most distinctive terms and says which it dropped.
MAX_QUERY_TERMS = 32
# ``ab*`` would expand to a large share of the vocabulary (240 ms for "ka*" at 100k notes,
# against 8 ms for "kal*", measured with a three-letter prefix index; the index has none
# now: "kal*" 44 ms, "kalo*" 22 ms, docs/search.md).
MIN_PREFIX_CHARS = 3
# A term typed several times weighs that many times in the ranking (a question names its
# subject more than once: on the CISI questions, nDCG@10 0.31 -> 0.38), up to this many:
# each repeat is one more reading of the term's doclist.
MAX_TERM_REPEATS = 4


class QueryError(ValueError):
    """A query that cannot be searched; the message is one sentence with a hint."""


@dataclass(frozen=True)
class Term:
    text: str  # as typed, without quotes or the trailing '*'
    phrase: bool = False
    prefix: bool = False
    # How many times the query holds it (up to MAX_TERM_REPEATS); not part of its identity.
    repeats: int = field(default=1, compare=False)

    def key(self) -> tuple[str, bool, bool]:
        """What makes two terms the same search (case folded: ``Shed`` is ``shed``)."""
        return (" ".join(words_in(self.text)).casefold(), self.phrase, self.prefix)

    def typed(self) -> str:
        """The term in the query syntax (``"a phrase"``, ``prefix*``), to name it back."""
        if self.prefix:
            return self.text + "*"
        return f'"{self.text}"' if self.phrase else self.text

    def fts(self) -> str:
        # FTS5 reads its expression up to the first NUL: one inside a string would leave it
        # unterminated (an SQLite error). NUL separates words like a space, so it becomes one.
        quoted = '"' + self.text.replace('"', '""').replace("\x00", " ") + '"'
        return quoted + "*" if self.prefix else quoted


def _is_word_char(ch: str) -> bool:
    # FTS5's unicode61 tokenizer: letters, numbers and private-use characters make tokens
    # (its default "L* N* Co" categories); everything else separates them.
    category = unicodedata.category(ch)
    return category[0] in "LN" or category == "Co"


def words_in(text: str) -> list[str]:
    """The tokens FTS5 would see in ``text`` (case and diacritics not folded)."""
    out: list[str] = []
    current: list[str] = []
    for ch in text:
        if _is_word_char(ch):
            current.append(ch)
        elif unicodedata.category(ch).startswith("M") and current:
            current.append(ch)  # a combining mark continues the word it decorates
        elif current:
            out.append("".join(current))
            current = []
    if current:
        out.append("".join(current))
    return out


def parse(query: str) -> list[Term]:
    """The distinct terms of ``query``, in the order typed; :class:`QueryError` when nothing
    searchable remains. Any number of terms: choosing which to search is the search's.

    Private-use characters are dropped first: the index marks its own folder and tag words
    with one (fsnotes/notes/index/noteindex.py scope_token), and no query may reach those.
    """
    # Control characters (NUL among them, which would end a string inside FTS5) separate
    # words, as they do in a note.
    query = "".join(
        " " if category == "Cc" else ch
        for ch in query
        if (category := unicodedata.category(ch)) != "Co"
    )
    terms: list[Term] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch.isspace():
            i += 1
            continue
        if ch == '"':
            end = query.find('"', i + 1)
            if end < 0:
                end = n  # an unclosed quote runs to the end: the phrase the person meant
            text = query[i + 1 : end]
            i = end + 1
            if words_in(text):
                terms.append(Term(text, phrase=len(words_in(text)) > 1))
            continue
        end = i
        while end < n and not query[end].isspace() and query[end] != '"':
            end += 1
        word = query[i:end]
        i = end
        prefix = word.endswith("*")
        text = word.rstrip("*") if prefix else word
        tokens = words_in(text)
        if not tokens:
            continue
        # Only the last token of 'foo-ba*' is a prefix; FTS5 applies '*' to a phrase's last
        # token, which is the same thing.
        if prefix and len(tokens[-1]) < MIN_PREFIX_CHARS:
            raise QueryError(
                f"The prefix '{word}' is too short; give at least {MIN_PREFIX_CHARS} "
                "letters before '*'."
            )
        terms.append(Term(text, phrase=len(tokens) > 1, prefix=prefix))
    if not terms:
        raise QueryError(
            "The query has no words to search for; use letters or digits, "
            '"quoted phrases" or prefix*.'
        )
    distinct: dict[tuple[str, bool, bool], Term] = {}
    for term in terms:
        first = distinct.setdefault(term.key(), term)
        if first is not term:
            distinct[term.key()] = replace(first, repeats=min(first.repeats + 1, MAX_TERM_REPEATS))
    return list(distinct.values())


def to_match(
    terms: list[Term], columns: tuple[str, ...] = (), op: str = "AND", weighted: bool = False
) -> str:
    """The FTS5 MATCH expression: every term quoted, joined by ``op`` (``AND`` or ``OR``);
    within ``columns`` if given (column names are ours, never the caller's). ``weighted``
    (with OR): each term as many times as it was typed, which FTS5's bm25 adds up."""
    if op not in ("AND", "OR"):
        raise ValueError(op)
    expr = f" {op} ".join(t.fts() for t in terms for _ in range(t.repeats if weighted else 1))
    return f"{{{' '.join(columns)}}} : ({expr})" if columns else expr
