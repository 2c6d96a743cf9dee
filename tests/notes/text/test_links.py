"""What a link is, what it names, and how it is written to name something else
(fsnotes.notes.text.links: pure functions)."""

from __future__ import annotations

import pytest

from fsnotes.notes.text import links as rules
from fsnotes.notes.text.markdown import analyse

EXT = (".md", ".markdown", ".txt")


def occ(text: str) -> rules.Occurrence:
    (found,) = rules.occurrences(text)
    return found


def test_every_form_is_found_with_the_span_of_its_target() -> None:
    text = (
        "a [[ Budget#Q1|the money ]] b ![[pic.png]] c [t](<my note.md#top> 'T') "
        'd ![i](img/a%20b.png) e [x](../up.md "title")'
    )
    found = rules.occurrences(text)
    assert [(o.kind, o.embed, o.target, o.heading, o.alias) for o in found] == [
        ("wikilink", False, "Budget", "Q1", "the money "),
        ("wikilink", True, "pic.png", None, None),
        ("markdown", False, "my note.md", "top", None),
        ("markdown", True, "img/a%20b.png", None, None),
        ("markdown", False, "../up.md", None, None),
    ]
    for o in found:
        assert text[o.target_start : o.target_end] == o.target
    assert found[2].angle and not found[4].angle


def test_code_external_and_in_page_links_are_not_links() -> None:
    text = (
        "`[[inline]]` [web](https://x.org/a.md) [mail](mailto:a@b) [here](#sec) "
        "[abs](/etc/passwd.md)\n```\n[[fenced]] [f](f.md)\n```\n[[after]]"
    )
    assert [o.target for o in rules.occurrences(text)] == ["after"]


def test_spans_count_from_the_start_of_the_note_after_frontmatter() -> None:
    text = "---\ntitle: x\nrel: '[[not a link]]'\n---\nSee [[Budget]].\n"
    meta = analyse(text, "x")
    (ref,) = meta.refs
    assert text[ref.target_start : ref.target_end] == "Budget"
    assert meta.links == [{"type": "wikilink", "target": "Budget"}]


@pytest.mark.parametrize(
    ("written", "holder", "style", "parts", "explicit", "attachment", "problem"),
    [
        ("[[Budget]]", ("a", "n.md"), "name", ("Budget",), False, False, None),
        ("[[p/Budget.md]]", ("n.md",), "name", ("p", "Budget.md"), True, False, None),
        ("[[/p/Budget]]", ("n.md",), "name", ("p", "Budget"), False, False, None),
        ("[[v1.2]]", ("n.md",), "name", ("v1.2",), False, False, None),
        ("![[pic.PNG]]", ("n.md",), "name", ("pic.PNG",), False, True, None),
        ("[[../x]]", ("a", "b", "n.md"), "path", ("a", "x"), False, False, None),
        ("[t](../b/my%20note.md)", ("a", "n.md"), "path", ("b", "my note.md"), True, False, None),
        ("[t](./sub/x)", ("a", "n.md"), "path", ("a", "sub", "x"), False, False, None),
        ("[t](../../x.md)", ("a", "n.md"), "path", (), False, False, "outside"),
        ("[t](bad%ff.md)", ("n.md",), "path", (), False, False, "invalid"),
        ("[t](doc.pdf)", ("a", "n.md"), "path", ("a", "doc.pdf"), False, True, None),
    ],
)
def test_classify(
    written: str,
    holder: tuple[str, ...],
    style: str,
    parts: tuple[str, ...],
    explicit: bool,
    attachment: bool,
    problem: str | None,
) -> None:
    target = rules.classify(occ(written), holder, EXT)
    assert (target.style, target.parts, target.explicit, target.attachment, target.problem) == (
        style,
        parts,
        explicit,
        attachment,
        problem,
    )
    # What the index stores gives back the same target.
    assert rules.from_row(target.mode, target.want, EXT) == target


NOTES = [
    ("Budget.md",),
    ("p", "budget.md"),
    ("p", "q", "Budget.txt"),
    ("a", "p", "budget.md"),
    ("x", "plan.md"),
    ("x", "plan.txt"),
]


@pytest.mark.parametrize(
    ("written", "holder", "resolved"),
    [
        ("[[budget]]", ("z.md",), ("Budget.md",)),  # shortest path wins, case ignored
        ("[[P/BUDGET]]", ("z.md",), ("p", "budget.md")),  # the exact path beats a/p/budget
        ("[[a/p/budget]]", ("z.md",), ("a", "p", "budget.md")),
        ("[[q/budget]]", ("z.md",), ("p", "q", "Budget.txt")),
        ("[[budget.txt]]", ("z.md",), ("p", "q", "Budget.txt")),  # the extension must match
        ("[[plan]]", ("z.md",), ("x", "plan.md")),  # same folders: path order (.md < .txt)
        ("[[plan.txt]]", ("z.md",), ("x", "plan.txt")),
        ("[[nothing]]", ("z.md",), None),
        ("[t](budget.md)", ("p", "z.md"), ("p", "budget.md")),
        ("[t](Budget.md)", ("p", "z.md"), None),  # Markdown paths are exact
        ("[t](../x/plan)", ("p", "z.md"), ("x", "plan.md")),  # no extension: any, path order
        ("[t](q/Budget)", ("p", "z.md"), ("p", "q", "Budget.txt")),
        ("[[../Budget]]", ("p", "z.md"), ("Budget.md",)),
    ],
)
def test_resolve(written: str, holder: tuple[str, ...], resolved: tuple[str, ...] | None) -> None:
    assert rules.resolve(rules.classify(occ(written), holder, EXT), NOTES) == resolved


def _render_name(written: str, note: tuple[str, ...], pool: list[tuple[str, ...]]) -> str | None:
    return rules.render_name(occ(written), note, pool, EXT)


def test_render_name_keeps_the_form_and_adds_folders_only_to_tell_notes_apart() -> None:
    pool = [("a", "costs.md"), ("b", "c", "costs.md"), ("b", "plan.md")]
    assert _render_name("[[Budget]]", ("b", "plan.md"), pool) == "plan"
    assert _render_name("[[Budget]]", ("b", "c", "costs.md"), pool) == "c/costs"
    assert _render_name("[[Budget.md]]", ("b", "plan.md"), pool) == "plan.md"
    assert _render_name("[[x/y/Budget]]", ("b", "plan.md"), pool) == "b/plan"  # as many as it can
    # Two notes that differ only by extension: the extension tells them apart.
    pool = [("n", "plan.md"), ("n", "plan.txt")]
    assert _render_name("[[old]]", ("n", "plan.txt"), pool) == "plan.txt"
    # Names a wikilink cannot hold, and paths that differ only in case, cannot be written.
    assert _render_name("[[old]]", ("a#b.md",), [("a#b.md",)]) is None
    pool = [("n", "Plan.md"), ("n", "plan.md")]
    assert _render_name("[[old]]", ("n", "plan.md"), pool) is None


@pytest.mark.parametrize(
    ("written", "holder", "parts", "expected"),
    [
        ("[t](a.md)", ("n.md",), ("x", "y", "my note.md"), "x/y/my%20note.md"),
        ("[t](<a b.md>)", ("n.md",), ("x", "my note.md"), "x/my note.md"),
        ("[t](<a%20b.md>)", ("n.md",), ("x", "my note.md"), "x/my%20note.md"),
        ("[t](./a.md)", ("d", "n.md"), ("d", "b.md"), "./b.md"),
        ("[t](a.md)", ("d", "e", "n.md"), ("f", "b(1)#.md"), "../../f/b%281%29%23.md"),
        ("[t](caf%C3%A9.md)", ("n.md",), ("thé.md",), "th%C3%A9.md"),
        ("[t](café.md)", ("n.md",), ("thé.md",), "thé.md"),
        ("[[./a]]", ("d", "n.md"), ("d", "e", "b"), "./e/b"),
        ("[[../a]]", ("d", "n.md"), ("b",), "../b"),
        ("[[../a]]", ("d", "n.md"), ("d", "b"), "./b"),  # still relative, not a name
    ],
)
def test_render_path_recomputes_relative_to_the_holder_in_the_links_own_encoding(
    written: str, holder: tuple[str, ...], parts: tuple[str, ...], expected: str
) -> None:
    link = occ(written)
    text = rules.render_path(link, holder, parts)
    assert text == expected
    # And it reads back as the path it was written for.
    probe = occ(written[: link.target_start] + text + written[link.target_end :])
    assert rules.classify(probe, holder, EXT).parts == parts


# CommonMark's code: an indented chunk (four spaces or a tab) after a blank line or at the
# start, not a paragraph's continuation nor a list item's; a code span opened by N backticks
# closes only on a run of exactly N (issue 26).
@pytest.mark.parametrize(
    ("text", "targets"),
    [
        ("# N\n\ntext\n\n    [[plan]]\n\n", []),
        ("    [[start]] [s](s.md)\n", []),
        ("a\n\n\t[[tab]]\n", []),
        ("a\n\n  \t[[tab2]]\n", []),
        ("a\n\n    x\n\n    [[second chunk]]\nafter [[out]]\n", ["out"]),
        ("para\n    [[lazy]]\n", ["lazy"]),
        ("- item\n\n    [[in the item]]\n", ["in the item"]),
        ("1. item\n\n      [[deep]]\n", ["deep"]),
        ("1. item\n\n       [[code in item]]\n", []),
        ("- item\n\n      [[code in item]]\n", []),
        ("> quote\n\n>     [[quoted code]]\n", []),
        ("> quote\n    [[lazy in quote]]\n", ["lazy in quote"]),
        ("``[[dblghost]]`` [[out]]", ["out"]),
        ("```[[tripleghost]]``` [[out]]", ["out"]),
        ("`` a ` [[x]] ` b `` [[out]]", ["out"]),
        ("``[[unclosed]]` [[out]]", ["unclosed", "out"]),
        ("`[[spans\nlines]]` [[out]]", ["out"]),
        ("`a\n\n[[not across paragraphs]]` [[out]]", ["not across paragraphs", "out"]),
        ("x ```[[tripleghost]]``` [[out]]", ["out"]),
        ("\\`[[escaped]]` [[out]]", ["escaped", "out"]),
        ("````\n[[fence]]\n```\n[[still]]\n````\n[[out]]", ["out"]),
        ("- ```\n  [[fence in item]]\n  ```\n- [[out]]", ["out"]),
    ],
)
def test_indented_code_and_code_spans_are_code_as_commonmark_defines_them(
    text: str, targets: list[str]
) -> None:
    assert [o.target for o in rules.occurrences(text)] == targets
