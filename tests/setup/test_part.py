"""The setup part's one entry point, and what the setup package may import."""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path

import pytest

from fsnotes.notes.store import NoteStore, WorkspaceStores
from fsnotes.security.grants import Access, Grant, Workspace
from fsnotes.security.seal import Keyring, Sealer
from fsnotes.setup.part import SetupError, SetupPart, build_setup
from fsnotes.setup.policy import SetupPolicy
from fsnotes.setup.store import SetupStore
from sandbox import uri as lexical
from sandbox.root import Root

REPO = Path(__file__).resolve().parents[2]
# What lies above the setup part: it may be given values from there, never import them.
ABOVE_SETUP = (
    "fsnotes.app.config",
    "fsnotes.app.server",
    "fsnotes.app.cli",
    "fsnotes.app.cli_grant",
)


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module a file imports (function-local imports included), made absolute."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found += [(node.lineno, module)]
            # "from .. import server" names the module in the alias.
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def test_nothing_in_the_setup_package_imports_the_configuration_server_or_command_line() -> None:
    upward = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in sorted((REPO / "fsnotes" / "setup").rglob("*.py"))
        for line, module in _imported_modules(path)
        if any(module == above or module.startswith(above + ".") for above in ABOVE_SETUP)
    ]
    assert upward == []


def _part(
    tmp_path: Path, policy: SetupPolicy, stores: WorkspaceStores, workspaces: list[Workspace]
) -> SetupPart:
    state = tmp_path / "state"
    state.mkdir(mode=0o700, exist_ok=True)
    return build_setup(
        policy=policy,
        state_dir=state,
        workspaces=workspaces,
        grants=[Grant("ada", ws.name, Access.WRITE) for ws in workspaces],
        stores=stores,
        extensions=(".md",),
        sealer=Sealer(Keyring.load_or_create(state)),
        clock=time.time,
        grant_command="fsnotes grant --state-dir STATE",
    )


def _configured(tmp_path: Path) -> tuple[list[Workspace], WorkspaceStores, Root]:
    (tmp_path / "notes").mkdir()
    root = Root.open(str(tmp_path / "notes"))
    ws = Workspace("notes", lexical.path_components(str(tmp_path / "notes")))
    return [ws], WorkspaceStores({"notes": NoteStore(root, extensions=(".md",))}), root


def test_with_setup_off_the_part_opens_no_page_and_grants_only_the_configuration(
    tmp_path: Path,
) -> None:
    workspaces, stores, root = _configured(tmp_path)
    part = _part(tmp_path, SetupPolicy(), stores, workspaces)
    try:
        assert part.lifespan is None and part.parents == []
        assert [t.name for t in part.tools] == ["notes_setup"]
        assert part.grants.granted("ada") == [(workspaces[0], Access.WRITE)]
        # A grant stored by another process changes nothing here: no allowlist, no layer.
        part.store.grant("ada", str(tmp_path / "shared" / "x"), Access.READ)
        assert part.grants.granted("ada") == [(workspaces[0], Access.WRITE)]
    finally:
        part.close()
        root.close()


def test_with_an_allowlist_stored_grants_join_the_configured_ones_from_the_start(
    tmp_path: Path,
) -> None:
    workspaces, stores, root = _configured(tmp_path)
    (tmp_path / "shared" / "proj").mkdir(parents=True)
    (tmp_path / "state").mkdir(mode=0o700)
    # Granted before the server starts (fsnotes grant): honoured by the part it builds.
    SetupStore(tmp_path / "state", clock=time.time).grant(
        "ada", str(tmp_path / "shared" / "proj"), Access.READ
    )
    policy = SetupPolicy(allow=(str(tmp_path / "shared"),), max_access=Access.WRITE)
    part = _part(tmp_path, policy, stores, workspaces)
    try:
        assert part.lifespan is not None
        assert [(ws.name, access) for ws, access in part.grants.granted("ada")] == [
            ("notes", Access.WRITE),
            ("proj", Access.READ),
        ]
        assert set(stores) == {"notes", "proj"}  # the run-time folder's store is there too
        # Later grants (any process) are seen on the next lookup, through the same table.
        (tmp_path / "shared" / "more").mkdir()
        SetupStore(tmp_path / "state", clock=time.time).grant(
            "ada", str(tmp_path / "shared" / "more"), Access.WRITE
        )
        assert "more" in [ws.name for ws, _ in part.grants.granted("ada")]
    finally:
        part.close()
        root.close()


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_an_allowlist_folder_that_cannot_be_opened_is_a_setup_error_and_leaves_nothing_open(
    tmp_path: Path,
) -> None:
    workspaces, stores, root = _configured(tmp_path)
    (tmp_path / "shared").mkdir()
    policy = SetupPolicy(allow=(str(tmp_path / "shared"), str(tmp_path / "missing")))
    before = _open_fds()
    with pytest.raises(SetupError, match=r"cannot open setup allowlist folder .*missing"):
        _part(tmp_path, policy, stores, workspaces)
    assert _open_fds() == before  # the first parent's Root was closed again
    root.close()
