"""Search through the index equals a brute-force scan of the same files (hypothesis).

Generated vaults of a few notes on real files, generated queries (words, phrases,
prefixes, folder and tag filters); every answer of ``notes_search`` is compared with an
oracle that reads the files itself and decides each note by the documented rules
(fsnotes/notes/index/search.py): a term's document frequency is the number of notes of the
vault holding it in some text column; the rarest ``MAX_QUERY_TERMS`` terms are kept (one
no note holds counts as the commonest), the rest dropped; kept terms in more than the
very-common bound of notes do not select, unless all do; a note in scope matches when it
holds any selecting term. A word matches a token,
a phrase consecutive tokens of one column, a prefix the start of a token; a folder holds the
notes below it; a tag matches itself and its nested tags. Tokens come from SQLite's own
FTS5 tokenizer over a scratch table (the oracle tests retrieval, not the tokenizer). The
ranking's first keys are checked too: a note holding every selecting term never ranks
below one that does not, and among those alike a note with every such term in its title
(and path) never below one without; ``allTerms``, ``dropped`` and ``common`` are checked.
The term bound and the vault size from which words count as very common are lowered in
some examples (to 2 or 3 terms, to every vault) so that generated vaults reach both; at 3, a
question of 4 terms is re-scored over its dropped term too, which must still never make a
note match.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsnotes.app.config import load
from fsnotes.app.server import build
from fsnotes.notes.index import ranking
from fsnotes.notes.index import search as index_search
from fsnotes.notes.index.schema import TOKENIZER
from fsnotes.notes.text.markdown import has_tag

VOCAB = [
    "plan",
    "plans",
    "planned",
    "roof",
    "shed",
    "café",
    "cafe",
    "naïve",
    "kettle",
    "copper",
    "rain",
    "barrel",
    "and",
    "or",
    "near",
    "zinc",
]
FOLDERS: list[tuple[str, ...]] = [(), ("a",), ("a", "c"), ("b",)]
TAGS = ["x", "x/y", "z"]
TEXT_COLUMNS = ("path", "title", "body", "tags")


@dataclass(frozen=True)
class NoteSpec:
    folder: tuple[str, ...]
    title: tuple[str, ...]
    body: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Term:
    words: tuple[str, ...]
    prefix: bool = False

    def text(self) -> str:
        if self.prefix:
            return self.words[0] + "*"
        if len(self.words) > 1:
            return '"' + " ".join(self.words) + '"'
        return self.words[0]


notes_st = st.lists(
    st.builds(
        NoteSpec,
        folder=st.sampled_from(FOLDERS),
        title=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3).map(tuple),
        body=st.lists(st.sampled_from(VOCAB), max_size=12).map(tuple),
        tags=st.lists(st.sampled_from(TAGS), max_size=2, unique=True).map(tuple),
    ),
    min_size=1,
    max_size=10,
)
word_term = st.sampled_from(VOCAB).map(lambda w: Term((w,)))
phrase_term = st.tuples(st.sampled_from(VOCAB), st.sampled_from(VOCAB)).map(Term)
prefix_term = st.builds(
    lambda w, n: Term((w[: max(3, min(n, len(w)))],), prefix=True),
    st.sampled_from([w for w in VOCAB if len(w) >= 3]),  # prefixes need 3 letters
    st.integers(min_value=3, max_value=5),
)
query_st = st.tuples(
    st.lists(st.one_of(word_term, phrase_term, prefix_term), min_size=1, max_size=4),
    st.sampled_from([None, "a", "a/c", "b"]),
    st.sampled_from([None, "x", "x/y", "z"]),
)


class Tokenizer:
    """FTS5's tokenizer (the index's configuration) over a scratch in-memory table."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE t USING fts5(c, tokenize='{TOKENIZER}')")
        self.db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        self.cache: dict[str, list[str]] = {}

    def __call__(self, text: str) -> list[str]:
        if text not in self.cache:
            self.db.execute("DELETE FROM t")
            self.db.execute("INSERT INTO t(rowid, c) VALUES (1, ?)", (text,))
            rows = self.db.execute("SELECT term, offset FROM v ORDER BY offset").fetchall()
            self.cache[text] = [term for term, _offset in rows]
        return self.cache[text]


def fold(prefix: str) -> str:
    """Case and diacritics folded (what is left of a prefix the tokenizer drops)."""
    decomposed = unicodedata.normalize("NFD", prefix.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def note_text(spec: NoteSpec) -> str:
    lines = []
    if spec.tags:
        lines += ["---", f"tags: [{', '.join(spec.tags)}]", "---"]
    lines += [f"# {' '.join(spec.title)}", "", " ".join(spec.body), ""]
    return "\n".join(lines)


def columns_of(parts: tuple[str, ...], spec: NoteSpec, text: str) -> dict[str, str]:
    body = text.split("---\n", 2)[-1] if spec.tags else text
    stem = parts[-1].rsplit(".", 1)[0]
    return {
        "path": " / ".join((*parts[:-1], stem)),
        "title": " ".join(spec.title),
        "body": body,
        "tags": " ".join(spec.tags),
    }


def term_matches(term: Term, tokens: list[str], tokenize: Tokenizer) -> bool:
    if term.prefix:
        # FTS5 runs the prefix through the tokenizer too (folded, and stemmed: 'plans*'
        # looks for words whose stem starts with 'plan').
        [want] = tokenize(term.words[0]) or [fold(term.words[0])]
        return any(t.startswith(want) for t in tokens)
    phrase = [tok for word in term.words for tok in tokenize(word)]
    if not phrase:
        return False
    n = len(phrase)
    return any(tokens[i : i + n] == phrase for i in range(len(tokens) - n + 1))


@dataclass
class Vault:
    root: Path
    notes: dict[str, tuple[tuple[str, ...], NoteSpec, str]]  # path -> (parts, spec, text)


@pytest.fixture
def scratch() -> Iterator[Path]:
    # hypothesis runs many examples per test: one fresh directory each, made here.
    base = Path(tempfile.mkdtemp(prefix="fsnotes-prop-"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def make_vault(base: Path, specs: list[NoteSpec]) -> Vault:
    root = base / "vault"
    if root.exists():
        shutil.rmtree(root)
    notes = {}
    for i, spec in enumerate(specs):
        parts = (*spec.folder, f"note{i}.md")
        path = root.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = note_text(spec)
        path.write_text(text)
        notes["/".join(parts)] = (parts, spec, text)
    return Vault(root, notes)


def oracle(
    vault: Vault,
    terms: list[Term],
    folder: str | None,
    tag: str | None,
    tokenize: Tokenizer,
    max_terms: int,
    common_min_notes: int,
) -> tuple[dict[str, tuple[bool, int]], list[str], list[str]]:
    """path -> (holds every selecting term, title/path tier) of the expected matches, and
    the dropped and common terms (as typed), by the rules of the module docstring."""
    distinct = list(dict.fromkeys(terms))
    columns = {
        path: {c: tokenize(v) for c, v in columns_of(parts, spec, text).items()}
        for path, (parts, spec, text) in vault.notes.items()
    }

    def holds(path: str, term: Term) -> bool:
        return any(term_matches(term, toks, tokenize) for toks in columns[path].values())

    df = [sum(holds(path, t) for path in columns) for t in distinct]
    n = len(columns)
    bound = None if n < common_min_notes else min(int(n * ranking.COMMON_SHARE), 10_000)
    # Notes are counted up to one past the very-common bound (search.plan: a common word
    # costs at most that many rowids), so terms past it tie, and keep the order typed.
    weighed = [d if bound is None else min(d, bound + 1) for d in df]
    order = sorted(range(len(distinct)), key=lambda i: (df[i] == 0, weighed[i], i))
    kept = order[:max_terms]
    dropped = [distinct[i].text() for i in sorted(order[max_terms:])]
    common = [i for i in kept if bound is not None and df[i] > bound]
    selecting = [i for i in kept if i not in common] or kept
    if len(selecting) == len(kept):
        common = []
    expected: dict[str, tuple[bool, int]] = {}
    for path, (_parts, spec, _text) in vault.notes.items():
        if folder and not path.startswith(folder + "/"):
            continue
        if tag and not has_tag(list(spec.tags), tag):
            continue
        held = [holds(path, distinct[i]) for i in selecting]
        if any(held):
            tier = sum(
                all(term_matches(distinct[i], columns[path][c], tokenize) for i in selecting)
                for c in ("title", "path")
            )
            expected[path] = (all(held), tier)
    return expected, dropped, [distinct[i].text() for i in sorted(common)]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    specs=notes_st,
    queries=st.lists(query_st, min_size=1, max_size=6),
    bound=st.sampled_from([2, 3, None]),
    common_everywhere=st.booleans(),
)
def test_search_results_equal_a_brute_force_scan(
    scratch: Path,
    specs: list[NoteSpec],
    queries: list[tuple[list[Term], str | None, str | None]],
    bound: int | None,
    common_everywhere: bool,
) -> None:
    vault = make_vault(scratch, specs)
    state = scratch / "state"
    shutil.rmtree(state, ignore_errors=True)
    max_terms = bound or index_search.MAX_QUERY_TERMS
    common_min = 1 if common_everywhere else ranking.COMMON_MIN_NOTES
    saved = (index_search.MAX_QUERY_TERMS, ranking.COMMON_MIN_NOTES)
    index_search.MAX_QUERY_TERMS, ranking.COMMON_MIN_NOTES = max_terms, common_min
    server = build(load(workspaces=[str(vault.root)], state_dir=str(state), principal="p", env={}))
    tokenize = Tokenizer()
    try:
        for terms, folder, tag in queries:
            query = " ".join(t.text() for t in terms)
            expected, dropped, common = oracle(
                vault, terms, folder, tag, tokenize, max_terms, common_min
            )
            found = server.service.acting_for(server.config.principal).notes_search(
                None, query, folder, tag, 50
            )
            paths = [r.path for r in found.results]
            assert set(paths) == set(expected), (query, folder, tag)
            assert found.total == len(expected)
            assert (found.dropped, found.common) == (dropped, common), query
            assert [r.allTerms for r in found.results] == [expected[p][0] for p in paths]
            keys = [expected[p] for p in paths]
            assert keys == sorted(keys, reverse=True), (query, paths, keys)
    finally:
        server.close()
        index_search.MAX_QUERY_TERMS, ranking.COMMON_MIN_NOTES = saved
