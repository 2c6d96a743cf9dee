r"""What a person is shown: one rule for every string a person must judge.

A person decides on what they *see*: which note a delete removes, which folder a setup grants,
which app asks. A file name, a note title or a client's self-description is written by
whoever made the file or runs the client, and Unicode lets such text draw as something else:
a right-to-left override (U+202E) makes ``report<U+202E>dm.txt`` look like ``reporttxt.md``,
a zero-width space (U+200B) makes two names look identical, a control character (U+0007)
draws as nothing, and ``café.md`` written precomposed (NFC) and decomposed (NFD: ``e`` then
U+0301) are two files that look the same.

:func:`shown` renders a string so that it draws as what it is: every character that draws as
nothing or changes how its neighbours draw becomes a visible escape (``\u202e``), and a
literal backslash is doubled, so the rendering is unambiguous (two different strings never
render the same). :func:`distinguishable` renders the labels offered side by side in one
question so that no two look alike: labels equal after compatibility normalisation (NFKC)
are rendered with every non-ASCII character escaped (``caf\u00e9.md`` beside
``cafe\u0301.md``).

Limits, stated plainly: letters of different scripts that look alike (Latin ``a`` and Cyrillic
U+0430) are not detected (that needs Unicode's confusables table, which the standard library
lacks); a label shown alone is rendered by :func:`shown` only, so it is what it is, but may
still resemble a name the person has in mind. Emoji sequences that use a zero-width joiner or
a variation selector show the escape (a red heart as ``❤\ufe0f``): honest, if less pretty.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence

# Unicode general categories that draw nothing, or change how the text around them draws:
# Cc controls (BEL, ESC, newline), Cf format characters (the bidi embeddings, overrides and
# isolates U+202A-202E and U+2066-2069, the marks U+200E/F and U+061C, the zero-width
# U+200B-200D, U+2060 and U+FEFF, the soft hyphen, tag characters), Zl and Zp line and
# paragraph separators, Cs lone surrogates (undecodable bytes of a file name under
# surrogateescape), Co private use (drawn as whatever a font happens to put there) and Cn
# unassigned in this Python's Unicode database (no agreed glyph at all).
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})

# Characters outside those categories that draw as nothing all the same: the
# Default_Ignorable_Code_Point ones that are marks or letters (Unicode DerivedCoreProperties:
# combining grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian free variation
# selectors, the variation selectors) and BRAILLE PATTERN BLANK, a visible blank used for the
# same trick. Inclusive ranges of code points.
HIDDEN_RANGES: tuple[tuple[int, int], ...] = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)


_HIDDEN_POINTS = frozenset(cp for lo, hi in HIDDEN_RANGES for cp in range(lo, hi + 1))


def hidden(ch: str) -> bool:
    """Whether ``ch`` (one character) draws as nothing or changes how its neighbours draw."""
    return unicodedata.category(ch) in HIDDEN_CATEGORIES or ord(ch) in _HIDDEN_POINTS


def has_hidden(text: str) -> bool:
    """Whether any character of ``text`` is :func:`hidden`."""
    if text.isascii():  # the common case: only the C0 controls and DEL can hide here
        return not text.isprintable()
    return any(hidden(ch) for ch in text)


def _escape(ch: str) -> str:
    cp = ord(ch)
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def shown(text: str) -> str:
    """``text`` as a person should see it: hidden characters as ``\\uXXXX`` escapes.

    A backslash becomes ``\\\\``, so a file literally named ``a\\u200bb`` (with a backslash)
    and one with a real zero-width space render differently. Everything else, including
    letters of any script and visible combining marks, is kept as it is.
    """
    if "\\" not in text and not has_hidden(text):
        return text
    return "".join("\\\\" if ch == "\\" else _escape(ch) if hidden(ch) else ch for ch in text)


def spelled_out(text: str) -> str:
    """``text`` with every character outside printable ASCII escaped (backslash doubled).

    For labels that would otherwise look like one another: the code points are the
    difference, so they are what is shown.
    """
    return "".join("\\\\" if ch == "\\" else ch if " " <= ch <= "~" else _escape(ch) for ch in text)


def _looks(rendered: str) -> str:
    # Compatibility normalisation folds what draws alike: NFC and NFD spellings, full-width
    # letters, ligatures, no-break and other spaces.
    return unicodedata.normalize("NFKC", rendered)


def distinguishable(labels: Sequence[str]) -> list[str]:
    """``labels`` rendered for one list a person chooses from, none looking like another.

    Each label is :func:`shown`; labels that would still look alike (equal under NFKC) are
    :func:`spelled_out` instead, all of them, so the person sees where they differ. A spelled
    out label can itself look like another label's rendering (a full-width backslash draws
    like a backslash), so this repeats until nothing looks alike; spelled-out renderings are
    printable ASCII and one-to-one, so it ends. Different labels always give different
    renderings (every rendering decodes back to its label), so a rendering can also serve as
    the option's identifier.
    """
    out = [shown(label) for label in labels]
    spelled = [False] * len(labels)
    while True:
        seen = Counter(_looks(r) for r in out)
        clash = [i for i, r in enumerate(out) if seen[_looks(r)] > 1 and not spelled[i]]
        if not clash:
            return out
        for i in clash:
            out[i], spelled[i] = spelled_out(labels[i]), True
