"""Layer 1 (sandbox.uri): table-driven tests for every lexical rule and the escape list."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.errors import InvalidPath, InvalidURI, OutsideWorkspace, SandboxError, TooDeep
from sandbox.uri import (
    MAX_DEPTH,
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    MAX_URI_CHARS,
    Components,
    check_name,
    contain,
    join_relative,
    parse_file_uri,
    parse_relative,
    path_components,
    resolve_uri,
    to_file_uri,
)

BASE: Components = ("srv", "notes")


# --- check_name -----------------------------------------------------------------------

VALID_NAMES = [
    "a.md",
    "...",
    ".hidden",
    "a b",
    " leading and trailing ",
    "100%",
    "%2e%2e",
    "a#b?c",
    "caf\u00e9",
    "\u2024\u2024",  # ONE DOT LEADER x2: NFKC would give '..'
    "\uff0e\uff0e",  # FULLWIDTH FULL STOP x2: NFKC would give '..'
    "\u2215",  # DIVISION SLASH: looks like '/', is not
    "\u00a0",
    "\u202e",  # a bidi override is a legal name (only raw in a URI is it refused)
    "x" * MAX_NAME_BYTES,
    "\u00e9" * (MAX_NAME_BYTES // 2),  # 254 bytes
]


@pytest.mark.parametrize("name", VALID_NAMES)
def test_check_name_accepts_and_returns_the_name_unchanged(name: str) -> None:
    assert check_name(name) is name


INVALID_NAMES = [
    ("", "empty"),
    (".", "not a name"),
    ("..", "not a name"),
    ("a/b", "'/'"),
    ("a\\b", "backslash"),
    ("a\x00b", "NUL"),
    ("a\nb", "control"),
    ("\t", "control"),
    ("a\x1fb", "control"),
    ("a\x7fb", "control"),
    ("\ud800", "surrogate"),
    ("x" * (MAX_NAME_BYTES + 1), "256 bytes"),
    ("\u00e9" * 128, "256 bytes"),  # 128 characters, 256 bytes in UTF-8
]


@pytest.mark.parametrize(("name", "reason"), INVALID_NAMES)
def test_check_name_refuses_with_the_reason(name: str, reason: str) -> None:
    with pytest.raises(InvalidPath) as info:
        check_name(name)
    assert reason in str(info.value)


def test_check_name_messages_escape_control_characters_and_stay_short() -> None:
    with pytest.raises(InvalidPath) as info:
        check_name("evil\x1b[31m" + "x" * 300)
    message = str(info.value)
    assert "\x1b" not in message
    assert "\\x1b" in message
    assert len(message) < 200


# --- parse_file_uri: accepted forms ---------------------------------------------------

ACCEPTED_URIS = [
    ("file:///srv/notes/a.md", ("srv", "notes", "a.md")),
    ("file://localhost/srv/notes/a.md", ("srv", "notes", "a.md")),
    ("FILE://LocalHost/srv", ("srv",)),
    ("File:///srv", ("srv",)),
    ("file:///", ()),
    ("file://localhost/", ()),
    ("file:///srv/notes/", ("srv", "notes")),
    ("file:///srv//notes", ("srv", "notes")),
    ("file:///srv/notes/a%20b.md", ("srv", "notes", "a b.md")),
    ("file:///srv/notes/100%25", ("srv", "notes", "100%")),
    ("file:///srv/notes/%23%3F", ("srv", "notes", "#?")),
    ("file:///srv/notes/%252e%252e", ("srv", "notes", "%2e%2e")),
    ("file:///srv/notes/caf%C3%A9", ("srv", "notes", "caf\u00e9")),
    ("file:///srv/notes/caf%c3%a9", ("srv", "notes", "caf\u00e9")),
    ("file:///srv/notes/caf\u00e9", ("srv", "notes", "caf\u00e9")),
    ("file:///srv/notes/\u65e5\u672c", ("srv", "notes", "\u65e5\u672c")),
    ("file:///srv/notes/\U0001f600", ("srv", "notes", "\U0001f600")),
    ("file:///srv/notes/%E2%80%A4%E2%80%A4", ("srv", "notes", "\u2024\u2024")),
    ("file:///srv/notes/%EF%BC%8E%EF%BC%8E", ("srv", "notes", "\uff0e\uff0e")),
    ("file:///srv/notes/\u2024\u2024", ("srv", "notes", "\u2024\u2024")),
    ("file:///srv/notes/%C2%A0", ("srv", "notes", "\u00a0")),
    ("file:///srv/notes/%E2%80%AE", ("srv", "notes", "\u202e")),
    ("file:///srv/notes/a!$&'()*+,;=:@~-_.b", ("srv", "notes", "a!$&'()*+,;=:@~-_.b")),
    ("file:///srv/notes/...", ("srv", "notes", "...")),
    ("file:///srv/notes/./a/../b", ("srv", "notes", "b")),
    ("file:///srv/notes/a/%2e%2e/b", ("srv", "notes", "b")),
    ("file:///srv/notes/a/.%2E/b", ("srv", "notes", "b")),
    ("file:///srv/notes/%2e/b", ("srv", "notes", "b")),
    ("file:///srv/notes/a/..", ("srv", "notes")),
    ("file:///.", ()),
]


@pytest.mark.parametrize(("uri", "expected"), ACCEPTED_URIS)
def test_parse_file_uri_accepts_local_uris(uri: str, expected: Components) -> None:
    assert parse_file_uri(uri) == expected


# --- parse_file_uri: refused forms ----------------------------------------------------

REFUSED_URIS = [
    # forms and schemes
    ("file:/srv/notes", "file:/path"),
    ("file:srv/notes", "relative"),
    ("file:", "relative"),
    ("file://", "no path"),
    ("file://localhost", "no path"),
    ("/srv/notes", "not an absolute URI"),
    ("srv/notes", "not an absolute URI"),
    ("", "not an absolute URI"),
    ("http://localhost/srv/notes", "scheme is 'http'"),
    ("note://n_1", "scheme is 'note'"),
    ("files:///srv", "scheme is 'files'"),
    (" file:///srv", "whitespace"),
    ("file:///srv\n", "whitespace"),
    # authorities
    ("file://evil.example/srv/notes", "the host 'evil.example'"),
    ("file://host/..", "the host 'host'"),
    ("file://127.0.0.1/srv", "the host '127.0.0.1'"),
    ("file://[::1]/srv", "the host '[::1]'"),
    ("file://localhost.localdomain/srv", "the host"),
    ("file://user@localhost/srv", "user information"),
    ("file://@/srv", "user information"),
    ("file://localhost:80/srv", "a port"),
    ("file://:/srv", "a port"),
    ("file://%6cocalhost/srv", "the host"),
    ("file:////server/share", "UNC"),
    ("file://///etc/passwd", "UNC"),
    # query and fragment
    ("file:///srv/notes?x=1", "query"),
    ("file:///srv/notes?", "query"),
    ("file:///srv/notes#top", "fragment"),
    ("file:///srv/notes#", "fragment"),
    ("file://localhost?/srv", "query"),
    # NUL, backslash, encoded '/', controls
    ("file:///srv/notes/a%00.md", "'%00' encodes a NUL"),
    ("file:///srv/notes/a\x00.md", "NUL"),
    ("file:///srv/notes/a%5cb", "'%5C' encodes a backslash"),
    ("file:///srv/notes/a%5Cb", "'%5C' encodes a backslash"),
    ("file:///srv/notes/a\\b", "backslash"),
    ("file:///srv/notes/..%2fetc", "'%2F' encodes '/'"),
    ("file:///srv/notes/..%2Fetc", "'%2F' encodes '/'"),
    ("file:///srv/notes/%2F", "'%2F' encodes '/'"),
    ("file:///srv/notes/a%0Ab", "control character"),
    ("file:///srv/notes/a%09b", "control character"),
    ("file:///srv/notes/a%7Fb", "control character"),
    ("file:///srv/notes/a\tb", "control character"),
    ("file:///srv/notes/a\x7fb", "control character"),
    ("file:///srv/notes/a b", "a space"),
    ("file:///srv/notes/a\u00a0b", "U+00A0"),
    ("file:///srv/notes/a\u3000b", "U+3000"),
    ("file:///srv/notes/a\u202eb", "U+202E"),
    ("file:///srv/notes/a\u200bb", "U+200B"),
    ("file:///srv/notes/a\ufeffb", "U+FEFF"),
    ("file:///srv/notes/a\u0085b", "U+0085"),
    ("file:///srv/notes/a\ue000b", "U+E000"),
    ("file:///srv/notes/a\ufffeb", "U+FFFE"),
    ("file:///srv/notes/a\ud800b", "U+D800"),
    # characters that must be encoded
    ("file:///srv/notes/a<b>", "must be percent-encoded"),
    ("file:///srv/notes/a|b", "must be percent-encoded"),
    ("file:///srv/notes/a[1]", "must be percent-encoded"),
    ('file:///srv/notes/a"b', "must be percent-encoded"),
    ("file:///srv/notes/a`b", "must be percent-encoded"),
    # malformed escapes
    ("file:///srv/notes/a%", "malformed percent-escape '%'"),
    ("file:///srv/notes/a%2", "malformed percent-escape '%2'"),
    ("file:///srv/notes/a%zz", "malformed percent-escape '%zz'"),
    ("file:///srv/notes/a%g0", "malformed percent-escape"),
    ("file:///srv/notes/a%%41", "malformed percent-escape"),
    ("file:///srv/notes/a%-1", "malformed percent-escape"),
    ("file:///srv/notes/a%\u0661\u0662", "malformed percent-escape"),  # Arabic-Indic digits
    # decoded bytes that are not UTF-8
    ("file:///srv/notes/a%FF", "do not decode as UTF-8"),
    ("file:///srv/notes/%C3", "do not decode as UTF-8"),
    ("file:///srv/notes/%C0%AE%C0%AE", "do not decode as UTF-8"),  # overlong '..'
    ("file:///srv/notes/%ED%A0%80", "do not decode as UTF-8"),  # encoded surrogate
    # '..' above '/' names no real path
    ("file:///..", "climbs above '/'"),
    ("file:///%2e%2e/etc", "climbs above '/'"),
    ("file:///srv/../../etc", "climbs above '/'"),
    ("file://localhost/..", "climbs above '/'"),
    # limits
    ("file:///srv/" + "x" * (MAX_NAME_BYTES + 1), "256 bytes"),
    ("file:///srv/" + "%C3%A9" * 128, "256 bytes"),
    ("file:///" + "a/" * MAX_PATH_BYTES, "at most 4095"),
    ("file:///" + "a" * MAX_URI_CHARS, f"at most {MAX_URI_CHARS}"),
]


@pytest.mark.parametrize(("uri", "reason"), REFUSED_URIS)
def test_parse_file_uri_refuses_with_a_message_naming_the_offending_part(
    uri: str, reason: str
) -> None:
    with pytest.raises(InvalidURI) as info:
        parse_file_uri(uri)
    assert reason in str(info.value)


def test_parse_file_uri_error_for_a_bad_name_is_an_invalid_uri_not_an_invalid_path() -> None:
    with pytest.raises(InvalidURI):
        parse_file_uri("file:///srv/" + "y" * 300)


def test_a_bad_name_is_refused_even_when_a_later_dot_dot_would_remove_it() -> None:
    with pytest.raises(InvalidURI):
        parse_file_uri("file:///srv/a%0A/../b")


def test_longest_allowed_path_and_name_are_accepted() -> None:
    # '/' + 4094 bytes of names and slashes = 4095 bytes, plus the NUL = PATH_MAX.
    names = ("n" * 255,) * 15 + ("m" * 254,)
    assert len("/" + "/".join(names)) == MAX_PATH_BYTES - 1
    assert parse_file_uri(to_file_uri(names)) == names
    too_long = (*names[:-1], names[-1] + "m")
    with pytest.raises(InvalidURI, match="at most 4095"):
        parse_file_uri("file:///" + "/".join(too_long))


def test_fully_encoded_longest_path_fits_under_the_raw_uri_bound() -> None:
    names = ("\u00e9" * 127,) * 16  # 254 bytes each, 16 * 255 = 4080 bytes joined
    uri = to_file_uri(names)
    assert len(uri) <= MAX_URI_CHARS
    assert parse_file_uri(uri) == names


# --- the escape list of issue 2, through resolve_uri ----------------------------------

ESCAPES = [
    ("file:///srv/notes/..", OutsideWorkspace),
    ("file:///srv/notes/../notes-evil/x.md", OutsideWorkspace),
    ("file:///srv/notes/a/../../etc/passwd", OutsideWorkspace),
    ("file:///srv/notes/%2e%2e/etc/passwd", OutsideWorkspace),
    ("file:///srv/notes/%2E%2E/etc/passwd", OutsideWorkspace),
    ("file:///srv/notes/.%2E/etc/passwd", OutsideWorkspace),
    ("file:///srv/notes/..%2f..%2fetc/passwd", InvalidURI),
    ("file:///srv/notes/..%2F..%2Fetc/passwd", InvalidURI),
    ("file:///srv/notes/..%5c..%5cetc", InvalidURI),
    ("file:///srv/notes/..\\..\\etc", InvalidURI),
    ("file:///srv/notes-evil/x.md", OutsideWorkspace),
    ("file:///srv/notesx", OutsideWorkspace),
    ("file:///srv/note", OutsideWorkspace),
    ("file:///srv", OutsideWorkspace),
    ("file:///", OutsideWorkspace),
    ("file:///etc/passwd", OutsideWorkspace),
    ("file:///srv/notes/a%00/../../x", InvalidURI),
    ("file://evil.example/srv/notes/x.md", InvalidURI),
    ("file://localhost@evil/srv/notes/x.md", InvalidURI),
    ("file:////evil/srv/notes/x.md", InvalidURI),
    ("file:/srv/notes/x.md", InvalidURI),
    ("file:///srv/notes/x.md?/../../etc", InvalidURI),
    ("file:///srv/notes/x.md#/../../etc", InvalidURI),
    ("file:///srv/notes/%C0%AE%C0%AE/x", InvalidURI),
]


@pytest.mark.parametrize(("uri", "error"), ESCAPES)
def test_escape_list_is_refused(uri: str, error: type[SandboxError]) -> None:
    with pytest.raises(error):
        resolve_uri(BASE, uri)


INSIDE = [
    ("file:///srv/notes", ()),
    ("file://localhost/srv/notes/", ()),
    ("file:///srv/notes/a.md", ("a.md",)),
    ("file:///srv/notes/%252e%252e/x", ("%2e%2e", "x")),
    ("file:///srv/notes/%252E%252E%252Fx", ("%2E%2E%2Fx",)),
    ("file:///srv/notes/a/../b", ("b",)),
    ("file:///srv/x/../notes/b", ("b",)),
    ("file:///srv/notes/%E2%80%A4%E2%80%A4/x", ("\u2024\u2024", "x")),
    ("file:///srv/notes/%EF%BC%8E%EF%BC%8E/x", ("\uff0e\uff0e", "x")),
    ("file:///srv/notes/\uff0e\uff0e/x", ("\uff0e\uff0e", "x")),
]


@pytest.mark.parametrize(("uri", "relative"), INSIDE)
def test_uris_inside_the_workspace_resolve_relative_to_it(uri: str, relative: Components) -> None:
    assert resolve_uri(BASE, uri) == relative


def test_depth_below_the_workspace_is_bounded() -> None:
    ok = "file:///srv/notes/" + "/".join(["d"] * MAX_DEPTH)
    assert len(resolve_uri(BASE, ok)) == MAX_DEPTH
    with pytest.raises(TooDeep, match=f"at most {MAX_DEPTH}"):
        resolve_uri(BASE, ok + "/d")


# --- contain --------------------------------------------------------------------------

CONTAIN = [
    (("srv", "notes"), ("srv", "notes"), ()),
    (("srv", "notes"), ("srv", "notes", "a", "b"), ("a", "b")),
    ((), ("a",), ("a",)),
    ((), (), ()),
]


@pytest.mark.parametrize(("base", "target", "relative"), CONTAIN)
def test_contain_returns_the_target_relative_to_the_base(
    base: Components, target: Components, relative: Components
) -> None:
    assert contain(base, target) == relative


NOT_CONTAINED = [
    (("srv", "notes"), ("srv", "notes-evil")),
    (("srv", "notes"), ("srv", "notes-evil", "x")),
    (("srv", "notes"), ("srv", "note")),
    (("srv", "notes"), ("srv", "notesx", "notes")),
    (("srv", "notes"), ("srv",)),
    (("srv", "notes"), ()),
    (("srv", "notes"), ("etc", "srv", "notes")),
    (("srv", "notes"), ("SRV", "notes")),
    (("a", "b"), ("a/b",)),
]


@pytest.mark.parametrize(("base", "target"), NOT_CONTAINED)
def test_contain_compares_components_never_string_prefixes(
    base: Components, target: Components
) -> None:
    with pytest.raises(OutsideWorkspace):
        contain(base, target)


def test_sibling_prefix_directory_on_disk_is_outside(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    evil = tmp_path / "notes-evil"
    notes.mkdir()
    evil.mkdir()
    (evil / "secret.md").write_text("outside")
    base = path_components(str(notes))
    assert str(evil / "secret.md").startswith(str(notes))  # the trap a string test falls in
    with pytest.raises(OutsideWorkspace):
        resolve_uri(base, (evil / "secret.md").as_uri())


def test_pathlib_uris_of_real_files_resolve_to_those_files(tmp_path: Path) -> None:
    # Python's own encoder (pathlib.Path.as_uri) on awkward but legal names.
    base = path_components(str(tmp_path))
    names = ["a b.md", "100%.md", "caf\u00e9.md", "#hash?.md", "%2e%2e", "\u2024\u2024", "x;y=z"]
    for name in names:
        target = tmp_path / "dir" / name
        target.parent.mkdir(exist_ok=True)
        target.write_text(name)
        relative = resolve_uri(base, target.as_uri())
        assert relative == ("dir", name)
        assert tmp_path.joinpath(*relative).read_text() == name
        assert parse_file_uri(to_file_uri((*base, *relative))) == (*base, *relative)


# --- messages never reveal the workspace's host path ----------------------------------


def test_error_messages_never_contain_the_workspace_host_path(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace-sentinel-q7z"
    workspace.mkdir()
    base = path_components(str(workspace))
    root = to_file_uri(base)
    attempts = [
        root + "/..",
        root + "/../other",
        root + "/%2e%2e/%2e%2e",
        root + "-evil/x",
        "file:///etc/passwd",
        "file:///",
        root + "/a%2Fb",
        root + "/a%00",
        root + "/" + "z" * 300,
        root + "?q",
        "file://host" + root[len("file://") :],
    ]
    seen = 0
    for uri in attempts:
        with pytest.raises(SandboxError) as info:
            resolve_uri(base, uri)
        message = str(info.value)
        assert str(workspace) not in message
        assert str(tmp_path) not in message
        if isinstance(info.value, OutsideWorkspace):
            # The caller sent these names, but contain() must not repeat the base at all.
            assert "sentinel" not in message
            seen += 1
    assert seen >= 4
    for path in ["/abs", "..", "../x", "a/../../b", "a\\b", "a\x00", "z" * 300, "file:///x"]:
        with pytest.raises(SandboxError) as info:
            parse_relative(path)
        assert str(workspace) not in str(info.value)


# --- to_file_uri ----------------------------------------------------------------------

CANONICAL = [
    ((), "file:///"),
    (("srv", "notes", "a.md"), "file:///srv/notes/a.md"),
    (("a b",), "file:///a%20b"),
    (("100%",), "file:///100%25"),
    (("#?",), "file:///%23%3F"),
    (("caf\u00e9",), "file:///caf%C3%A9"),
    (("a+b&c'd(e)$*:",), "file:///a%2Bb%26c%27d%28e%29%24%2A%3A"),
    (("!,;=@~-_.",), "file:///!,;=@~-_."),
    (("...",), "file:///..."),
    (("\u00a0\u202e",), "file:///%C2%A0%E2%80%AE"),
]


@pytest.mark.parametrize(("components", "uri"), CANONICAL)
def test_to_file_uri_is_canonical_and_round_trips(components: Components, uri: str) -> None:
    assert to_file_uri(components) == uri
    assert uri.isascii()
    assert parse_file_uri(uri) == components


@pytest.mark.parametrize(
    "components", [("..",), (".",), ("",), ("a/b",), ("a\x00",), ("x" * 256,), ("\udc80",)]
)
def test_to_file_uri_refuses_invalid_components(components: Components) -> None:
    with pytest.raises(InvalidPath):
        to_file_uri(components)


def test_to_file_uri_refuses_a_path_over_path_max() -> None:
    with pytest.raises(InvalidPath, match="at most 4095"):
        to_file_uri(("x" * 255,) * 16)  # 16 * 256 = 4096 bytes


# --- path_components ------------------------------------------------------------------

HOST_PATHS = [
    ("/srv/notes", ("srv", "notes")),
    ("/srv/notes/", ("srv", "notes")),
    ("//srv//notes", ("srv", "notes")),
    ("/srv/./notes", ("srv", "notes")),
    ("/srv/x/../notes", ("srv", "notes")),
    ("/", ()),
    ("/srv/100%25", ("srv", "100%25")),  # no decoding
    ("/srv/caf\u00e9", ("srv", "caf\u00e9")),
]


@pytest.mark.parametrize(("path", "expected"), HOST_PATHS)
def test_path_components_of_absolute_host_paths(path: str, expected: Components) -> None:
    assert path_components(path) == expected


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("srv/notes", "absolute"),
        ("", "absolute"),
        ("~/notes", "absolute"),
        ("/..", "climbs above '/'"),
        ("/srv/../..", "climbs above '/'"),
        ("/srv/a\x00b", "NUL"),
        ("/srv/a\\b", "backslash"),
        ("/srv/" + "x" * 256, "256 bytes"),
        ("/" + "a/" * 2048, "over 4095"),
    ],
)
def test_path_components_refuses(path: str, reason: str) -> None:
    with pytest.raises(InvalidPath) as info:
        path_components(path)
    assert reason in str(info.value)


def test_path_components_of_a_real_directory_round_trips_through_a_uri(tmp_path: Path) -> None:
    base = path_components(str(tmp_path))
    assert Path("/", *base) == tmp_path
    assert parse_file_uri(tmp_path.as_uri()) == base
    assert parse_file_uri(to_file_uri(base)) == base


# --- parse_relative -------------------------------------------------------------------

RELATIVE_OK = [
    ("a.md", ("a.md",)),
    ("a/b.md", ("a", "b.md")),
    ("a//b", ("a", "b")),
    ("./a", ("a",)),
    ("a/", ("a",)),
    ("a/./b/", ("a", "b")),
    ("a/../b", ("b",)),
    ("a/b/../../c", ("c",)),
    ("...", ("...",)),
    ("%2e%2e", ("%2e%2e",)),  # no decoding: a literal name
    ("%2e%2e/%2f", ("%2e%2e", "%2f")),
    ("a%2Fb", ("a%2Fb",)),
    ("a%5Cb", ("a%5Cb",)),
    ("a b/c d.md", ("a b", "c d.md")),
    ("\u2024\u2024/x", ("\u2024\u2024", "x")),
    ("\uff0e\uff0e/x", ("\uff0e\uff0e", "x")),
    ("\u2024\u2024", ("\u2024\u2024",)),
    ("\uff0e\uff0e", ("\uff0e\uff0e",)),
    ("C:/x", ("C:", "x")),
    ("file:x", ("file:x",)),
    ("~/x", ("~", "x")),
]


@pytest.mark.parametrize(("path", "expected"), RELATIVE_OK)
def test_parse_relative_normalises(path: str, expected: Components) -> None:
    assert parse_relative(path) == expected


@pytest.mark.parametrize("path", ["", ".", "./", "a/..", "a/b/../..", ".//", "./."])
def test_parse_relative_root_only_when_allowed(path: str) -> None:
    assert parse_relative(path, allow_empty=True) == ()
    with pytest.raises(InvalidPath, match="workspace root"):
        parse_relative(path)


RELATIVE_REFUSED = [
    ("/etc/passwd", InvalidPath, "absolute"),
    ("/", InvalidPath, "absolute"),
    ("//etc", InvalidPath, "absolute"),
    ("..", OutsideWorkspace, "'..' leaves the workspace"),
    ("../x", OutsideWorkspace, "'..' leaves the workspace"),
    ("a/../../x", OutsideWorkspace, "'..' leaves the workspace"),
    ("./..", OutsideWorkspace, "'..' leaves the workspace"),
    ("a/../..", OutsideWorkspace, "'..' leaves the workspace"),
    ("..\\x", InvalidPath, "backslash"),
    ("a\\b", InvalidPath, "backslash"),
    ("\\\\server\\share", InvalidPath, "backslash"),
    ("a\x00b", InvalidPath, "NUL"),
    ("a\nb", InvalidPath, "control"),
    ("a/\x1b[2J", InvalidPath, "control"),
    ("a\x7f", InvalidPath, "control"),
    ("file:///etc/passwd", InvalidPath, "URI"),
    ("http://x/y", InvalidPath, "URI"),
    ("\ud800", InvalidPath, "surrogate"),
    ("x" * 256, InvalidPath, "256 bytes"),
    ("a/" + "\u00e9" * 128, InvalidPath, "256 bytes"),
    ("a/" * 2049, InvalidPath, "at most 4096"),
    ("/".join(["d"] * (MAX_DEPTH + 1)), TooDeep, f"at most {MAX_DEPTH}"),
    ("/".join(["\u00e9" * 127] * 17), InvalidPath, "at most 4095"),  # 2,175 chars, 4,334 bytes
]


@pytest.mark.parametrize(("path", "error", "reason"), RELATIVE_REFUSED)
def test_parse_relative_refuses(path: str, error: type[SandboxError], reason: str) -> None:
    with pytest.raises(error) as info:
        parse_relative(path, allow_empty=True)
    assert type(info.value) is error
    assert reason in str(info.value)


def test_parse_relative_accepts_the_deepest_and_the_longest_allowed_paths() -> None:
    assert len(parse_relative("/".join(["d"] * MAX_DEPTH))) == MAX_DEPTH
    longest = "/".join(["x" * 255] * 16)  # 4,095 bytes: PATH_MAX with its NUL
    assert len(longest) == MAX_PATH_BYTES - 1
    assert parse_relative(longest) == ("x" * 255,) * 16


# --- join_relative --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("components", "text"),
    [(("a", "b"), "a/b"), (("a",), "a"), ((), "."), (("a b", "%2e%2e"), "a b/%2e%2e")],
)
def test_join_relative_is_for_display_and_parses_back(components: Components, text: str) -> None:
    assert join_relative(components) == text
    assert parse_relative(text, allow_empty=True) == components
