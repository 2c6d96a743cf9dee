"""The one rule for what a person is shown (fsnotes.security.shown)."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fsnotes.security.shown import distinguishable, has_hidden, hidden, shown, spelled_out

_ESCAPE = re.compile(r"\\(\\|u[0-9a-f]{4}|U[0-9a-f]{8})")


def decode(rendered: str) -> str:
    """The inverse of shown/spelled_out: proves a rendering names exactly one string."""
    return _ESCAPE.sub(lambda m: "\\" if m[1] == "\\" else chr(int(m[1][1:], 16)), rendered)


@pytest.mark.parametrize(
    "ch",
    [
        "\u202a",  # LEFT-TO-RIGHT EMBEDDING
        "\u202e",  # RIGHT-TO-LEFT OVERRIDE
        "\u2066",  # LEFT-TO-RIGHT ISOLATE
        "\u2069",  # POP DIRECTIONAL ISOLATE
        "\u200e",  # LEFT-TO-RIGHT MARK
        "\u061c",  # ARABIC LETTER MARK
        "\u200b",  # ZERO WIDTH SPACE
        "\u200d",  # ZERO WIDTH JOINER
        "\u2060",  # WORD JOINER
        "\ufeff",  # ZERO WIDTH NO-BREAK SPACE
        "\u00ad",  # SOFT HYPHEN
        "\u0007",  # BEL
        "\u001b",  # ESC
        "\n",
        "\u0085",  # NEXT LINE (C1)
        "\u2028",  # LINE SEPARATOR
        "\u2029",  # PARAGRAPH SEPARATOR
        "\U000e0041",  # TAG LATIN CAPITAL LETTER A
        "\u034f",  # COMBINING GRAPHEME JOINER
        "\u3164",  # HANGUL FILLER
        "\u2800",  # BRAILLE PATTERN BLANK
        "\ufe0f",  # VARIATION SELECTOR-16
        "\udcff",  # a lone surrogate (an undecodable byte under surrogateescape)
        "\ue000",  # private use
        "\u0378",  # unassigned
    ],
)
def test_invisible_and_direction_changing_characters_are_shown_escaped(ch: str) -> None:
    assert hidden(ch) and has_hidden(f"a{ch}b")
    out = shown(f"a{ch}b")
    assert not has_hidden(out)
    cp = ord(ch)
    assert out == (f"a\\u{cp:04x}b" if cp <= 0xFFFF else f"a\\U{cp:08x}b")


@pytest.mark.parametrize(
    "text", ["report.md", "Café — “Plan”", "日本語のノート", "naïve e\u0301", "😀 Launch", "a b"]
)
def test_visible_text_of_any_script_is_left_alone(text: str) -> None:
    assert not has_hidden(text) and shown(text) == text


def test_a_literal_backslash_escape_does_not_look_like_a_real_hidden_character() -> None:
    assert shown("a\\u200bb") == "a\\\\u200bb"
    assert shown("a\u200bb") == "a\\u200bb"
    assert shown("a\\u200bb") != shown("a\u200bb")


def test_nfc_and_nfd_twins_are_spelled_out_apart() -> None:
    nfc, nfd = unicodedata.normalize("NFC", "café.md"), unicodedata.normalize("NFD", "café.md")
    assert distinguishable([nfc, nfd, "plan.md"]) == ["caf\\u00e9.md", "cafe\\u0301.md", "plan.md"]


def test_compatibility_look_alikes_are_spelled_out_apart() -> None:
    # Full-width r, a ligature, a no-break space: each draws like its plain twin.
    out = distinguishable(
        ["\uff52eport.md", "report.md", "\ufb01le.md", "file.md", "a\u00a0b", "a b"]
    )
    assert out == ["\\uff52eport.md", "report.md", "\\ufb01le.md", "file.md", "a\\u00a0b", "a b"]


def test_a_spelled_out_label_never_looks_like_another_rendering() -> None:
    # "\uff52" and "r" collide, so the first is spelled out as the six characters \uff52,
    # which is what a label starting with a FULL-WIDTH REVERSE SOLIDUS draws like.
    out = distinguishable(["\uff52", "r", "\uff3cuff52"])
    assert out == ["\\uff52", "r", "\\uff3cuff52"]
    assert len({unicodedata.normalize("NFKC", o) for o in out}) == 3


def test_labels_that_do_not_collide_keep_their_letters() -> None:
    assert distinguishable(["café.md", "cafe.md"]) == ["café.md", "cafe.md"]


def test_spelled_out_keeps_printable_ascii() -> None:
    assert spelled_out("a-Z_0 ~") == "a-Z_0 ~"
    assert spelled_out("é\\") == "\\u00e9\\\\"


@given(st.text())
def test_shown_has_nothing_hidden_and_decodes_back(text: str) -> None:
    out = shown(text)
    assert not has_hidden(out)
    assert decode(out) == text


@given(st.lists(st.text(), unique=True, max_size=8))
def test_distinct_labels_always_render_distinct_and_unlike(labels: list[str]) -> None:
    out = distinguishable(labels)
    assert [decode(o) for o in out] == labels  # one-to-one: a rendering names one label
    assert not any(has_hidden(o) for o in out)
    looks = [unicodedata.normalize("NFKC", o) for o in out]
    assert len(set(looks)) == len(looks)
