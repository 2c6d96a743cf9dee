"""Layer 3 on the host: a process jailed with Landlock cannot reach outside, even when it
bypasses layer 2 and opens host paths directly; inside its workspace and state dir it
still works, and it can still import the stdlib lazily."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox.jail import JailError, apply_landlock, landlock_abi, runtime_read_only_paths

ABI = landlock_abi()
pytestmark = pytest.mark.skipif(ABI is None, reason="this kernel offers no Landlock")
CHILD = Path(__file__).with_name("landlock_child.py")
CHILD_TIMEOUT_S = 60  # the child does a few dozen syscalls; a minute means it hung
DENIED = {"EACCES", "EPERM"}


def run_child(mode: str, tmp: Path) -> dict[str, Any]:
    workspace, state, outside = tmp / "notes", tmp / "state", tmp / "outside"
    for d in (workspace, state, outside):
        d.mkdir(parents=True)
    (outside / "secret.txt").write_text("SECRET")
    proc = subprocess.run(
        [sys.executable, str(CHILD), mode, str(workspace), str(state), str(outside)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    result["_outside"] = outside
    return result


@pytest.fixture(scope="module")
def jailed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_child("jail", tmp_path_factory.mktemp("landlock"))


def test_jail_reports_the_kernel_abi_and_applied(jailed: dict[str, Any]) -> None:
    assert jailed["report"] == {"abi": ABI, "applied": True}
    assert jailed["before_read_outside"] == "ok"  # the denials below are the jail's doing


@pytest.mark.parametrize(
    "attempt",
    [
        "read_etc_passwd",
        "read_planted_outside",
        "create_outside",
        "list_root_dir",
        "symlink_in_workspace",
        "mkfifo_in_workspace",
        "exec_program",
        "thread_started_after_reads_etc_passwd",
    ],
)
def test_jailed_process_is_denied_outside_and_dangerous_ops(
    jailed: dict[str, Any], attempt: str
) -> None:
    assert jailed[attempt] in DENIED


def test_nothing_was_created_outside(jailed: dict[str, Any]) -> None:
    assert sorted(p.name for p in jailed["_outside"].iterdir()) == ["secret.txt"]


@pytest.mark.skipif(ABI is not None and ABI < 4, reason="TCP rules need Landlock ABI 4")
def test_tcp_connect_and_bind_denied_except_the_allowed_port(jailed: dict[str, Any]) -> None:
    assert jailed["tcp_connect_loopback"] in DENIED
    assert jailed["tcp_connect_allowed_port"] == "ok"
    assert jailed["tcp_bind_other_port"] in DENIED
    assert jailed["tcp_bind_allowed_port"] == "ok"


@pytest.mark.skipif(ABI is not None and ABI < 6, reason="scopes need Landlock ABI 6")
def test_abstract_unix_sockets_and_signals_are_scoped(jailed: dict[str, Any]) -> None:
    assert jailed["abstract_unix_connect_outside_domain"] in DENIED
    assert jailed["signal_parent"] in DENIED


@pytest.mark.parametrize(
    "attempt",
    [
        "ws_create",
        "ws_read",
        "ws_mkdir",
        "ws_rename_across_dirs",
        "ws_truncate",
        "ws_list",
        "ws_unlink",
        "ws_rmdir",
        "state_write",
        "state_replace",
        "state_read",
    ],
)
def test_workspace_and_state_dir_stay_fully_usable(jailed: dict[str, Any], attempt: str) -> None:
    assert jailed[attempt] == "ok"


def test_stdlib_c_extensions_still_import_lazily(jailed: dict[str, Any]) -> None:
    assert jailed["lazy_modules_not_yet_imported"], "modules were imported before the jail"
    assert jailed["lazy_stdlib_imports"] == "ok"


@pytest.mark.skipif(ABI is not None and ABI < 4, reason="needs a kernel newer than ABI 3")
def test_older_abi_rulesets_still_deny_files_and_report_what_they_cannot(
    tmp_path: Path,
) -> None:
    # Built as for ABI 1 and 3 on this newer kernel: files stay denied, TCP is not
    # handled (connect works), and the report names each gap.
    abi1 = run_child("abi1", tmp_path / "abi1")
    assert abi1["abi"] == 1
    assert "refer" not in abi1["handled_fs"] and abi1["handled_net"] == []
    assert abi1["read_etc_passwd"] == "EACCES"
    assert abi1["read_planted_outside"] == "EACCES"
    assert abi1["rename_across_dirs"] == "EXDEV"  # ABI 1 never allows reparenting
    assert abi1["tcp_connect_loopback"] == "ok"
    assert any(gap.startswith("refer:") for gap in abi1["not_applied"])
    assert any(gap.startswith("tcp bind/connect:") for gap in abi1["not_applied"])

    abi3 = run_child("abi3", tmp_path / "abi3")
    assert abi3["abi"] == 3
    assert {"refer", "truncate"} <= set(abi3["handled_fs"]) and "ioctl_dev" not in abi3[
        "handled_fs"
    ]
    assert abi3["rename_across_dirs"] == "ok"
    assert abi3["read_etc_passwd"] == "EACCES"
    assert abi3["tcp_connect_loopback"] == "ok"
    assert abi3["scoped"] == []
    assert not any(gap.startswith("refer:") for gap in abi3["not_applied"])
    assert any(gap.startswith("scopes:") for gap in abi3["not_applied"])


def test_refuses_when_another_thread_is_running_and_applies_nothing(tmp_path: Path) -> None:
    result = run_child("threaded", tmp_path)
    assert result["refused"] is True
    assert "one thread" in result["message"]
    assert result["read_etc_passwd_after"] == "ok"


def test_runtime_read_only_paths_cover_the_interpreter_and_never_root() -> None:
    paths = runtime_read_only_paths()
    assert "/" not in paths
    assert any(sys.base_prefix == p or sys.base_prefix.startswith(p + "/") for p in paths)
    etc = [p for p in paths if p == "/etc" or p.startswith("/etc/")]
    assert etc in ([], ["/etc/ld.so.cache"])


def test_bad_workspace_is_rejected_before_anything_is_applied(tmp_path: Path) -> None:
    # Refused during argument checks, so this process is never jailed.
    not_a_dir = tmp_path / "file.txt"
    not_a_dir.write_text("x")
    with pytest.raises(JailError, match="not a directory") as info:
        apply_landlock(writable=[str(not_a_dir)], read_only=[])
    assert str(tmp_path) not in info.value.message
    assert info.value.detail == str(not_a_dir)
    with pytest.raises(JailError, match="out of range"):
        apply_landlock(writable=[], read_only=[], allow_bind_tcp=[70000])
