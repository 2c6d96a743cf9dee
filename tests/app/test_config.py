"""Configuration (fsnotes/app/config.py): CLI, environment and TOML sources, layout checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsnotes.app.config import ConfigError, load
from fsnotes.security.grants import Access, Grant, Grants


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


def test_history_bounds_come_from_the_environment_before_the_config_file(fs: object) -> None:
    with open("/h.toml", "w") as f:
        f.write("[history]\nmax_size_mib = 64\nmax_age_days = 7\n")
    settings = load(workspaces=["/notes"], config_file="/h.toml", env={}).history
    assert (settings.enabled, settings.max_bytes, settings.max_age_s) == (
        True,
        64 * 1024 * 1024,
        7 * 86400.0,
    )
    env = {"FSNOTES_HISTORY_MAX_SIZE_MIB": "8", "FSNOTES_HISTORY_MAX_AGE_DAYS": "0.5"}
    settings = load(workspaces=["/notes"], config_file="/h.toml", env=env).history
    assert (settings.max_bytes, settings.max_age_s) == (8 * 1024 * 1024, 43200.0)
    defaults = load(workspaces=["/notes"], env={}).history
    assert (defaults.max_bytes, defaults.max_age_s) == (256 * 1024 * 1024, 30 * 86400.0)
    assert load(workspaces=["/notes"], no_history=True, env={}).history.enabled is False


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("max_size_mib = 3", "at least 4"),  # below one copy of the largest note
        ("max_size_mib = 'lots'", "must be a number"),
        ("max_age_days = 0", "more than 0"),
        ("max_age_days = -1", "more than 0"),
        ("max_age_days = nan", "more than 0"),
        ("max_age_days = inf", "more than 0"),
        ("enabled = 'no'", "true or false"),
        ("keep = true", "unknown keys in \\[history\\]"),
    ],
)
def test_bad_history_settings_are_explained(fs: object, table: str, message: str) -> None:
    with open("/h.toml", "w") as f:
        f.write(f"[history]\n{table}\n")
    with pytest.raises(ConfigError, match=message):
        load(workspaces=["/notes"], config_file="/h.toml", env={})


def _with_prompts(tmp_path: Path, table: str) -> Path:
    notes = tmp_path / "notes"
    notes.mkdir(exist_ok=True)
    config = tmp_path / "fsnotes.toml"
    config.write_text(f"{table}[[workspace]]\npath = '{notes}'\n")
    return config


def test_prompts_table_sets_the_daily_template_and_path(tmp_path: Path) -> None:
    config = _with_prompts(
        tmp_path, "[prompts]\ndaily_template = 'templates/day.md'\ndaily_path = 'days/{date}.md'\n"
    )
    cfg = load(config_file=str(config), state_dir=str(tmp_path / "state"), env={})
    assert (cfg.daily.template, cfg.daily.path) == ("templates/day.md", "days/{date}.md")
    default = load(
        config_file=str(_with_prompts(tmp_path, "")), state_dir=str(tmp_path / "s"), env={}
    )
    assert (default.daily.template, default.daily.path) == (None, "journal/{date}.md")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[prompts]\nweekly = 'x.md'\n", "unknown keys in \\[prompts\\]: weekly"),
        ("[prompts]\ndaily_path = 'journal/today.md'\n", "must hold \\{date\\} once"),
        ("[prompts]\ndaily_path = '{date}/{date}.md'\n", "must hold \\{date\\} once"),
        ("[prompts]\ndaily_path = '../{date}.md'\n", "not a relative path"),
        ("[prompts]\ndaily_path = '{date}.pdf'\n", "must end in"),
        ("[prompts]\ndaily_template = '.templates/day.md'\n", "hidden folder"),
        ("[prompts]\ndaily_template = '/abs/day.md'\n", "not a relative path"),
        ("[prompts]\ndaily_template = 3\n", "daily_template must be"),
        ("prompts = 1\n", "\\[prompts\\] must be a table"),
    ],
)
def test_bad_prompts_table_is_explained(tmp_path: Path, table: str, message: str) -> None:
    config = _with_prompts(tmp_path, table)
    with pytest.raises(ConfigError, match=message):
        load(config_file=str(config), state_dir=str(tmp_path / "state"), env={})
