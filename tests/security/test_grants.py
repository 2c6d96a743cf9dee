"""Grants: levels, identical refusals, containment by components, roots as hints."""

from __future__ import annotations

import pytest

from fsnotes.security.grants import (
    NOT_GRANTED_MESSAGE,
    Access,
    Grant,
    Grants,
    NotGranted,
    Workspace,
)
from sandbox.errors import TooDeep
from sandbox.uri import MAX_DEPTH, path_components


def _grants() -> Grants:
    a = Workspace("a", path_components("/srv/notes"))
    b = Workspace("b", path_components("/srv/other"))
    c = Workspace("c", path_components("/srv/private"))
    return Grants(
        [a, b, c],
        [
            Grant("ada", "a", Access.DELETE),
            Grant("ada", "b", Access.READ),
            Grant("bob", "c", Access.DELETE),
        ],
    )


def test_levels_include_lower_ones() -> None:
    g = _grants()
    assert g.authorize_workspace_uri("ada", "file:///srv/other", Access.READ).name == "b"
    with pytest.raises(NotGranted, match="'read'"):
        g.authorize_workspace_uri("ada", "file:///srv/other", Access.WRITE)


def test_not_granted_is_the_same_whether_or_not_it_exists() -> None:
    g = _grants()
    messages = set()
    for uri in (
        "file:///srv/private",
        "file:///srv/nothing-here",
        "file:///srv/notes-evil",
        "http://x",
    ):
        with pytest.raises(NotGranted) as info:
            g.authorize_workspace_uri("ada", uri, Access.READ)
        messages.add(str(info.value))
    assert messages == {NOT_GRANTED_MESSAGE}


def test_note_uri_containment_by_components() -> None:
    g = _grants()
    ws, rel = g.authorize_note_uri("ada", path_components("/srv/notes/x/y.md"), Access.READ)
    assert ws.name == "a" and rel == ("x", "y.md")
    with pytest.raises(NotGranted):
        g.authorize_note_uri("ada", path_components("/srv/notes-evil/y.md"), Access.READ)
    with pytest.raises(NotGranted):
        g.authorize_note_uri("ada", path_components("/srv/private/y.md"), Access.READ)


def test_a_note_uri_too_deep_below_a_granted_workspace_is_too_deep_not_ungranted() -> None:
    g = _grants()
    deep = ("d",) * MAX_DEPTH + ("n.md",)
    with pytest.raises(TooDeep) as info:
        g.authorize_note_uri("ada", path_components("/srv/notes") + deep, Access.READ)
    assert (info.value.depth, info.value.limit) == (MAX_DEPTH + 1, MAX_DEPTH)
    # Below someone else's workspace the depth is never mentioned: that would confirm it.
    with pytest.raises(NotGranted):
        g.authorize_note_uri("ada", path_components("/srv/private") + deep, Access.READ)


def test_a_nested_grant_that_holds_a_deep_uri_within_the_limit_wins() -> None:
    outer = Workspace("outer", path_components("/srv/notes"))
    inner = Workspace("inner", path_components("/srv/notes/" + "/".join(["d"] * 10)))
    g = Grants(
        [outer, inner], [Grant("ada", "outer", Access.READ), Grant("ada", "inner", Access.READ)]
    )
    target = inner.components + ("e",) * (MAX_DEPTH - 1) + ("n.md",)
    ws, rel = g.authorize_note_uri("ada", target, Access.READ)
    assert ws.name == "inner" and len(rel) == MAX_DEPTH


def test_roots_pick_a_default_but_never_add_a_workspace() -> None:
    g = _grants()
    with pytest.raises(NotGranted, match="several"):
        g.default_for("ada", Access.READ)
    assert g.default_for("ada", Access.READ, [path_components("/srv/other/sub")]).name == "b"
    # a root outside the grants (bob's workspace) selects nothing
    with pytest.raises(NotGranted, match="several"):
        g.default_for("ada", Access.READ, [path_components("/srv/private")])
    assert g.default_for("bob", Access.DELETE).name == "c"
