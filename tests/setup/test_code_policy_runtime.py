"""The setup code file, the [setup] configuration, and run-time grants becoming workspaces."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from fsnotes.app.config import ConfigError, load
from fsnotes.notes.store import WorkspaceStores
from fsnotes.security.grants import Access, Grants, NotGranted, Workspace
from fsnotes.setup import code
from fsnotes.setup.policy import DEFAULT_SETUP_PORT, SetupPolicy
from fsnotes.setup.runtime import NotGrantable, RuntimeScope
from fsnotes.setup.store import SetupStore
from sandbox import uri as lexical
from sandbox.root import Root

# --- the code ------------------------------------------------------------------------------

# Reading the code is one open and one read: a check still waiting after this long is stuck.
FIFO_WAIT_S = 5.0


def test_code_file_is_private_and_checks_are_forgiving_only_about_formatting(
    tmp_path: Path,
) -> None:
    c = code.new_code()
    assert len(c) == 19 and c.count("-") == 3
    assert all(ch in code.ALPHABET for ch in c.replace("-", ""))
    path = code.write_code(tmp_path, c)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert code.check(tmp_path, c)
    assert code.check(tmp_path, c.lower().replace("-", " "))
    assert not code.check(tmp_path, c[:-1] + ("0" if c[-1] != "0" else "1"))
    assert not code.check(tmp_path, "")
    assert not code.check(tmp_path, c + "X" * 100)
    newer = code.new_code()
    code.write_code(tmp_path, newer)  # a later start replaces it: the file is the reference
    assert code.check(tmp_path, newer) and not code.check(tmp_path, c)
    assert [p.name for p in tmp_path.iterdir()] == [code.CODE_FILE]  # no temp file left


def test_a_missing_or_malformed_code_file_accepts_nothing(tmp_path: Path) -> None:
    assert not code.check(tmp_path, "AAAA-AAAA-AAAA-AAAA")
    (tmp_path / code.CODE_FILE).write_text("short\n")
    assert not code.check(tmp_path, "short")
    os.unlink(tmp_path / code.CODE_FILE)
    (tmp_path / "elsewhere").write_text("AAAA-AAAA-AAAA-AAAA\n")
    (tmp_path / code.CODE_FILE).symlink_to(tmp_path / "elsewhere")
    assert not code.check(tmp_path, "AAAA-AAAA-AAAA-AAAA")  # never read through a link


def test_a_fifo_in_place_of_the_code_file_accepts_nothing_and_never_waits(
    tmp_path: Path,
) -> None:
    os.mkfifo(tmp_path / code.CODE_FILE, 0o600)
    answers: list[bool] = []
    checker = threading.Thread(target=lambda: answers.append(code.check(tmp_path, "AAAA")))
    checker.start()
    checker.join(FIFO_WAIT_S)
    stuck = checker.is_alive()
    if stuck:  # blocked opening the FIFO: give it a writer so the thread ends, then fail
        os.close(os.open(tmp_path / code.CODE_FILE, os.O_WRONLY))
        checker.join()
    assert not stuck
    assert answers == [False]


# --- configuration -------------------------------------------------------------------------


def test_setup_config_from_flags_env_and_file(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    state = str(tmp_path / "state")
    off = load(workspaces=[str(ws)], state_dir=state, env={})
    assert not off.setup.enabled and off.setup.port == DEFAULT_SETUP_PORT
    cfg = load(
        workspaces=[str(ws)], state_dir=state, setup_allow=[str(shared)], setup_port=9001, env={}
    )
    assert cfg.setup.allow == (str(shared),) and cfg.setup.port == 9001 and cfg.setup.always_on
    env = {
        "FSNOTES_SETUP_ALLOW": str(shared),
        "FSNOTES_SETUP_PORT": "9002",
        "FSNOTES_SETUP_MAX_ACCESS": "write",
        "FSNOTES_SETUP_BIND": "0.0.0.0",
    }
    cfg = load(workspaces=[str(ws)], state_dir=state, env=env)
    assert (cfg.setup.port, cfg.setup.max_access, cfg.setup.bind) == (9002, Access.WRITE, "0.0.0.0")
    assert not cfg.setup.always_on
    assert load(
        workspaces=[str(ws)], state_dir=state, read_only=True, env=env
    ).setup.max_access == (Access.READ)
    toml = tmp_path / "c.toml"
    toml.write_text(f'[setup]\nallow = ["{shared}"]\nmax_access = "read"\nport = 9003\n')
    cfg = load(workspaces=[str(ws)], state_dir=state, config_file=str(toml), env={})
    assert (cfg.setup.allow, cfg.setup.max_access, cfg.setup.port) == (
        (str(shared),),
        Access.READ,
        9003,
    )


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[setup]\nallow = "/x"\n', "list of folder paths"),
        ("[setup]\nport = 70000\n", "out of range"),
        ('[setup]\nport = "http"\n', "must be a number"),
        ('[setup]\nbind = "localhost"\n', "IP address"),
        ('[setup]\nmax_access = "root"\n', "unknown access level"),
        ("[setup]\nopen = true\n", "unknown keys in [setup]"),
        ('[setup]\nallow = ["/"]\n', "cannot be '/'"),
    ],
)
def test_bad_setup_config_is_refused_with_a_reason(tmp_path: Path, toml: str, message: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    f = tmp_path / "c.toml"
    f.write_text(toml)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load(workspaces=[str(ws)], state_dir=str(tmp_path / "st"), config_file=str(f), env={})


def test_the_state_directory_can_never_be_below_or_above_an_allowlisted_folder(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "top" / "ws"
    ws.mkdir(parents=True)
    shared = tmp_path / "top" / "shared"
    (shared / "state").mkdir(parents=True)
    for state in (shared / "state", tmp_path / "top" / "shared"):
        with pytest.raises(ConfigError, match="outside the setup allowlist"):
            load(workspaces=[str(ws)], state_dir=str(state), setup_allow=[str(shared)], env={})


# --- run-time scope ------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for d in ("shared/a", "shared/b/deep", "shared/conf", "configured", "outside"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "shared" / "a" / "n.md").write_text("# A\n")
    (tmp_path / "shared" / "file.md").write_text("x")
    (tmp_path / "shared" / "link").symlink_to(tmp_path / "outside")
    return tmp_path


def make_scope(
    tree: Path, *, max_access: Access = Access.DELETE, configured: list[Workspace] | None = None
) -> tuple[RuntimeScope, Grants, dict[str, object], SetupStore, Root]:
    shared = str(tree / "shared")
    policy = SetupPolicy(allow=(shared,), max_access=max_access)
    ws = configured or [Workspace("conf", lexical.path_components(str(tree / "shared" / "conf")))]
    store = SetupStore(tree, clock=time.time)
    parent = Root.open(shared)
    stores = WorkspaceStores()
    scope = RuntimeScope(
        store=store,
        policy=policy,
        parents=[parent],
        configured=ws,
        stores=stores,
        extensions=(".md",),
    )
    grants = Grants(ws, [], source=scope)
    return scope, grants, stores, store, parent


def comps(p: Path) -> tuple[str, ...]:
    return lexical.path_components(str(p))


def test_target_checks_the_allowlist_level_overlap_and_the_real_folder(tree: Path) -> None:
    scope, _grants, _stores, store, parent = make_scope(tree, max_access=Access.WRITE)
    try:
        t = scope.target(comps(tree / "shared" / "a"), Access.WRITE)
        assert t.path == str(tree / "shared" / "a") and t.configured is None
        assert scope.target(comps(tree / "shared" / "conf"), Access.READ).configured is not None
        cases = {
            tree / "outside": "outside the folders",
            tree / "shared": "outside the folders",  # the parent itself is not grantable
            tree / "shared" / "missing": "does not exist",
            tree / "shared" / "file.md": "a file",
            tree / "shared" / "link": "symbolic link",
        }
        for path, reason in cases.items():
            with pytest.raises(NotGrantable, match=reason):
                scope.target(comps(path), Access.READ)
        with pytest.raises(NotGrantable, match="At most 'write'"):
            scope.target(comps(tree / "shared" / "a"), Access.DELETE)
        store.grant("ada", str(tree / "shared" / "b"), Access.READ)
        with pytest.raises(NotGrantable, match="overlaps another folder granted"):
            scope.target(comps(tree / "shared" / "b" / "deep"), Access.READ)
    finally:
        parent.close()
        scope.close()


def test_stored_grants_become_workspaces_in_every_process_and_follow_the_policy(
    tree: Path,
) -> None:
    scope, grants, stores, store, parent = make_scope(tree)
    try:
        assert grants.granted("ada") == []
        # Another process (another store on the same file) grants: the next lookup sees it.
        SetupStore(tree, clock=time.time).grant("ada", str(tree / "shared" / "a"), Access.WRITE)
        [(ws, access)] = grants.granted("ada")
        assert (ws.name, access, ws.uri) == ("a", Access.WRITE, (tree / "shared" / "a").as_uri())
        assert "a" in stores
        ws_found, rel = grants.authorize_note_uri(
            "ada", comps(tree / "shared" / "a" / "n.md"), Access.READ
        )
        assert ws_found == ws and rel == ("n.md",)
        with pytest.raises(NotGranted):
            grants.authorize_note_uri("bob", comps(tree / "shared" / "a" / "n.md"), Access.READ)
        # A grant on the configured workspace raises that workspace's access.
        store.grant("ada", str(tree / "shared" / "conf"), Access.READ)
        assert {w.name for w, _ in grants.granted("ada")} == {"a", "conf"}
        store.revoke("ada", str(tree / "shared" / "a"))
        assert [w.name for w, _ in grants.granted("ada")] == ["conf"]
    finally:
        parent.close()
        scope.close()
    # A tighter policy later: stored grants beyond it are capped or not honoured at all.
    scope, grants, _stores, store, parent = make_scope(tree, max_access=Access.READ)
    try:
        store.grant("ada", str(tree / "shared" / "a"), Access.DELETE)
        store.grant("ada", str(tree / "outside"), Access.DELETE)  # e.g. an older allowlist
        assert [(w.name, a) for w, a in grants.granted("ada")] == [
            ("conf", Access.READ),
            ("a", Access.READ),
        ]
    finally:
        parent.close()
        scope.close()


def test_a_folder_swapped_for_a_symlink_after_the_grant_is_not_followed(tree: Path) -> None:
    scope, grants, _stores, store, parent = make_scope(tree)
    try:
        os.rename(tree / "shared" / "a", tree / "shared" / "a-real")
        (tree / "shared" / "a").symlink_to(tree / "outside")
        store.grant("ada", str(tree / "shared" / "a"), Access.READ)
        assert [w.name for w, _ in grants.granted("ada")] == []  # skipped, logged
    finally:
        parent.close()
        scope.close()


@pytest.mark.parametrize(
    "name",
    [
        "wor\u200bk",
        "krow\u202e",
        "a\u2028b",
        "x\u0085y",
        # Not format characters, yet drawn as nothing (security.shown.HIDDEN_RANGES), or no
        # agreed glyph at all: the same one rule as everything a person is shown.
        "wor\u3164k",  # HANGUL FILLER
        "work\ufe0f",  # VARIATION SELECTOR-16
        "wo\u034frk",  # COMBINING GRAPHEME JOINER
        "w\u2800ork",  # BRAILLE PATTERN BLANK
        "work\ue000",  # private use
    ],
)
def test_folders_with_invisible_or_bidi_characters_are_not_grantable(tree: Path, name: str) -> None:
    (tree / "shared" / name).mkdir()
    scope, _grants, _stores, _store, parent = make_scope(tree)
    try:
        with pytest.raises(NotGrantable, match="invisible or text-direction"):
            scope.target(comps(tree / "shared" / name), Access.READ)
        scope.target(comps(tree / "shared" / "a"), Access.READ)  # plain names still work
    finally:
        parent.close()
        scope.close()
