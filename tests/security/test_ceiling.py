"""A credential's ceiling (an OAuth token's scopes) is a field of its own, never an attribute
carried by the principal's name: :class:`Scope` holds it, :meth:`Grants.scope` is told it, and
the authenticated identity names both."""

from __future__ import annotations

import dataclasses

import pytest

from fsnotes.security import grants as grants_module
from fsnotes.security.grants import Access, Grant, Grants, NotGranted, Scope, Workspace
from fsnotes.security.tokens import Identity
from sandbox.uri import path_components


def _grants() -> Grants:
    a = Workspace("a", path_components("/srv/notes"))
    b = Workspace("b", path_components("/srv/other"))
    return Grants([a, b], [Grant("ada", "a", Access.DELETE), Grant("ada", "b", Access.WRITE)])


def test_a_scope_holds_the_ceiling_it_was_made_with_and_lowers_every_grant_to_it() -> None:
    assert "ceiling" in {f.name for f in dataclasses.fields(Scope)}
    scope = _grants().scope("ada", ceiling=Access.READ)
    assert scope.principal == "ada" and type(scope.principal) is str
    assert scope.ceiling is Access.READ
    assert [(ws.name, access) for ws, access in scope.granted] == [
        ("a", Access.READ),
        ("b", Access.READ),
    ]
    with pytest.raises(NotGranted, match="is 'read', and this needs 'write'"):
        scope.authorize_workspace_uri("file:///srv/notes", Access.WRITE)


def test_a_plain_name_gets_its_full_grants_only_through_the_explicit_ceiling() -> None:
    full = _grants().scope("ada", ceiling=Access.DELETE)
    assert full.ceiling is Access.DELETE
    assert [(ws.name, access) for ws, access in full.granted] == [
        ("a", Access.DELETE),
        ("b", Access.WRITE),
    ]
    # Nothing is inferred from the name: a request's scope must say its ceiling.
    with pytest.raises(TypeError):
        _grants().scope("ada")  # type: ignore[call-arg]


def test_no_str_subclass_carries_a_ceiling() -> None:
    assert not hasattr(grants_module, "Principal")
    assert not hasattr(grants_module, "ceiling_of")
    reader = Identity("ada", Access.READ)
    assert type(reader.principal) is str and reader.ceiling is Access.READ
    assert Identity("ada").ceiling is None  # a static token: no ceiling beyond the grants
    # Same name, other ceiling: not the same identity (an HTTP session compares both).
    assert reader != Identity("ada") and reader == Identity("ada", Access.READ)
