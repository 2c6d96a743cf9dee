"""Title, frontmatter, tags and links of a note."""

from __future__ import annotations

from fsnotes.notes.text.markdown import analyse, has_tag, split_frontmatter

NOTE = """---
title: "Trip plan"
tags: [travel, "2027"]
aliases:
  - trip
  - plan
draft: true
rating: 4
---
# Heading not the title

Packing list #todo and #travel/gear, not a#tag, not [link](#anchor), not `#code`.
See [[Budget]] and [[Maps#north|the map]] and [notes](sub/notes.md#top) and
[site](https://example.org) and ![img](pic.png).

```
#not-a-tag [[NotALink]]
```
"""


def test_frontmatter_subset() -> None:
    fm, body, start = split_frontmatter(NOTE)
    assert fm == {
        "title": "Trip plan",
        "tags": ["travel", "2027"],
        "aliases": ["trip", "plan"],
        "draft": True,
        "rating": 4,
    }
    assert start == 10
    assert body.startswith("# Heading")


def test_title_precedence() -> None:
    assert analyse(NOTE, "trip").title == "Trip plan"
    assert analyse("intro\n# First\n# Second\n", "stem").title == "First"
    assert analyse("no heading here\n", "my-note").title == "my-note"
    assert analyse("```\n# in code\n```\n", "stem").title == "stem"


def test_tags_from_frontmatter_and_inline() -> None:
    tags = analyse(NOTE, "trip").tags
    assert tags == ["travel", "2027", "todo", "travel/gear"]
    assert has_tag(tags, "#TODO")
    assert has_tag(tags, "travel")
    assert not has_tag(tags, "code")


def test_links() -> None:
    links = analyse(NOTE, "trip").links
    assert {"type": "wikilink", "target": "Budget"} in links
    assert {"type": "wikilink", "target": "Maps"} in links
    assert {"type": "markdown", "target": "sub/notes.md"} in links
    targets = [link["target"] for link in links]
    assert "NotALink" not in targets
    assert not any(t.startswith("http") or t == "pic.png" for t in targets)


def test_unterminated_frontmatter_is_body() -> None:
    text = "---\ntitle: x\nno end\n"
    fm, body, start = split_frontmatter(text)
    assert fm == {} and body == text and start == 1


def test_fences_hide_tags_links_and_headings_until_they_close() -> None:
    text = (
        "intro #before\n"
        "~~~python\n# not a title\n#nope [[Nope]]\n```\nstill code #nope2\n~~~\n"
        "# Real title\nafter #after [[Yes]]\n"
        "```\nunterminated #never [[Never]]\n"
    )
    meta = analyse(text, "stem")
    assert meta.title == "Real title"
    assert meta.tags == ["before", "after"]
    assert [link["target"] for link in meta.links] == ["Yes"]


def test_tags_are_not_anchors_entities_or_numbers() -> None:
    meta = analyse("a [x](#sec) &#123; #2027 #y2027 url http://h/p#frag (#ok) #ok-too/", "s")
    assert meta.tags == ["y2027", "ok", "ok-too"]


def test_huge_decimals_stay_text_not_infinity() -> None:
    fm, _, _ = split_frontmatter("---\nx: " + "9" * 400 + ".5\ny: 2.5\n---\n")
    assert fm == {"x": "9" * 400 + ".5", "y": 2.5}


def test_quoted_scalars_are_unescaped_as_yaml_reads_them() -> None:
    fm, _, _ = split_frontmatter(
        "---\n"
        "a: 'it''s'\n"
        'b: "say \\"hi\\" \\\\ caf\\u00e9"\n'
        'c: "lone \\ud800 stays"\n'
        "d: [x, 'y, z', 'o''k']\n"
        'e: "quoted"  # and a comment\n'
        "---\n"
    )
    assert fm == {
        "a": "it's",
        "b": 'say "hi" \\ café',
        "c": "lone \\ud800 stays",
        "d": ["x", "y, z", "o'k"],
        "e": "quoted",
    }


def test_indented_code_and_long_code_spans_hide_tags_links_and_headings() -> None:
    text = (
        "intro #before\n\n    # not a title #nope [[Nope]]\n\t#nope2\n\n"
        "# Real title\n``#nope3 [[Nope2]]`` `` ` #nope4 ` `` #after [[Yes]]\n"
    )
    meta = analyse(text, "stem")
    assert meta.title == "Real title"
    assert meta.tags == ["before", "after"]
    assert [link["target"] for link in meta.links] == ["Yes"]
