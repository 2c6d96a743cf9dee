"""Queries a model sends, on real files: each gets an answer, never an error (issue 22).

A long pasted question, one of only very common words, an empty vault, a vault of one note,
a query in another script; and the ranking's promises on a small vault: every term ahead of
some, very common words neither selecting nor ranking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.notes.index import ranking, search
from fsnotes.notes.text.query import MAX_QUERY_TERMS
from fsnotes.notes.tools.models import NotesSearchResult

Make = Callable[[dict[str, str]], Server]


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Make]:
    servers: list[Server] = []

    def _make(notes: dict[str, str]) -> Server:
        root = tmp_path / f"vault{len(servers)}"
        root.mkdir()
        for rel, text in notes.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        cfg = load(
            workspaces=[str(root)],
            state_dir=str(tmp_path / f"state{len(servers)}"),
            principal="ada",
            env={},
        )
        servers.append(build(cfg))
        return servers[-1]

    yield _make
    for server in servers:
        server.close()


def ask(server: Server, query: str, limit: int | None = None) -> NotesSearchResult:
    return server.service.acting_for(server.config.principal).notes_search(
        None, query, None, None, limit
    )


def paths(found: NotesSearchResult) -> list[str]:
    return [r.path for r in found.results]


FILLER = "the of and a to in is it that for what are there"


def common_vault(count: int = ranking.COMMON_MIN_NOTES + 10) -> dict[str, str]:
    notes = {f"n{i:02d}.md": f"# Note {i}\n\n{FILLER} number{i}\n" for i in range(count)}
    notes["shed.md"] = f"# Garden shed\n\n{FILLER} a roof for the shed\n"
    notes["roof.md"] = f"# Roofing\n\n{FILLER} the roof leaks\n"
    return notes


def test_a_pasted_question_longer_than_the_term_bound_is_answered(make: Make) -> None:
    server = make(common_vault())
    question = " ".join(f"word{i}" for i in range(MAX_QUERY_TERMS + 20)) + " shed roof?"
    found = ask(server, question)
    assert paths(found)[:2] == ["shed.md", "roof.md"]  # shed and roof: the rarest words
    assert found.results[0].allTerms is False  # no note holds word0
    assert len(found.dropped) == 22 and all(t.startswith("word") for t in found.dropped)


def test_very_common_words_neither_select_nor_rank(make: Make) -> None:
    server = make(common_vault())
    found = ask(server, "what is the roof of the shed")
    assert paths(found) == ["shed.md", "roof.md"]  # 'what', 'is', 'the', 'of' select nothing
    assert sorted(found.common) == ["is", "of", "the", "what"]
    assert [r.allTerms for r in found.results] == [True, False]
    assert found.total == 2 and found.rankedAll


def test_a_query_of_only_very_common_words_is_answered(make: Make) -> None:
    server = make(common_vault())
    found = ask(server, "what is the", 50)
    assert found.total == ranking.COMMON_MIN_NOTES + 12  # every note holds them
    assert found.common == [] and all(r.allTerms for r in found.results)


def test_an_empty_vault_answers_nothing_found(make: Make) -> None:
    server = make({})
    found = ask(server, "how do I fix the shed roof")
    assert found.results == [] and found.total == 0 and found.dropped == []


def test_a_vault_of_one_note_finds_it_by_any_word(make: Make) -> None:
    server = make({"only.md": "# Only\n\nThe one note there is.\n"})
    assert paths(ask(server, "where is the only note")) == ["only.md"]
    assert ask(server, "where is the only note").results[0].allTerms is False  # 'where'
    assert ask(server, "zebra").results == []


def test_notes_holding_every_term_rank_first_then_title_matches(make: Make) -> None:
    server = make(
        {
            "a.md": "# Kettle\n\nA kettle for tea.\n",  # kettle in the title
            "b.md": "# Notes\n\nThe copper kettle is green.\n",  # both words
            "c.md": "# More\n\ncopper copper copper copper\n",
        }
    )
    found = ask(server, "copper kettle")
    assert paths(found) == ["b.md", "a.md", "c.md"]
    assert [r.allTerms for r in found.results] == [True, False, False]
    scores = [r.score for r in found.results]
    assert scores == sorted(scores, reverse=True)


FILLERS = {f"filler{i}.md": f"# Filler {i}\n\nnothing to see\n" for i in range(6)}


# A question's best notes are re-scored over more of its terms than select them or than the
# bm25 window reads (fsnotes/notes/index/search.py): a term past the bound, or one the window
# leaves out, still orders them. In each vault bm25 on the first cut's words alone puts b.md
# first (shorter, or as long and newer), and a.md holds the term that cut does not read
# (more often).
def test_a_term_past_the_bound_orders_a_questions_best_notes(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "MAX_QUERY_TERMS", 3)
    server = make(
        {
            "a.md": "# First\n\nalpha beta gamma shed words\n",
            "b.md": "# Second\n\nalpha beta gamma roof\n",
            "c.md": "# Third\n\na shed\n",
            "d.md": "# Fourth\n\nthe shed\n",
            **FILLERS,
        }
    )
    found = ask(server, "alpha beta gamma shed")
    assert found.dropped == ["shed"]  # in the most notes: not searched, no note matches by it
    assert found.total == 2
    assert paths(found) == ["a.md", "b.md"]  # but it still orders the matches


def test_a_term_the_ranking_window_leaves_out_orders_a_questions_best_notes(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ranking, "RANK_WINDOW", 6)  # alpha, beta, gamma (2 notes each)
    server = make(
        {
            "a.md": "# First\n\nalpha beta gamma delta delta\n",
            "b.md": "# Second\n\nalpha beta gamma delta words\n",  # as long: a tie without delta
            "c.md": "# Third\n\na delta\n",
            **FILLERS,
        }
    )
    found = ask(server, "alpha beta gamma delta")
    assert found.total == 3  # c.md matches (by delta) but is outside the window
    assert paths(found) == ["a.md", "b.md"]  # delta twice ranks a first


def test_notes_holding_every_term_below_the_first_cut_still_come_first(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ranking, "RESCORE_DEPTH", 1)
    server = make(
        {
            "a.md": "# First\n\nalpha alpha alpha alpha\n",
            "b.md": "# Second\n\nalpha beta gamma, and some more words to make it long\n",
            "c.md": "# Third\n\nalpha alpha beta beta\n",
        }
    )
    found = ask(server, "alpha beta gamma", 1)  # the cut: the one best by bm25, a or c
    assert paths(found) == ["b.md"] and found.results[0].allTerms
    assert found.total == 3
    found = ask(server, "alpha beta gamma", 3)  # the cut is never below the page
    assert paths(found)[0] == "b.md" and sorted(paths(found)) == ["a.md", "b.md", "c.md"]


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("Привет, мир! Заметка о саде.", "МИР сад заметка"),  # noqa: RUF001 (Cyrillic)
        ("Ο καφές είναι ζεστός.", "ΚΑΦΈΣ"),  # noqa: RUF001 (Greek: case folded, accents kept)
        ("東京 タワー の 写真", "東京"),  # CJK: a run between spaces is one word
        ("שלום עולם", "עולם"),  # Hebrew
    ],
    ids=["cyrillic", "greek", "cjk", "hebrew"],
)
def test_a_query_in_another_script_finds_its_words(make: Make, text: str, query: str) -> None:
    server = make({"other.md": f"# Other\n\n{text}\n", "latin.md": "# Latin\n\nplain words\n"})
    assert paths(ask(server, query)) == ["other.md"]


def test_cjk_without_spaces_is_one_word_an_answer_not_an_error(make: Make) -> None:
    # unicode61 does not segment CJK: a run of ideographs is one token, so part of it
    # finds nothing (the tool description names what is supported); never an error.
    server = make({"jp.md": "# 日本\n\n東京タワーの写真\n"})
    assert ask(server, "東京").results == []
    assert paths(ask(server, "東京タワーの写真")) == ["jp.md"]
