"""notes_links and backlinks equal a brute-force parse of the vault, and a move with
updateLinks leaves every link naming what it named before (hypothesis).

Generated vaults of a few notes (names that collide by case, by extension and across
folders; every link form: names, suffixes, extensions, headings, aliases, embeds, relative
wikilinks, Markdown paths encoded or in angle brackets, attachments, links out of the
workspace), each placed in a block of its own: a paragraph, indented code (four spaces or a
tab), a paragraph's lazy continuation or a list item's (not code), indented code in a list
item or a block quote, a fenced block, and code spans of one to three backticks (with
shorter runs inside, or left unclosed). The oracle reads the files itself and resolves each
link by the documented rule with its own string arithmetic (``posixpath`` and suffix
comparisons); which links are links at all is checked against a CommonMark parser's tokens
(markdown-it-py: text outside its code tokens), and a move must leave every code token of
every note as it was.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.notes.text.links import ATTACHMENT_EXTENSIONS, Occurrence, occurrences
from fsnotes.notes.text.markdown import split_frontmatter
from fsnotes.notes.tools import linkservice

FOLDERS: list[tuple[str, ...]] = [(), ("a",), ("a", "b"), ("B",)]
STEMS = ["x", "X", "y", "my note", "v1.2"]
EXTS = [".md", ".txt"]
NOTE_EXTS = (".md", ".markdown", ".txt")
FORMS = [
    "name",
    "name_ext",
    "suffix",
    "full",
    "slash",
    "wiki_rel",
    "md_rel",
    "md_angle",
    "md_noext",
    "md_outside",
    "attachment",
    "md_image",
    "code",
]
# Where a link is written: each a block of its own (blocks are apart by a blank line). The
# '{}' is the link.
PLACES = {
    "paragraph": "{}",
    "indented": "    {}",
    "tab": "\t{}",
    "lazy": "text\n    {}",
    "item": "- item\n\n    {}",
    "item_code": "- item\n\n      {}",
    "ordered_code": "1. item\n\n       {}",
    "quote_code": "> quote\n>\n>     {}",
    "fence": "```\n{}\n```",
    "long_fence": "````\n```\n{}\n````",
    "span": "`{}`",
    "span2": "a ``{}``",
    "span3": "a ```{}```",
    "span_inner": "`` a ` {} ` b ``",
    "span_unclosed": "``{}` b",
    "span_lines": "`a\n{}` b",
}
Spec = tuple[str, tuple[str, ...], str, str, str, str, bool, str]

link_st = st.tuples(
    st.sampled_from(FORMS),
    st.sampled_from(FOLDERS),
    st.sampled_from(STEMS),
    st.sampled_from(EXTS),
    st.sampled_from(["", "#h", "|al", "#h|al"]),
    st.sampled_from(["same", "upper", "lower"]),
    st.booleans(),
    st.sampled_from(list(PLACES)),
)
note_st = st.tuples(
    st.sampled_from(FOLDERS),
    st.sampled_from(STEMS),
    st.sampled_from(EXTS),
    st.lists(link_st, max_size=5),
)
vault_st = st.lists(note_st, min_size=1, max_size=7, unique_by=lambda n: (n[0], n[1], n[2]))


def _case(text: str, how: str) -> str:
    return text.upper() if how == "upper" else text.lower() if how == "lower" else text


def link_text(holder: tuple[str, ...], spec: Spec) -> str:
    return PLACES[spec[7]].format(link_form(holder, spec))


def link_form(holder: tuple[str, ...], spec: Spec) -> str:
    form, folder, stem, ext, deco, case, embed, _place = spec
    bang = "!" if embed else ""
    path = "/".join((*folder, stem))
    rel = posixpath.relpath(path, "/".join(holder) or ".")
    wiki = {
        "name": stem,
        "name_ext": stem + ext,
        "suffix": "/".join((*folder[-1:], stem)),
        "full": path,
        "slash": "/" + path,
        "wiki_rel": rel if rel.startswith("../") else "./" + rel,
    }
    if form in wiki:
        return f"{bang}[[{_case(wiki[form], case)}{deco}]]"
    if form == "md_rel":
        return f"{bang}[t]({(rel + ext).replace(' ', '%20')}{deco[:2] if '#' in deco else ''})"
    if form == "md_angle":
        return f"{bang}[t](<{rel + ext}>)"
    if form == "md_noext":
        return f"[t]({rel.replace(' ', '%20')})"
    if form == "md_outside":
        return "[t](" + "../" * (len(holder) + 1) + "z.md)"
    if form == "attachment":
        return f"![[{stem}.png]]"
    if form == "md_image":
        return f"![i]({posixpath.relpath('/'.join((*folder, 'p.png')), '/'.join(holder) or '.')})"
    return f"`[[{stem}]]`"


def make_vault(base: Path, notes: list[tuple[tuple[str, ...], str, str, list[Spec]]]) -> Path:
    root = base / "vault"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for folder, stem, ext, specs in notes:
        path = root.joinpath(*folder, stem + ext)
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "\n\n".join(link_text(folder, spec) for spec in specs)
        path.write_text(f"# {stem}\n\n{body}\n")
    return root


# --- the oracle --------------------------------------------------------------------------


def is_note_name(name: str) -> bool:
    low = name.casefold()
    return any(low.endswith(e) and len(low) > len(e) for e in NOTE_EXTS)


def strip_ext(name: str) -> str:
    dot = name.rfind(".")
    return name[:dot] if dot > 0 else name


def is_attachment(name: str) -> bool:
    dot = name.rfind(".")
    return dot > 0 and name[dot + 1 :].casefold() in ATTACHMENT_EXTENSIONS


def first(hits: list[str]) -> str | None:
    return min(hits, key=lambda n: (n.count("/"), n.split("/"))) if hits else None


def vault_notes(root: Path) -> dict[str, str]:
    """Every note on disk (its '/'-path) and its text, read straight from the files."""
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and is_note_name(p.name)
    }


def by_path(text: str, holder: str, notes: list[str]) -> tuple[str, str | None]:
    norm = posixpath.normpath(posixpath.join(posixpath.dirname(holder), text))
    if norm == ".." or norm.startswith("../"):
        return "outside", None
    if norm == ".":
        return "broken", None
    last = posixpath.basename(norm)
    if is_note_name(last):
        return ("note", norm) if norm in notes else ("broken", norm)
    if is_attachment(last):
        return "other", norm
    folder = posixpath.dirname(norm)
    hits = [
        n
        for n in notes
        if posixpath.dirname(n) == folder and strip_ext(posixpath.basename(n)) == last
    ]
    found = first(hits)
    return ("note", found) if found else ("broken", norm)


def oracle(link: Occurrence, holder: str, notes: list[str]) -> tuple[str, str | None]:
    """(status, path) of one link by the documented rule."""
    target = link.target
    if link.kind == "markdown":
        try:
            return by_path(unquote(target, errors="strict"), holder, notes)
        except UnicodeDecodeError:
            return "broken", None
    if target in (".", "..") or target.startswith(("./", "../")):
        return by_path(target, holder, notes)
    want = "/".join(p for p in target.split("/") if p)
    if not want:
        return "broken", None
    last = want.rsplit("/", 1)[-1]
    if is_note_name(last):
        hits = [n for n in notes if ("/" + n).casefold().endswith("/" + want.casefold())]
    elif is_attachment(last):
        return "other", None
    else:
        hits = [
            n
            for n in notes
            if ("/" + posixpath.join(posixpath.dirname(n), strip_ext(posixpath.basename(n))))
            .casefold()
            .endswith("/" + want.casefold())
        ]
    found = first(hits)
    return ("note", found) if found else ("broken", None)


def named(link: Occurrence, holder: str) -> str:
    """The normalised path a path-style link names (whether or not a file is there)."""
    text = unquote(link.target) if link.kind == "markdown" else link.target
    return posixpath.normpath(posixpath.join(posixpath.dirname(holder), text))


def links_of(text: str) -> list[Occurrence]:
    _front, body, _start = split_frontmatter(text)
    return occurrences(body, len(text) - len(body))


# --- what CommonMark says is code (the oracle for which links are links) -------------------

COMMONMARK = MarkdownIt("commonmark")
CODE_TOKENS = frozenset({"code_inline", "code_block", "fence"})
# A wikilink as the README writes it (not CommonMark syntax: CommonMark reads it as text).
WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n|#]+)(?:#[^\[\]\n|]*)?(?:\|[^\[\]\n]*)?\]\]")


def _tokens(text: str) -> Iterator[Token]:
    def walk(tokens: list[Token]) -> Iterator[Token]:
        for token in tokens:
            yield token
            if token.children:
                yield from walk(token.children)

    _front, body, _start = split_frontmatter(text)
    return walk(COMMONMARK.parse(body))


def commonmark_links(text: str) -> Counter[tuple[str, bool, str]]:
    """(kind, embed, target) of every relative link CommonMark's tokens hold outside code:
    Markdown links and images from their tokens, wikilinks from runs of text."""
    found: Counter[tuple[str, bool, str]] = Counter()
    run: list[str] = []
    for token in [*_tokens(text), None]:
        if token is not None and token.type == "text":
            run.append(token.content)
            continue
        for m in WIKILINK.finditer("".join(run)):
            found["wikilink", m.group(1) == "!", m.group(2).strip()] += 1
        run = []
        if token is not None and token.type in ("link_open", "image"):
            href = str(token.attrs["href" if token.type == "link_open" else "src"])
            found["markdown", token.type == "image", unquote(href.partition("#")[0])] += 1
    return found


def parsed_links(text: str) -> Counter[tuple[str, bool, str]]:
    return Counter(
        (o.kind, o.embed, unquote(o.target) if o.kind == "markdown" else o.target)
        for o in links_of(text)
    )


def code_of(text: str) -> list[str]:
    """The content of every code token CommonMark finds, in order."""
    return [t.content for t in _tokens(text) if t.type in CODE_TOKENS]


# --- the tests ---------------------------------------------------------------------------


@pytest.fixture
def scratch() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="fsnotes-links-prop-"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def serve(scratch: Path, root: Path) -> Server:
    state = scratch / "state"
    shutil.rmtree(state, ignore_errors=True)
    cfg = load(workspaces=[str(root)], state_dir=str(state), principal="ada", env={})
    return build(cfg)


SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(vault=vault_st)
def test_links_and_backlinks_equal_a_brute_force_parse(
    scratch: Path, vault: list[tuple[tuple[str, ...], str, str, list[Spec]]]
) -> None:
    root = make_vault(scratch, vault)
    files = vault_notes(root)
    paths = list(files)
    srv = serve(scratch, root)
    try:
        notes = srv.service.acting_for("ada")
        for path, text in files.items():
            # What is a link at all: the parser finds exactly the links CommonMark leaves
            # outside code (so notes_links, built on it, lists no link in code).
            assert parsed_links(text) == commonmark_links(text), (path, text)
            result = linkservice.notes_links(notes, (root / path).as_uri())
            groups: dict[tuple[str, bool, str, str | None], list[Occurrence]] = {}
            for link in links_of(text):
                groups.setdefault((link.kind, link.embed, link.target, link.heading), []).append(
                    link
                )
            expected = [
                (*key, *oracle(group[0], path, paths), len(group)) for key, group in groups.items()
            ]
            got = [
                (o.type, o.embed, o.target, o.heading, o.status, o.path, o.count)
                for o in result.outgoing
            ]
            assert got == expected, (path, text)
            back: dict[str, int] = {}
            for holder, holder_text in files.items():
                seen = set()
                for link in links_of(holder_text):
                    key = (link.kind, link.embed, link.target)
                    if key not in seen:
                        seen.add(key)
                        if oracle(link, holder, paths) == ("note", path):
                            back[holder] = back.get(holder, 0) + 1
            assert [(b.path, b.links) for b in result.backlinks] == sorted(back.items()), path
            assert result.backlinksTotal == len(back)
    finally:
        srv.close()


def _without_targets(text: str) -> tuple[str, list[tuple[str, bool, str | None, str | None]]]:
    """The text with every link's target cut out, and each link's form."""
    found = links_of(text)
    out, at = [], 0
    for link in found:
        out.append(text[at : link.target_start])
        at = link.target_end
    out.append(text[at:])
    return "\x00".join(out), [(lk.kind, lk.embed, lk.heading, lk.alias) for lk in found]


@SETTINGS
@given(
    vault=vault_st,
    pick=st.integers(min_value=0),
    dst=st.tuples(st.sampled_from([*FOLDERS, ("c", "d")]), st.sampled_from(["x", "z", "y y"])),
    ext=st.sampled_from(EXTS),
)
def test_a_move_leaves_every_link_naming_what_it_named(
    scratch: Path,
    vault: list[tuple[tuple[str, ...], str, str, list[Spec]]],
    pick: int,
    dst: tuple[tuple[str, ...], str],
    ext: str,
) -> None:
    root = make_vault(scratch, vault)
    before = vault_notes(root)
    paths = list(before)
    src = paths[pick % len(paths)]
    new = "/".join((*dst[0], dst[1] + ext))
    if new in before:
        return
    srv = serve(scratch, root)
    try:
        moved = srv.service.acting_for("ada").notes_move((root / src).as_uri(), new, None)
    finally:
        srv.close()
    after = vault_notes(root)
    new_paths = list(after)
    assert sorted(new_paths) == sorted([p for p in paths if p != src] + [new])
    updated = {u.path for u in moved.linksUpdated}
    refused = {s.path for s in moved.linksNotUpdated}
    for old_path, old_text in before.items():
        path = new if old_path == src else old_path
        text = after[path]
        # A move never changes code: a link written in code is the note's text, not a link.
        assert code_of(text) == code_of(old_text), (path, old_text, text)
        if path not in updated:
            assert text == old_text, path
            continue
        # Only link targets changed; every link kept its form, heading and alias.
        assert _without_targets(text) == _without_targets(old_text), path
        if path in refused:
            continue  # some link could not be written: named, checked no further
        for was, now in zip(links_of(old_text), links_of(text), strict=True):
            status, where = oracle(was, old_path, paths)
            if status == "note":
                intended = new if where == src else where
                assert oracle(now, path, new_paths) == ("note", intended), (path, was, now)
            elif status in ("other", "broken") and where is not None and path != old_path:
                # The same file named as before (it may be a note now: the moved one).
                assert named(now, path) == where, (path, was, now)
            elif status != "note":
                assert now.target == was.target, (path, was, now)
    # Every note whose link would otherwise stop naming its note was rewritten or named.
    for old_path, old_text in before.items():
        path = new if old_path == src else old_path
        if path in refused:
            continue
        for was, now in zip(links_of(old_text), links_of(after[path]), strict=True):
            status, where = oracle(was, old_path, paths)
            if status == "note":
                assert oracle(now, path, new_paths)[1] == (new if where == src else where)
