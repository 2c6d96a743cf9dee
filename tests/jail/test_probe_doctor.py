"""`sandbox.probe` and `fsnotes doctor`: facts match the kernel's own view, and the
report tells people which layers are active, with a warning when running as root."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from fsnotes.app import doctor
from jail.test_landlock_jail import run_child
from sandbox import probe
from sandbox.jail import JailReport, landlock_abi


def _status(key: str) -> str:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    raise KeyError(key)


def test_probe_matches_proc_status_and_the_landlock_probe() -> None:
    facts = probe.probe()
    assert facts.uid == os.getuid() and facts.euid == os.geteuid()
    assert facts.landlock_abi == landlock_abi()
    assert facts.no_new_privs == (_status("NoNewPrivs") == "1")
    assert facts.seccomp_filters == int(_status("Seccomp_filters"))
    assert facts.capabilities == probe.capability_names(int(_status("CapEff"), 16))
    assert facts.landlocked is False  # the test process itself is never jailed
    assert isinstance(facts.user_namespaces, bool), facts.user_namespaces_detail


def test_capability_names_decode_bits_including_unknown_ones() -> None:
    assert probe.capability_names(0) == []
    assert probe.capability_names(1 << 21 | 1) == ["chown", "sys_admin"]
    assert probe.capability_names(1 << 63) == ["cap_63"]


_REAL_FACTS = probe.probe()


def _facts(**changes: Any) -> probe.Facts:
    return dataclasses.replace(_REAL_FACTS, **changes)


def test_root_is_warned_about_and_a_normal_user_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "probe", lambda: _facts(uid=0, euid=0, capabilities=[]))
    as_root = doctor.report()
    assert as_root["layers"]["privileges"]["root"] is True
    assert "WARNING: Running as root" in doctor.format_text(as_root)

    monkeypatch.setattr(probe, "probe", lambda: _facts(uid=1000, euid=1000, capabilities=[]))
    as_user = doctor.report()
    assert not any("root" in w for w in as_user["warnings"])
    assert "WARNING: Running as root" not in doctor.format_text(as_user)


def test_missing_landlock_and_openat2_are_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        probe,
        "probe",
        lambda: _facts(
            landlock_abi=None,
            landlock_detail="this kernel has no Landlock",
            landlocked=False,
            openat2=False,
            openat2_detail="openat2 is not usable here (ENOSYS); the component walk is used",
        ),
    )
    report = doctor.report()
    text = doctor.format_text(report)
    assert report["layers"]["landlock"]["state"] == "unavailable"
    assert "Landlock (layer 3): unavailable: this kernel has no Landlock." in text
    assert "Path resolution (layer 2): component walk." in text
    assert any("Landlock is unavailable" in w for w in report["warnings"])


def test_report_is_json_and_uses_the_given_jail_report() -> None:
    given = JailReport(abi=3, applied=True, handled_fs=["read_file"], not_applied=["tcp: x"])
    report = doctor.report(given)
    json.dumps(report)
    assert report["layers"]["landlock"]["state"] == "applied"
    assert report["layers"]["landlock"]["applied"]["abi"] == 3
    text = doctor.format_text(report)
    assert "Landlock (layer 3): applied, ABI 3." in text
    assert "Not restricted: tcp: x." in text


@pytest.mark.skipif(landlock_abi() is None, reason="this kernel offers no Landlock")
def test_jailed_process_reports_landlock_applied_and_is_detected(tmp_path: Path) -> None:
    result = run_child("doctor", tmp_path)
    landlock = result["report"]["layers"]["landlock"]
    assert landlock["state"] == "applied"
    assert landlock["applied"]["abi"] == landlock_abi()
    assert "Landlock (layer 3): applied" in result["text"]
    assert result["detected"] is True


def test_doctor_reports_whether_the_setup_page_can_run() -> None:
    import json
    import subprocess
    import sys
    from importlib import metadata

    out = subprocess.run(
        [sys.executable, "-m", "fsnotes", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    page = json.loads(out)["setup_page"]
    assert page["available"] is True
    assert page["http_stack"] == {
        "starlette": metadata.version("starlette"),
        "uvicorn": metadata.version("uvicorn"),
    }
    text = subprocess.run(
        [sys.executable, "-m", "fsnotes", "doctor"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "Setup page (notes_setup): the setup page can run" in text


def test_doctor_states_the_search_index_watcher_budget_and_rescan_interval() -> None:
    import json
    import subprocess
    import sys

    from sandbox.watch import max_user_watches

    run = [sys.executable, "-m", "fsnotes", "doctor"]
    out = subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=60, check=True)
    index = json.loads(out.stdout)["search_index"]
    assert index["fts5"] is True and index["inotify"] is True
    kernel = max_user_watches()
    assert index["max_user_watches"] == kernel
    assert 0 < index["watch_budget"] <= (kernel or 0) // 4
    text = subprocess.run(run, capture_output=True, text=True, timeout=60, check=True).stdout
    assert "Search index: SQLite" in text and "one watch per folder" in text
    assert "Rescan: every 60 s" in text and "Docker Desktop" in text


def test_doctor_states_whether_history_is_kept_where_and_within_which_bounds(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    state = tmp_path / "state"
    run = [sys.executable, "-m", "fsnotes", "doctor", "--state-dir", str(state)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSNOTES_")}
    on = subprocess.run(run, capture_output=True, text=True, timeout=60, check=True, env=env)
    assert (
        "History: on; notes_update, notes_move and notes_delete keep what they replace in "
        f"{state}/history.sqlite3, at most 256 MiB and 30 days"
    ) in on.stdout
    assert "--no-history (FSNOTES_NO_HISTORY=1) keeps no copies" in on.stdout
    assert "History is off" not in on.stdout
    facts = json.loads(
        subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=60, env=env).stdout
    )["history"]
    assert facts == {
        "enabled": True,
        "store": f"{state}/history.sqlite3",
        "max_size_bytes": 256 * 1024 * 1024,
        "max_age_days": 30,
    }
    for how, extra_env in ((["--no-history"], {}), ([], {"FSNOTES_NO_HISTORY": "1"})):
        off = subprocess.run(
            [*run, *how], capture_output=True, text=True, timeout=60, env={**env, **extra_env}
        )
        assert "History: off (--no-history" in off.stdout, off.stdout
        assert "WARNING: History is off: a note a model overwrites" in off.stdout
    bounded = subprocess.run(
        run,
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "FSNOTES_HISTORY_MAX_SIZE_MIB": "64", "FSNOTES_HISTORY_MAX_AGE_DAYS": "7"},
    )
    assert "at most 64 MiB and 7 days" in bounded.stdout
    assert not state.exists()  # doctor only reports; it creates nothing


def _doctor_json(*args: str) -> dict[str, Any]:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "fsnotes", "doctor", "--json", *args],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_doctor_says_http_is_off_without_settings(tmp_path: Path) -> None:
    http = _doctor_json("--state-dir", str(tmp_path / "state"))["http"]
    assert http["enabled"] is False and "stdio" in http["exposes"]
    assert http["available"] is True  # the dev install has the http extra


def test_doctor_reports_the_http_settings_and_what_they_expose(tmp_path: Path) -> None:
    import subprocess
    import sys

    state = tmp_path / "state"
    token = subprocess.run(
        [sys.executable, "-m", "fsnotes", "token", "add", "--principal", "ada",
         "--state-dir", str(state)], capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    loopback = _doctor_json("--state-dir", str(state), "--http", "8123")
    http = loopback["http"]
    assert http["enabled"] and http["bind"] == "127.0.0.1" and http["loopback"] is True
    assert "127.0.0.1:8123" in http["allowed_hosts"] and http["token_principals"] == ["ada"]
    assert "this machine only" in http["exposes"] and token not in json.dumps(loopback)
    assert not any("loopback" in w for w in loopback["warnings"])
    exposed = _doctor_json("--state-dir", str(state), "--http", "0.0.0.0:8123", "--http-expose")
    assert "every network interface" in exposed["http"]["exposes"]
    assert any("not a loopback address" in w for w in exposed["warnings"])


def test_gaps_only_an_unreleased_kernel_closes_are_kept_apart() -> None:
    from sandbox.jail import NEWEST_RELEASED_ABI, abi_gaps

    released, not_yet = abi_gaps(NEWEST_RELEASED_ABI)
    assert released == [] and [g.split(":")[0] for g in not_yet] == [
        "connect to pathname Unix sockets"
    ]
    old, not_yet_old = abi_gaps(3)
    assert any(g.startswith("tcp bind/connect:") for g in old) and len(not_yet_old) == 1
    assert abi_gaps(9) == ([], [])


def test_a_start_on_a_released_kernel_warns_of_nothing_and_doctor_states_the_gap(
    tmp_path: Path,
) -> None:
    # Issue 24: every start warned "needs Landlock ABI 9 (Linux 7.1)", a kernel not released.
    import subprocess
    import sys

    from sandbox.jail import NEWEST_RELEASED_ABI

    abi = landlock_abi()
    if abi is None:
        pytest.skip("this kernel has no Landlock")
    workspace = tmp_path / "notes"
    workspace.mkdir()
    started = subprocess.run(
        [sys.executable, "-m", "fsnotes", "serve", "--workspace", str(workspace),
         "--state-dir", str(tmp_path / "state")],
        input="", capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert f"Landlock ABI {abi} applied" in started.stderr
    if abi >= 6:  # nothing a released kernel would add is missing below ABI 8 but TSYNC
        assert "WARNING" not in started.stderr, started.stderr
    assert "ABI 9" not in started.stderr
    report = _doctor_json("--state-dir", str(tmp_path / "state"))
    landlock = report["layers"]["landlock"]
    if abi <= NEWEST_RELEASED_ABI:
        assert any("pathname Unix sockets" in g for g in landlock["gaps_not_yet"])
        assert not any("pathname Unix sockets" in w for w in report["warnings"])
    text = subprocess.run(
        [sys.executable, "-m", "fsnotes", "doctor", "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert ("Left to a kernel not released yet" in text) == (abi <= NEWEST_RELEASED_ABI)
