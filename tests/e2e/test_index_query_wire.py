"""What a query may contain and what the limits allow, on the wire (issues 10 and 11), with
a real `fsnotes serve`:

* FTS5 operators and punctuation in a query are words or separators: a query either
  returns results or is a one-sentence error with a hint, never an SQLite message (a query
  of any number of terms is answered); FTS5 syntax inside a note is just text, searchable
  by its words. A query is an any-word search: which notes hold *every* term (``allTerms``)
  shows how each operator was read.
* What can be created can be listed, searched, offered for delete-by-title and read as a
  resource, up to the deepest path a client may send; a folder deeper than that is skipped
  with a count in the result, never a failure; resources/list never hides a failure as an
  empty list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from e2e.index_wire import (
    SQLITE_WORDS,
    assert_no_sqlite_text,
    call,
    found,
    found_all,
    listed,
    ok,
    search,
    wait_complete,
)
from e2e.wire import Wire, meta
from sandbox.uri import MAX_DEPTH

SYNTAX_NOTE = (
    "# NEAR(x) OR title:y\n"
    'Use AND OR NOT NEAR(alpha beta) "quoted" title:sneaky ^caret -minus {col} a*b '
    "(paren) + plus\n"
)


@pytest.fixture(scope="module")
def syntax_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    base = tmp_path_factory.mktemp("syntax")
    ws = base / "notes"
    ws.mkdir()
    (ws / "syntax.md").write_text(SYNTAX_NOTE)
    (ws / "plain.md").write_text("# Plain\nalpha beta gamma\n")
    w = Wire(ws, base / "state")
    wait_complete(w)
    yield w
    err = w.close()
    assert "damaged" not in err and "rebuilding" not in err, err


# query -> the notes holding all its terms: every operator or punctuation is a word or a
# separator.
AS_WORDS = {
    "AND": ["syntax.md"],
    "OR": ["syntax.md"],
    "NOT": ["syntax.md"],
    "NEAR": ["syntax.md"],
    "NEAR(alpha beta)": ["syntax.md"],  # the words near, alpha, beta
    "NEAR(alpha beta, 2)": [],  # ... and the word 2, which no note holds
    "NOT alpha": ["syntax.md"],  # not a negation: plain.md lacks the word 'not'
    "alpha NOT": ["syntax.md"],
    "alpha OR": ["syntax.md"],
    "OR alpha": ["syntax.md"],
    "alpha AND NOT beta": ["syntax.md"],
    "(alpha OR beta)": ["syntax.md"],
    "a*b": ["syntax.md"],  # the phrase 'a b'
    "title:sneaky": ["syntax.md"],  # no column filter: the phrase 'title sneaky'
    "body:x": [],
    "{title}:x": [],
    "{title body} : alpha": [],
    "^caret": ["syntax.md"],
    "^x": ["syntax.md"],  # x is in the title NEAR(x)
    "-minus": ["syntax.md"],  # not an exclusion
    "-x": ["syntax.md"],
    "{x}": ["syntax.md"],
    "+plus": ["syntax.md"],
    '"a" + "b"': ["syntax.md"],
    '"unbalanced': [],
    'unbalanced"': [],
    'al"pha': [],
    '"alpha beta"*': ["plain.md", "syntax.md"],
    "alpha*****": ["plain.md", "syntax.md"],
    "*alpha": ["plain.md", "syntax.md"],
    "NEAR/3": [],
    "alpha NEAR/2 beta": [],
    "rowid": [],
    "fts": [],
    "scope": [],
    "MATCH": [],
    "SELECT * FROM notes": [],
    "'; DROP TABLE notes; --": [],
    "\ue000f123": [],  # the index's private mark is dropped from what a caller types
    "a\x00b": ["syntax.md"],  # NUL separates words like any other punctuation
    "alpha\x00": ["plain.md", "syntax.md"],
    "x" * 500: [],
}
# Queries with nothing to search for: one sentence with a hint.
NO_WORDS = ['"', '""', '"""', "*", "**", ":", "(", ")", "()", "+", "-", "'", "''", "\\"]
NO_WORDS += ["!@#$%^&*()", "...", "\x00", "\u0301", "\u200b", "\u3000", "\U0001f642"]


def _short(query: str) -> str:
    return ascii(query)[:40]


def _sentence(text: str) -> None:
    assert "\n" not in text and text.endswith(".") and len(text) < 200, text
    assert not SQLITE_WORDS.search(text), text


@pytest.mark.parametrize("query", list(AS_WORDS), ids=_short)
def test_fts_syntax_in_a_query_is_searched_as_words(syntax_server: Wire, query: str) -> None:
    assert found_all(syntax_server, query) == AS_WORDS[query]
    assert_no_sqlite_text(syntax_server)


@pytest.mark.parametrize("query", NO_WORDS, ids=_short)
def test_a_query_of_only_punctuation_is_a_one_sentence_error(
    syntax_server: Wire, query: str
) -> None:
    result = call(syntax_server, "notes_search", {"query": query})["result"]
    assert result["isError"] is True, result
    text = result["content"][0]["text"]
    _sentence(text)
    assert "no words to search for" in text and "quoted phrases" in text, text


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("a*", "too short"),
        ("é*", "too short"),
    ],
    ids=["short-prefix", "short-accented-prefix"],
)
def test_a_query_that_cannot_be_searched_says_why_in_one_sentence(
    syntax_server: Wire, query: str, says: str
) -> None:
    result = call(syntax_server, "notes_search", {"query": query})["result"]
    assert result["isError"] is True, result
    _sentence(result["content"][0]["text"])
    assert says in result["content"][0]["text"]


def test_a_query_of_more_terms_than_the_bound_is_answered_naming_the_dropped(
    syntax_server: Wire,
) -> None:
    words = [f"w{i}" for i in range(40)]
    info = search(syntax_server, " ".join(["alpha", *words, "gamma"]))
    assert [hit["path"] for hit in info["results"]] == ["plain.md", "syntax.md"]  # 2 terms, 1
    # Kept: alpha and gamma first (terms no note holds count as the commonest), 30 w's.
    assert info["results"][0]["allTerms"] is False  # no note holds w0
    assert len(info["dropped"]) == 10 and set(info["dropped"]) <= set(words)
    assert_no_sqlite_text(syntax_server)


def test_a_query_over_4000_characters_is_refused_clearly(syntax_server: Wire) -> None:
    result = call(syntax_server, "notes_search", {"query": "a" * 4001})["result"]
    assert result["isError"] is True
    assert "at most 4000 characters" in result["content"][0]["text"]
    assert_no_sqlite_text(syntax_server)


def test_a_query_never_damages_the_index(syntax_server: Wire) -> None:
    # Every query above ran against one index: it was never judged damaged and rebuilt (the
    # fixture checks the log at the end), and a search still finds what it found at first.
    for query in [*AS_WORDS, *NO_WORDS]:
        call(syntax_server, "notes_search", {"query": query})
    info = search(syntax_server, "alpha")
    assert info["index"] == {
        "complete": True,
        "indexedNotes": 2,
        "skippedFolders": 0,
        "message": None,
    }
    assert_no_sqlite_text(syntax_server)


def test_fts_syntax_in_a_note_is_just_text(syntax_server: Wire) -> None:
    for word in ["near", "sneaky", "caret", "minus", "col", "paren", "plus", "quoted"]:
        assert found(syntax_server, word) == ["syntax.md"], word
    assert found(syntax_server, '"NEAR(alpha beta)"') == ["syntax.md"]  # a phrase of it
    assert found(syntax_server, '"title:sneaky ^caret"') == ["syntax.md"]
    titles = {n["path"]: n["title"] for n in ok(syntax_server, "notes_list", {})["notes"]}
    assert titles["syntax.md"] == "NEAR(x) OR title:y"
    for tag in ['a" OR "b', "*", "{scope}", "x" * 300]:
        body = search(syntax_server, "alpha", tag=tag)
        assert body["results"] == [], (tag, body)
    assert_no_sqlite_text(syntax_server)


# --- depth ---------------------------------------------------------------------------------

FORM: dict[str, Any] = {"elicitation": {"form": {}}}


def _deep(depth: int, name: str) -> str:
    return "/".join(["d"] * (depth - 1) + [name])


def _delete_candidates(w: Wire, ws: Path, title: str) -> list[str]:
    response = w.call(
        "tools/call",
        {
            "_meta": meta(FORM),
            "name": "notes_delete",
            "arguments": {"workspaceUri": ws.as_uri(), "title": title},
        },
    )
    result = response["result"]
    assert result.get("resultType") == "input_required", result
    ((_key, request),) = result["inputRequests"].items()
    schema = request["params"]["requestedSchema"]["properties"]["note_id"]
    return [option["const"] for option in schema["oneOf"]]


def test_a_note_created_at_depth_70_or_at_the_limit_is_listed_searched_deletable_and_a_resource(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "notes"
    ws.mkdir()
    (ws / "top.md").write_text("# Top\nshallow\n")
    state = tmp_path / "state"
    paths = {70: _deep(70, "deep70.md"), MAX_DEPTH: _deep(MAX_DEPTH, "deepmax.md")}
    w = Wire(ws, state)
    try:
        wait_complete(w)
        for depth, rel in paths.items():
            created = ok(
                w,
                "notes_create",
                {"path": rel, "content": f"# Abyss {depth}\nabyssword{depth}\n"},
            )
            assert created["path"] == rel
        _reachable(w, ws, paths)
    finally:
        w.close()
    # And a fresh index, built by the scan (not by the server's own writes), agrees.
    w = Wire(ws, tmp_path / "state2")
    try:
        assert wait_complete(w)["skippedFolders"] == 0
        _reachable(w, ws, paths)
    finally:
        w.close()


def _reachable(w: Wire, ws: Path, paths: dict[int, str]) -> None:
    everything = listed(w)
    assert sorted(everything) == sorted([*paths.values(), "top.md"]), everything
    for depth, rel in paths.items():
        assert found(w, f"abyssword{depth}") == [rel]
        assert _delete_candidates(w, ws, f"Abyss {depth}") == [rel]
    resources = w.call("resources/list", {"_meta": meta()})["result"]["resources"]
    assert sorted(r["name"] for r in resources) == sorted(everything)
    for depth, rel in paths.items():
        uri = (ws / rel).as_uri()
        read = w.call("resources/read", {"_meta": meta(), "uri": uri})
        assert read["result"]["contents"][0]["text"] == f"# Abyss {depth}\nabyssword{depth}\n"
    assert_no_sqlite_text(w)


def test_a_folder_deeper_than_the_limit_is_skipped_and_counted_never_an_error(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "notes"
    ws.mkdir()
    (ws / "top.md").write_text("# Top\ntrenchword\n")
    # Made outside the server: a chain of folders past the limit, notes along it.
    chain = ws.joinpath(*["e"] * (MAX_DEPTH + 5))
    chain.mkdir(parents=True)
    (chain / "unreachable.md").write_text("# Too deep\ntrenchword\n")
    (ws.joinpath(*["e"] * 10) / "shallow.md").write_text("# Shallow\ntrenchword\n")
    w = Wire(ws, tmp_path / "state")
    try:
        info = wait_complete(w)
        assert info["skippedFolders"] >= 1, info
        assert "not indexed" in info["message"], info
        body = ok(w, "notes_list", {})
        assert body["index"]["skippedFolders"] >= 1
        shallow = "/".join(["e"] * 10 + ["shallow.md"])
        assert sorted(n["path"] for n in body["notes"]) == [shallow, "top.md"]
        hits = search(w, "trenchword")
        assert hits["index"]["skippedFolders"] >= 1
        assert sorted(h["path"] for h in hits["results"]) == [shallow, "top.md"]
        resources = w.call("resources/list", {"_meta": meta()})["result"]["resources"]
        assert len(resources) == 2
        assert_no_sqlite_text(w)
    finally:
        w.close()


def test_resources_list_with_an_unusable_index_is_an_error_not_an_empty_list(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "notes"
    ws.mkdir()
    (ws / "a.md").write_text("# A\nhello\n")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "index").write_text("not a folder\n")  # where the index folder must go
    w = Wire(ws, state)
    try:
        response = w.call("resources/list", {"_meta": meta()})
        assert "result" not in response, response
        assert response["error"]["code"] == -32603
        assert "search index cannot be opened" in response["error"]["message"]
        assert str(state) not in response["error"]["message"]
        listing = call(w, "notes_list", {})["result"]
        assert listing["isError"] is True and "search index" in listing["content"][0]["text"]
        assert_no_sqlite_text(w)
    finally:
        w.close()
