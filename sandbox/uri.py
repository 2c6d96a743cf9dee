"""Layer 1 of containment: strict ``file://`` URIs and relative paths -> checked names.

Everything here is lexical: no function touches the filesystem. The output is always a
tuple of plain names (:data:`Components`), each one a single valid path component, which
layer 2 (:mod:`sandbox.root`) resolves relative to a directory descriptor without ever
following a symlink. Layer 1 decides *which names* a request may use; layer 2 decides
what those names are on disk.

``file://`` URIs (RFC 8089, with RFC 3986 syntax)
    Accepted: ``file:///abs/path`` and ``file://localhost/abs/path``. The scheme and the
    host ``localhost`` are case-insensitive (RFC 3986 section 3.1 and 3.2.2). Refused,
    with :class:`~sandbox.errors.InvalidURI`:

    * any other authority: a host name or address, userinfo (``user@``), a port, an
      escape in the authority;
    * the authority-less forms ``file:/abs`` and ``file:abs`` (RFC 8089 allows the first;
      we take exactly one spelling of a local path so that equal paths compare equal), and
      the UNC-in-path form ``file:////host/share`` (RFC 8089 appendix E.3);
    * a query (``?``) or a fragment (``#``), leading or trailing whitespace;
    * any raw character outside the RFC 3986 path set (unreserved, sub-delims, ``:``,
      ``@``, ``%``), except printable non-ASCII letters as allowed in IRIs (RFC 3987
      ``ucschar``); raw whitespace, controls and invisible format characters (bidi
      overrides, zero-width space) are refused even there because they hide in the text;
    * malformed or truncated escapes, ``%2F`` (an encoded ``/``), ``%5C`` or a raw ``\\``,
      ``%00`` or any other encoded control character, escapes that do not decode as UTF-8.

    Escapes are decoded exactly once, segment by segment, so ``%252e%252e`` is the literal
    name ``%2e%2e`` and never ``..``. Percent-encoded unreserved characters are equivalent
    to the raw ones (RFC 3986 section 6.2.2.2), so a segment that *decodes* to ``.`` or
    ``..`` (``%2e``, ``%2E%2E``) is a dot segment like the raw one. Dot segments are then
    resolved lexically (RFC 3986 section 5.2.4); a ``..`` above ``/`` names no real path
    and is refused. Empty segments (``a//b``, a trailing ``/``) collapse as on POSIX.

Relative paths (tool arguments such as ``path``, ``newPath``, ``folder``)
    ``/``-separated names relative to the workspace root, with no decoding at all (a ``%``
    is a literal character). Absolute paths, backslashes and control characters are
    refused; ``.``, empty segments and a trailing ``/`` are dropped; ``..`` is resolved
    lexically and refused with :class:`~sandbox.errors.OutsideWorkspace` when it climbs
    above the start.

Containment
    :func:`contain` compares whole components, never string prefixes: ``/srv/notes-evil``
    is not inside ``/srv/notes``. Its result is the target relative to the workspace.

Unicode
    Names are taken exactly as given, with no NFC/NFD/NFKC folding, here or anywhere in
    the sandbox. Folding after the check could turn a look-alike into a separator or a dot
    segment (NFKC maps U+2024 ONE DOT LEADER and U+FF0E FULLWIDTH FULL STOP to ``.``, so
    ``\\u2024\\u2024`` would become ``..``); without folding such names are ordinary
    names that stay inside. Matching notes whose names differ only in normalisation form
    is a job for the notes layer, which compares, never rewrites.

Limits (named constants below): :data:`MAX_NAME_BYTES` per name, :data:`MAX_PATH_BYTES`
per joined path, :data:`MAX_DEPTH` components below a workspace, :data:`MAX_URI_CHARS`
and :data:`MAX_RELATIVE_CHARS` on raw input before any work is done.

Not covered here: symlinks, hard links, mount points and races, which only exist on disk
(layer 2); whether the caller may use the workspace at all (authorization).

Error messages name the offending part (a component, an escape, the URI scheme) the
caller sent, shortened and with control characters escaped, but never the workspace's
host path.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from urllib.parse import quote

from sandbox.errors import InvalidPath, InvalidURI, OutsideWorkspace, TooDeep

__all__ = [
    "MAX_DEPTH",
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "MAX_RELATIVE_CHARS",
    "MAX_URI_CHARS",
    "Components",
    "check_name",
    "contain",
    "join_relative",
    "parse_file_uri",
    "parse_relative",
    "path_components",
    "resolve_uri",
    "to_file_uri",
]

Components = tuple[str, ...]
"""Plain names, each one passing :func:`check_name`.

Non-empty, not ``.`` or ``..``, no ``/``, ``\\``, C0 control character or DEL.
"""

# NAME_MAX of ext4, xfs, btrfs and tmpfs: the kernel refuses longer names (ENAMETOOLONG),
# counted in bytes of the name as stored, which for us is UTF-8.
MAX_NAME_BYTES = 255

# PATH_MAX on Linux. It counts the terminating NUL, so a joined path may have at most
# MAX_PATH_BYTES - 1 bytes: the longest string a syscall accepts.
MAX_PATH_BYTES = 4096

# Components below a workspace root. PATH_MAX alone allows about 2,000 one-letter levels;
# each level is one openat + fstat in layer 2's fallback walk and one level of a tree
# walk, so a tighter bound keeps the worst case cheap. 128 is far beyond any notes tree.
MAX_DEPTH = 128

# Raw length of a URI, checked before any parsing work. A path of MAX_PATH_BYTES with
# every byte percent-encoded (3 characters each) plus "file://localhost" fits; anything
# longer is padding (or a pile of dot segments) and is refused up front.
MAX_URI_CHARS = 4 * MAX_PATH_BYTES

# Raw length of a relative path argument. No decoding happens, so a longer raw string
# would also be over PATH_MAX if it were handed to the kernel as it is.
MAX_RELATIVE_CHARS = MAX_PATH_BYTES

# Characters kept raw by to_file_uri besides the RFC 3986 unreserved set
# (ALPHA DIGIT "-" "." "_" "~", which urllib.parse.quote always keeps). A subset of
# sub-delims that means nothing to shells, HTML, Markdown link syntax or form decoders:
# "+" (a space to form decoders), "&", "'", "(", ")", "$", "*" and ":" (a drive letter
# to some Windows parsers) are encoded even though RFC 3986 allows them raw.
_URI_SAFE = "!,;=@"

# What may appear raw in a URI path segment (RFC 3986 pchar, without the escapes).
_RAW_SEGMENT_OK = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@]*")
_HEX = frozenset("0123456789abcdefABCDEF")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_LOOKS_LIKE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
# C0 controls, DEL, the separator and the backslash: never part of a name.
_BAD_NAME_CHAR = re.compile(r"[\x00-\x1f\x7f/\\]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# How much of a caller's string an error message repeats.
_SHOW_CHARS = 40


def _show(text: str) -> str:
    """Quote a caller-sent fragment for a message: shortened, control characters escaped."""
    short = text if len(text) <= _SHOW_CHARS else text[:_SHOW_CHARS] + "..."
    out = []
    for ch in short:
        if ch.isprintable() and not (0xD800 <= ord(ch) <= 0xDFFF):
            out.append(ch)
        elif ord(ch) <= 0xFF:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
    return "'" + "".join(out).replace("'", "\\'") + "'"


def _describe_char(ch: str) -> str:
    if ch == "\x00":
        return "a NUL character"
    if ch == "\\":
        return "a backslash"
    if ch == "/":
        return "a '/'"
    if ch == " ":
        return "a space"
    return f"the control character {_show(ch)}"


# --- names ----------------------------------------------------------------------------


def check_name(name: str) -> str:
    """Return ``name`` unchanged if it is one valid path component, else raise.

    Valid: non-empty, not ``.`` or ``..``, no ``/``, ``\\``, NUL, other C0 control
    character or DEL, encodable as UTF-8 (no lone surrogates) and at most
    :data:`MAX_NAME_BYTES` bytes in UTF-8. No normalisation of any kind is applied.

    Raises:
        InvalidPath: naming the rule the name breaks.
    """
    if not name:
        raise InvalidPath("a path component is empty")
    if name in (".", ".."):
        raise InvalidPath(f"component {_show(name)} is not a name")
    bad = _BAD_NAME_CHAR.search(name)
    if bad is not None:
        raise InvalidPath(f"component {_show(name)} contains {_describe_char(bad.group())}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidPath(
            f"component {_show(name)} is not valid Unicode (a lone surrogate)"
        ) from None
    if size > MAX_NAME_BYTES:
        raise InvalidPath(
            f"component {_show(name)} is {size} bytes in UTF-8; at most {MAX_NAME_BYTES}"
        )
    return name


def _path_bytes(names: Components, *, absolute: bool) -> int:
    """Length in UTF-8 bytes of the joined path ('/a/b' or 'a/b'), names already checked."""
    total = sum(len(n.encode("utf-8")) for n in names)
    if absolute:
        return total + max(len(names), 1)  # a '/' before each name; '/' alone for ()
    return total + max(len(names) - 1, 0)


def _check_path_length(names: Components, *, absolute: bool) -> None:
    size = _path_bytes(names, absolute=absolute)
    if size >= MAX_PATH_BYTES:
        raise InvalidPath(f"the path is {size} bytes in UTF-8; at most {MAX_PATH_BYTES - 1}")


def _check_depth(names: Components) -> None:
    if len(names) > MAX_DEPTH:
        raise TooDeep(
            f"the path is {len(names)} levels deep below the workspace; at most {MAX_DEPTH}",
            depth=len(names),
            limit=MAX_DEPTH,
        )


# --- file:// URIs ---------------------------------------------------------------------


def _is_iri_char(ch: str) -> bool:
    """A raw non-ASCII character we accept in a URI: RFC 3987 ``ucschar``, visible."""
    cp = ord(ch)
    # RFC 3987 section 2.2: ucschar excludes C1 controls, surrogates, private use,
    # noncharacters, the specials block and the planes 15-16 / tag ranges.
    in_ucschar = (
        0xA0 <= cp <= 0xD7FF
        or 0xF900 <= cp <= 0xFDCF
        or 0xFDF0 <= cp <= 0xFFEF
        or (0x10000 <= cp <= 0xDFFFD and (cp & 0xFFFF) <= 0xFFFD)
        or 0xE1000 <= cp <= 0xEFFFD
    )
    # RFC 3987 section 4.1 forbids bidi formatting characters in IRIs; whitespace and
    # other invisible format characters (zero-width space, BOM) hide in the same way.
    return in_ucschar and not ch.isspace() and unicodedata.category(ch) != "Cf"


def _decode_segment(segment: str) -> str:
    """Decode one raw path segment of a URI: escapes exactly once, strict UTF-8."""
    if "%" not in segment and _RAW_SEGMENT_OK.fullmatch(segment):
        return segment
    out = bytearray()
    i = 0
    n = len(segment)
    while i < n:
        ch = segment[i]
        if ch == "%":
            hex_digits = segment[i + 1 : i + 3]
            if len(hex_digits) != 2 or not all(h in _HEX for h in hex_digits):
                raise InvalidURI(
                    f"malformed percent-escape {_show(segment[i : i + 3])} "
                    "(expected '%' and two hex digits)"
                )
            byte = int(hex_digits, 16)
            escape = "%" + hex_digits.upper()
            if byte == 0x2F:
                raise InvalidURI(f"percent-escape '{escape}' encodes '/'")
            if byte == 0x5C:
                raise InvalidURI(f"percent-escape '{escape}' encodes a backslash")
            if byte == 0x00:
                raise InvalidURI(f"percent-escape '{escape}' encodes a NUL character")
            if byte < 0x20 or byte == 0x7F:
                raise InvalidURI(f"percent-escape '{escape}' encodes a control character")
            out.append(byte)
            i += 3
            continue
        if ch.isascii():
            if _RAW_SEGMENT_OK.fullmatch(ch) is None:
                if ch == "\\" or ch == "\x00" or ch == " " or _CONTROL.match(ch):
                    raise InvalidURI(f"the URI contains {_describe_char(ch)}")
                raise InvalidURI(f"the character {_show(ch)} must be percent-encoded in a URI")
            out.append(ord(ch))
        elif _is_iri_char(ch):
            out += ch.encode("utf-8")
        else:
            raise InvalidURI(
                f"the URI contains the invisible or non-character {_show(ch)} "
                f"(U+{ord(ch):04X}); percent-encode it"
            )
        i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidURI(
            f"the percent-escapes in segment {_show(segment)} do not decode as UTF-8"
        ) from None


def _describe_authority(authority: str) -> str:
    if "@" in authority:
        return "user information ('...@')"
    if ":" in authority.rsplit("]", 1)[-1]:
        return "a port"
    return f"the host {_show(authority)}"


def parse_file_uri(uri: str) -> Components:
    """Parse a strict local ``file://`` URI into the components of its absolute path.

    Accepts ``file:///abs/path`` and ``file://localhost/abs/path`` (see the module
    docstring for every rule). The result is the absolute path's names after decoding
    escapes once and resolving ``.`` and ``..``; ``file:///`` gives ``()``. Every name
    passes :func:`check_name` and the joined path fits :data:`MAX_PATH_BYTES`.

    Raises:
        InvalidURI: for anything that is not such a URI, including a ``..`` above ``/``
            and names that break :func:`check_name`.
    """
    if len(uri) > MAX_URI_CHARS:
        raise InvalidURI(f"the URI is {len(uri)} characters long; at most {MAX_URI_CHARS}")
    if uri != uri.strip():
        raise InvalidURI("the URI has leading or trailing whitespace")
    scheme = _SCHEME.match(uri)
    if scheme is None:
        raise InvalidURI("not an absolute URI: expected 'file:///' followed by a path")
    if scheme.group().lower() != "file:":
        raise InvalidURI(f"the URI scheme is {_show(scheme.group()[:-1])}; only 'file' is accepted")
    rest = uri[len("file:") :]
    if "#" in rest:
        raise InvalidURI("the URI has a fragment (#...)")
    if "?" in rest:
        raise InvalidURI("the URI has a query (?...)")
    if not rest.startswith("//"):
        if rest.startswith("/"):
            raise InvalidURI("the form 'file:/path' is not accepted; use 'file:///path'")
        raise InvalidURI("a relative 'file:' reference is not accepted; use 'file:///path'")
    after = rest[2:]
    slash = after.find("/")
    authority, path = (after, "") if slash < 0 else (after[:slash], after[slash:])
    if authority and authority.lower() != "localhost":
        raise InvalidURI(
            f"the URI names {_describe_authority(authority)}; only a local file URI "
            "('file:///...' or 'file://localhost/...') is accepted"
        )
    if not path:
        raise InvalidURI("the URI has no path; the root directory is 'file:///'")
    if path.startswith("//"):
        # RFC 8089 appendix E.3: 'file:////host/share' carries a UNC name in the path.
        raise InvalidURI("the URI path starts with '//' (a UNC name); use 'file:///path'")

    names: list[str] = []
    for segment in path[1:].split("/"):
        if not segment:
            continue
        name = _decode_segment(segment)
        if name == ".":
            continue
        if name == "..":
            if not names:
                raise InvalidURI("component '..' climbs above '/'")
            names.pop()
            continue
        try:
            check_name(name)
        except InvalidPath as exc:
            raise InvalidURI(exc.message) from None
        names.append(name)
    result = tuple(names)
    try:
        _check_path_length(result, absolute=True)
    except InvalidPath as exc:
        raise InvalidURI(exc.message) from None
    return result


def to_file_uri(components: Components) -> str:
    """The canonical ``file:///`` URI of an absolute path given as components.

    Every name is UTF-8 encoded and percent-encoded except the RFC 3986 unreserved
    characters and ``!,;=@``; escapes use upper-case hex; the result is pure ASCII.
    ``parse_file_uri(to_file_uri(c)) == c`` for every valid ``c``.

    Raises:
        InvalidPath: if a name breaks :func:`check_name` or the path is too long.
    """
    for name in components:
        check_name(name)
    _check_path_length(components, absolute=True)
    return "file:///" + "/".join(_quoted(name) for name in components)


@functools.lru_cache(maxsize=4096)
def _quoted(name: str) -> str:
    # Workspace and folder names recur in every URI built below them (a listing builds
    # thousands); quote() is the costly step, so its result is cached per name.
    return quote(name, safe=_URI_SAFE)


# --- containment ----------------------------------------------------------------------


def contain(base: Components, target: Components) -> Components:
    """``target`` relative to ``base``, if ``target`` is ``base`` or lies below it.

    The test is component by component, never on strings, so a sibling whose name merely
    starts with the base's last name is outside. ``()`` means the base itself.

    Raises:
        OutsideWorkspace: if ``target`` is not ``base`` or below it (the message never
            names ``base``).
        TooDeep: if the result is more than :data:`MAX_DEPTH` levels deep (an
            :class:`InvalidPath`).
    """
    n = len(base)
    if len(target) < n or target[:n] != base:
        raise OutsideWorkspace("the path is outside the workspace")
    relative = target[n:]
    _check_depth(relative)
    return relative


def resolve_uri(base: Components, uri: str) -> Components:
    """Parse ``uri`` (:func:`parse_file_uri`) and return it relative to ``base`` (:func:`contain`).

    Raises:
        InvalidURI: the URI is malformed (see :func:`parse_file_uri`).
        OutsideWorkspace: it is well formed but not ``base`` or below it.
        TooDeep: it is more than :data:`MAX_DEPTH` levels below ``base``.
    """
    return contain(base, parse_file_uri(uri))


# --- host paths and relative paths ----------------------------------------------------


def path_components(abs_path: str) -> Components:
    """Components of an absolute host path (a workspace directory from the configuration).

    Lexical only: ``.`` and empty segments are dropped and ``..`` removes the previous
    name, without looking at the disk (so a symlink followed by ``..`` is not resolved
    the way the kernel would; configure real directories). No decoding.

    Raises:
        InvalidPath: the path is relative, a ``..`` climbs above ``/``, a name breaks
            :func:`check_name` or the path is over :data:`MAX_PATH_BYTES`.
    """
    if not abs_path.startswith("/"):
        raise InvalidPath("the workspace path must be absolute (start with '/')")
    if len(abs_path) >= MAX_PATH_BYTES:
        raise InvalidPath(f"the path is over {MAX_PATH_BYTES - 1} characters")
    names: list[str] = []
    for segment in abs_path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not names:
                raise InvalidPath("component '..' climbs above '/'")
            names.pop()
            continue
        names.append(check_name(segment))
    result = tuple(names)
    _check_path_length(result, absolute=True)
    return result


def parse_relative(path: str, *, allow_empty: bool = False) -> Components:
    """Components of a ``/``-separated path relative to the workspace root.

    For tool arguments (``path``, ``newPath``, ``folder``). Nothing is decoded: ``%`` is
    a literal character. ``.``, empty segments and a trailing ``/`` are dropped and
    ``a/../b`` becomes ``("b",)``. The empty result (``""``, ``"."``, ``"a/.."``) is the
    workspace root and is returned only with ``allow_empty``.

    Raises:
        InvalidPath: an absolute path, something that looks like a URI (``scheme://``),
            a backslash or control character, a name that breaks :func:`check_name`, the
            root without ``allow_empty``, or a path over a limit.
        OutsideWorkspace: a ``..`` climbs above the workspace root.
    """
    if len(path) > MAX_RELATIVE_CHARS:
        raise InvalidPath(f"the path is {len(path)} characters long; at most {MAX_RELATIVE_CHARS}")
    if path.startswith("/"):
        raise InvalidPath(
            "an absolute path was given; paths are relative to the workspace (drop the leading '/')"
        )
    if _LOOKS_LIKE_URI.match(path):
        raise InvalidPath("a URI was given where a path relative to the workspace is expected")
    bad = _BAD_NAME_CHAR.search(path.replace("/", ""))
    if bad is not None:
        raise InvalidPath(f"the path contains {_describe_char(bad.group())}")
    names: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not names:
                raise OutsideWorkspace("component '..' leaves the workspace")
            names.pop()
            continue
        names.append(check_name(segment))
    result = tuple(names)
    if not result and not allow_empty:
        raise InvalidPath("the path names the workspace root; a file or folder name is needed")
    _check_depth(result)
    _check_path_length(result, absolute=False)
    return result


def join_relative(components: Components) -> str:
    """``('a', 'b')`` -> ``'a/b'`` for display and for paths handed back to a client.

    The workspace root ``()`` is shown as ``'.'`` (never ``''``, so that
    ``join_relative(c) + '/name'`` stays relative). The result parses back to the same
    components with :func:`parse_relative` (``allow_empty=True`` for the root).
    """
    return "/".join(components) if components else "."
