"""Layer 1 (sandbox.uri): property-based tests with hypothesis.

1. Whatever text comes in, a successful result is made of valid names only and never
   leaves the base; a parsed URI also agrees with an independent decoder (urllib).
2. ``to_file_uri`` round-trips every valid component tuple.
3. URIs built from valid names with random dot segments and random percent-encodings
   resolve exactly like a small reference normaliser, or are refused.

Example counts keep the whole module to a few seconds on a shared 2-core machine.
"""

from __future__ import annotations

import posixpath
import string
from urllib.parse import unquote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox.errors import InvalidPath, InvalidURI, OutsideWorkspace, SandboxError
from sandbox.uri import (
    Components,
    check_name,
    contain,
    join_relative,
    parse_file_uri,
    parse_relative,
    resolve_uri,
    to_file_uri,
)

BASE: Components = ("srv", "notes")

FAST = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces that matter to a file URI parser, mixed with arbitrary characters.
URI_TOKENS = [
    "/", "//", ".", "..", "%2e", "%2E", "%2e%2e", "%2f", "%2F", "%25", "%252e", "%5c",
    "%5C", "%00", "%0a", "%", "%C3%A9", "%C0%AE", "%FF", "%E2%80%A4", "%EF%BC%8E", "\\",
    "?", "#", " ", "\x00", "\t", "\u00e9", "\u2024", "\uff0e", "\u202e", ":", "@", "~",
    "localhost", "srv", "notes", "notes-evil", "file:", "file://", "a", "b",
]  # fmt: skip
URI_PREFIXES = ["", "file:", "file:/", "file://", "file:///", "FILE:///", "file://localhost/"]

uri_bodies = st.lists(st.one_of(st.sampled_from(URI_TOKENS), st.characters()), max_size=40).map(
    "".join
)
uri_texts = st.one_of(
    st.text(max_size=60),
    st.builds(lambda p, b: p + b, st.sampled_from(URI_PREFIXES), uri_bodies),
    st.builds(lambda b: "file:///srv/notes/" + b, uri_bodies),
)
relative_texts = st.one_of(
    st.text(max_size=60),
    st.lists(st.one_of(st.sampled_from(URI_TOKENS), st.characters()), max_size=40).map("".join),
)

# Valid names: anything but C0 controls, DEL, '/', '\\' and surrogates, biased towards the
# characters that need escaping or look like dots and separators.
name_chars = st.one_of(
    st.sampled_from(list(". %#?+&;=:@~!'()[]\u00e9\u2024\u2215\uff0e\u00a0\u202e\U0001f600")),
    st.characters(
        exclude_categories=["Cs"], exclude_characters="/\\\x7f" + "".join(map(chr, range(32)))
    ),
)
names = st.text(name_chars, min_size=1, max_size=24).filter(lambda s: s not in (".", ".."))
component_tuples = st.lists(names, max_size=8).map(tuple)


def _assert_valid(components: Components) -> None:
    assert isinstance(components, tuple)
    for name in components:
        assert check_name(name) == name
        assert name not in ("", ".", "..")


def _reference_decode(uri: str) -> Components:
    """An independent decoder for a URI that parse_file_uri accepted: urllib + posixpath."""
    rest = uri[len("file://") :]
    path = rest[rest.index("/") :]
    # No segment decodes to '/' (parse_file_uri refuses %2F), so decoding the whole path
    # with urllib and normalising it with posixpath must give the same names.
    decoded = unquote(path, errors="strict")
    normal = posixpath.normpath(decoded)
    return tuple(part for part in normal.split("/") if part)


# --- 1. any text: success implies valid names that stay inside -------------------------


@FAST
@given(uri_texts)
def test_any_text_parsed_as_a_uri_yields_only_valid_names(uri: str) -> None:
    try:
        components = parse_file_uri(uri)
    except InvalidURI:
        return
    _assert_valid(components)
    assert components == _reference_decode(uri)


@FAST
@given(uri_texts)
def test_any_text_resolved_against_a_base_never_escapes(uri: str) -> None:
    try:
        relative = resolve_uri(BASE, uri)
    except (InvalidURI, OutsideWorkspace, InvalidPath):
        return
    _assert_valid(relative)
    assert parse_file_uri(uri) == BASE + relative


@FAST
@given(relative_texts, st.booleans())
def test_any_text_parsed_as_a_relative_path_yields_only_valid_names(
    path: str, allow_empty: bool
) -> None:
    try:
        components = parse_relative(path, allow_empty=allow_empty)
    except (InvalidPath, OutsideWorkspace):
        return
    _assert_valid(components)
    assert components or allow_empty
    assert not path.startswith("/")
    # The same names posixpath finds, anchored at a root that '..' cannot climb above.
    normal = posixpath.normpath("/" + path)
    assert components == tuple(part for part in normal.split("/") if part)
    assert posixpath.normpath(path).split("/")[0] != ".."


# --- 2. round trips -------------------------------------------------------------------


@FAST
@given(component_tuples)
def test_to_file_uri_round_trips_valid_components(components: Components) -> None:
    uri = to_file_uri(components)
    assert uri.isascii()
    assert parse_file_uri(uri) == components
    assert to_file_uri(parse_file_uri(uri)) == uri


@FAST
@given(component_tuples)
def test_join_relative_round_trips_through_parse_relative(components: Components) -> None:
    text = join_relative(components)
    assert parse_relative(text, allow_empty=True) == components


# --- 3. dot segments and encodings against a reference normaliser ---------------------

# A small alphabet so that generated names often share prefixes ('a', 'ab', 'a b').
short_names = st.text(st.sampled_from(list("ab .%\u00e9\u2024")), min_size=1, max_size=4).filter(
    lambda s: s not in (".", "..")
)
segments = st.one_of(short_names, st.sampled_from([".", "..", "", "."]))
# What RFC 3986 allows raw in a path segment (pchar without the escapes).
RAW_OK = frozenset(string.ascii_letters + string.digits + "-._~" + "!$&'()*+,;=" + ":@")


@st.composite
def encoded(draw: st.DrawFn, segment: str) -> str:
    """Percent-encode a random selection of the segment's characters (random hex case)."""
    out: list[str] = []
    for ch in segment:
        # Printable non-ASCII may appear raw (IRI style); ASCII only from the pchar set.
        if (ch in RAW_OK or not ch.isascii()) and not draw(st.booleans()):
            out.append(ch)
            continue
        escape = "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
        out.append(escape.lower() if draw(st.booleans()) else escape)
    return "".join(out)


@st.composite
def built_uris(draw: st.DrawFn, near: Components = ()) -> tuple[str, list[str]]:
    """A URI from random segments; with ``near``, it often starts at or beside that path."""
    parts = draw(st.lists(segments, max_size=10))
    if near:
        # The base itself, a sibling whose name extends the base's last name (the
        # string-prefix trap), or the base's parent, before the random segments.
        start = draw(
            st.sampled_from(
                [list(near), [*near[:-1], near[-1] + "x"], [*near[:-1], near[-1] + " "], []]
            )
        )
        parts = start + parts
    authority = draw(st.sampled_from(["", "localhost", "LOCALHOST", "LocalHost"]))
    body = "/".join(draw(encoded(p)) for p in parts)
    trailing = draw(st.sampled_from(["", "/"]))
    return f"file://{authority}/{body}{trailing}", parts


def _is_unc(uri: str) -> bool:
    """Whether the path part starts with '//' (RFC 8089 appendix E.3), which is refused."""
    return uri.split("/", 3)[3].startswith("/")


def _reference_normalise(parts: list[str]) -> Components | None:
    """RFC 3986 section 5.2.4 on a list of decoded segments; None if '..' climbs above '/'."""
    stack: list[str] = []
    for part in parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                return None
            stack.pop()
            continue
        stack.append(part)
    return tuple(stack)


@SLOW
@given(built_uris())
def test_built_uris_resolve_like_the_reference_normaliser(built: tuple[str, list[str]]) -> None:
    uri, parts = built
    expected = None if _is_unc(uri) else _reference_normalise(parts)
    if expected is None:
        try:
            parse_file_uri(uri)
        except InvalidURI:
            return
        raise AssertionError(f"{uri!r} climbs above '/' or is a UNC form, but was accepted")
    assert parse_file_uri(uri) == expected


@SLOW
@given(st.data(), st.lists(short_names, min_size=1, max_size=3).map(tuple))
def test_built_uris_are_contained_exactly_when_the_reference_says_so(
    data: st.DataObject, base: Components
) -> None:
    uri, parts = data.draw(built_uris(near=base))
    expected = None if _is_unc(uri) else _reference_normalise(parts)
    try:
        relative = resolve_uri(base, uri)
    except InvalidURI:
        assert expected is None
        return
    except OutsideWorkspace:
        assert expected is not None
        assert expected[: len(base)] != base
        return
    assert expected is not None
    assert expected[: len(base)] == base
    assert relative == expected[len(base) :]
    assert contain(base, base + relative) == relative


@SLOW
@given(st.lists(segments, max_size=10))
def test_relative_paths_resolve_like_the_reference_normaliser(parts: list[str]) -> None:
    path = "/".join(parts)
    expected = _reference_normalise(parts)
    try:
        result = parse_relative(path, allow_empty=True)
    except OutsideWorkspace:
        assert expected is None
        return
    except SandboxError:
        # Only an absolute path (an empty first segment) is refused for another reason.
        assert path.startswith("/")
        return
    assert result == expected
