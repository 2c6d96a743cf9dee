"""The query parser: what a caller types becomes quoted FTS5 terms, never syntax."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsnotes.notes.index.schema import TOKENIZER
from fsnotes.notes.text.query import (
    MAX_QUERY_TERMS,
    MAX_TERM_REPEATS,
    QueryError,
    Term,
    parse,
    to_match,
)


def test_words_phrases_and_prefixes() -> None:
    assert parse('shed "copper kettle" roo*') == [
        Term("shed"),
        Term("copper kettle", phrase=True),
        Term("roo", prefix=True),
    ]
    assert to_match(parse('a1 "b c" def*')) == '"a1" AND "b c" AND "def"*'


def test_quotes_inside_terms_are_doubled_and_an_open_quote_runs_to_the_end() -> None:
    assert to_match(parse('say"hi')) == '"say" AND "hi"'
    assert to_match(parse('"unclosed phrase')) == '"unclosed phrase"'
    assert Term('a"b').fts() == '"a""b"'


def test_operators_are_words() -> None:
    assert (
        to_match(parse("NOT x OR y NEAR z")) == '"NOT" AND "x" AND "OR" AND "y" AND "NEAR" AND "z"'
    )


@pytest.mark.parametrize("query", ["", "   ", "***", "()", '""', "-", "\x00", "\ue000"])
def test_nothing_to_search_is_a_query_error(query: str) -> None:
    with pytest.raises(QueryError, match="no words"):
        parse(query)


def test_a_short_prefix_is_refused_with_the_minimum() -> None:
    with pytest.raises(QueryError, match="at least 3"):
        parse("ab*")


def test_any_number_of_terms_is_parsed_and_repeats_are_one_term() -> None:
    # The search keeps the most distinctive MAX_QUERY_TERMS (fsnotes.notes.index.search).
    terms = parse(" ".join(f"w{i}" for i in range(MAX_QUERY_TERMS + 1)) + ' W0 w1 "w2"')
    assert [t.text for t in terms] == [f"w{i}" for i in range(MAX_QUERY_TERMS + 1)]
    assert [t.repeats for t in terms[:4]] == [2, 2, 2, 1]  # typed twice: weighs twice
    assert to_match(terms[:2], op="OR", weighted=True) == '"w0" OR "w0" OR "w1" OR "w1"'
    assert parse("x " * 10)[0].repeats == MAX_TERM_REPEATS


@given(st.text(max_size=60))
def test_any_text_becomes_an_expression_fts5_accepts_or_a_query_error(text: str) -> None:
    try:
        match = to_match(parse(text))
    except QueryError:
        return
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(a, tokenize='{TOKENIZER}')")
    db.execute("INSERT INTO t VALUES ('some words')")
    db.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall()  # never raises
