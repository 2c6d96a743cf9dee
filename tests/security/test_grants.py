"""Grants and configuration: levels, identical refusals, roots as hints, layout checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsnotes.config import ConfigError, load
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


def test_cli_workspaces_are_granted_to_the_principal(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    cfg = load(workspaces=[str(notes)], state_dir=str(tmp_path / "state"), principal="ada", env={})
    assert [(g.principal, g.access) for g in cfg.grants] == [("ada", Access.DELETE)]
    ro = load(workspaces=[str(notes)], read_only=True, state_dir=str(tmp_path / "s"), env={})
    assert all(g.access == Access.READ for g in ro.grants)


def test_environment_configures_the_container(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    env = {
        "FSNOTES_WORKSPACE": str(notes),
        "FSNOTES_STATE_DIR": str(tmp_path / "state"),
        "FSNOTES_PRINCIPAL": "container",
        "FSNOTES_READ_ONLY": "1",
    }
    cfg = load(env=env)
    assert cfg.principal == "container"
    assert cfg.state_dir == tmp_path / "state"
    assert cfg.grants == [Grant("container", "notes", Access.READ)]


def test_state_dir_inside_a_workspace_is_refused(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    with pytest.raises(ConfigError, match="state directory"):
        load(workspaces=[str(notes)], state_dir=str(notes / ".state"), env={})


def test_nested_workspaces_are_refused(tmp_path: Path) -> None:
    (tmp_path / "notes" / "sub").mkdir(parents=True)
    with pytest.raises(ConfigError, match="overlap"):
        load(
            workspaces=[str(tmp_path / "notes"), str(tmp_path / "notes" / "sub")],
            state_dir=str(tmp_path / "state"),
            env={},
        )


def test_toml_config_with_principals_and_grants(fs: object) -> None:
    # pyfakefs: the config file and its directories exist only in the fake filesystem.
    import os

    os.makedirs("/etc", exist_ok=True)
    os.makedirs("/data/team", exist_ok=True)
    os.makedirs("/data/ada", exist_ok=True)
    with open("/etc/fsnotes.toml", "w") as f:
        f.write(
            'principal = "ada"\nstate_dir = "/var/lib/fsnotes"\n'
            '[[workspace]]\nname = "team"\npath = "/data/team"\n'
            '[[workspace]]\npath = "/data/ada"\n'
            '[[grant]]\nprincipal = "ada"\nworkspace = "team"\naccess = "write"\n'
            '[[grant]]\nprincipal = "ada"\nworkspace = "ada"\naccess = "delete"\n'
            '[[grant]]\nprincipal = "bob"\nworkspace = "team"\naccess = "read"\n'
        )
    cfg = load(config_file="/etc/fsnotes.toml", env={})
    assert cfg.principal == "ada"
    assert [w.name for w in cfg.workspaces] == ["team", "ada"]
    g = Grants(cfg.workspace_objects(), cfg.grants)
    assert [(w.name, a.label) for w, a in g.granted("ada")] == [
        ("team", "write"),
        ("ada", "delete"),
    ]
    assert [(w.name, a.label) for w, a in g.granted("bob")] == [("team", "read")]


def test_bad_config_is_explained(fs: object) -> None:
    with open("/bad.toml", "w") as f:
        f.write('[[grant]]\nprincipal = "x"\nworkspace = "y"\naccess = "admin"\n')
    with pytest.raises(ConfigError, match="unknown access level"):
        load(config_file="/bad.toml", env={})
    with open("/typo.toml", "w") as f:
        f.write("workspaces = []\n")
    with pytest.raises(ConfigError, match="unknown keys"):
        load(config_file="/typo.toml", env={})
