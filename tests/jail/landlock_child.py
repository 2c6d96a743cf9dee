"""Child process for the Landlock tests: jail itself, then try to escape.

Run as ``python landlock_child.py MODE WORKSPACE STATE OUTSIDE``. Prints one JSON object
mapping each attempt to ``"ok"`` or the errno name it failed with. Layer 2 is bypassed on
purpose (plain ``open`` on host paths): this proves layer 3 holds on its own.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from sandbox.jail import JailError, apply_landlock, runtime_read_only_paths

LAZY_MODULES = ("decimal", "sqlite3", "ssl")  # C extensions backed by shared libraries


def attempt(fn: Callable[[], Any]) -> str:
    try:
        fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return "ok"


def write(path: str, data: str) -> None:
    with open(path, "x") as f:
        f.write(data)


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def main_jail(workspace: str, state: str, outside: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["lazy_modules_not_yet_imported"] = [m for m in LAZY_MODULES if m not in sys.modules]

    # Targets that work before the jail, so a failure afterwards is the jail's doing.
    listener = socket.create_server(("127.0.0.1", 0))
    listen_port = listener.getsockname()[1]
    # A second listener whose port the jail allows connecting to (a shared database's).
    database = socket.create_server(("127.0.0.1", 0))
    database_port = database.getsockname()[1]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        allowed_port = probe.getsockname()[1]
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0fsnotes-jail-test-{os.getpid()}")
    abstract.listen()
    out["before_read_outside"] = attempt(lambda: read(os.path.join(outside, "secret.txt")))

    ws_fd = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    report = apply_landlock(
        writable=[ws_fd],
        state_dirs=[state],
        read_only=runtime_read_only_paths(),
        allow_bind_tcp=[allowed_port],
        allow_connect_tcp=[database_port],
    )
    out["report"] = {"abi": report.abi, "applied": report.applied}

    out["read_etc_passwd"] = attempt(lambda: read("/etc/passwd"))
    out["read_planted_outside"] = attempt(lambda: read(os.path.join(outside, "secret.txt")))
    out["create_outside"] = attempt(lambda: write(os.path.join(outside, "new.txt"), "x"))
    out["list_root_dir"] = attempt(lambda: os.listdir("/"))
    out["symlink_in_workspace"] = attempt(
        lambda: os.symlink("note.md", os.path.join(workspace, "link.md"))
    )
    out["mkfifo_in_workspace"] = attempt(lambda: os.mkfifo(os.path.join(workspace, "fifo")))
    out["exec_program"] = attempt(lambda: subprocess.run(["/bin/true"], check=False))

    def connect_tcp() -> None:
        with socket.create_connection(("127.0.0.1", listen_port), timeout=5):
            pass

    def bind_tcp(port: int) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))

    def connect_abstract() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(f"\0fsnotes-jail-test-{os.getpid()}")

    def connect_database() -> None:
        with socket.create_connection(("127.0.0.1", database_port), timeout=5):
            pass

    out["tcp_connect_loopback"] = attempt(connect_tcp)
    out["tcp_connect_allowed_port"] = attempt(connect_database)
    out["tcp_bind_other_port"] = attempt(lambda: bind_tcp(0))
    out["tcp_bind_allowed_port"] = attempt(lambda: bind_tcp(allowed_port))
    out["abstract_unix_connect_outside_domain"] = attempt(connect_abstract)
    out["signal_parent"] = attempt(lambda: os.kill(os.getppid(), 0))

    # Inside the workspace: the whole life of a note.
    ws = workspace
    out["ws_create"] = attempt(lambda: write(os.path.join(ws, "note.md"), "hello"))
    out["ws_read"] = attempt(lambda: read(os.path.join(ws, "note.md")))
    out["ws_mkdir"] = attempt(lambda: os.mkdir(os.path.join(ws, "sub")))
    out["ws_rename_across_dirs"] = attempt(
        lambda: os.rename(os.path.join(ws, "note.md"), os.path.join(ws, "sub", "note.md"))
    )
    out["ws_truncate"] = attempt(lambda: os.truncate(os.path.join(ws, "sub", "note.md"), 1))
    out["ws_list"] = attempt(lambda: os.listdir(ws))
    out["ws_unlink"] = attempt(lambda: os.unlink(os.path.join(ws, "sub", "note.md")))
    out["ws_rmdir"] = attempt(lambda: os.rmdir(os.path.join(ws, "sub")))
    out["state_write"] = attempt(lambda: write(os.path.join(state, "replay.db"), "x"))
    out["state_replace"] = attempt(
        lambda: os.replace(os.path.join(state, "replay.db"), os.path.join(state, "r2.db"))
    )
    out["state_read"] = attempt(lambda: read(os.path.join(state, "r2.db")))

    def lazy_imports() -> None:
        for name in LAZY_MODULES:
            __import__(name)

    out["lazy_stdlib_imports"] = attempt(lazy_imports)

    thread_result: list[str] = []
    t = threading.Thread(target=lambda: thread_result.append(attempt(lambda: read("/etc/passwd"))))
    t.start()
    t.join()
    out["thread_started_after_reads_etc_passwd"] = thread_result[0]
    listener.close()
    abstract.close()
    return out


def main_threaded(workspace: str) -> dict[str, Any]:
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        apply_landlock(writable=[workspace], read_only=runtime_read_only_paths())
    except JailError as exc:
        result = {"refused": True, "message": exc.message}
    else:
        result = {"refused": False, "message": ""}
    stop.set()
    t.join()
    result["read_etc_passwd_after"] = attempt(lambda: read("/etc/passwd"))
    return result


def main_doctor(workspace: str, state: str) -> dict[str, Any]:
    from fsnotes.app import doctor
    from sandbox import jail, probe

    apply_landlock(writable=[workspace], state_dirs=[state], read_only=runtime_read_only_paths())
    report = doctor.report()
    text = doctor.format_text(report)
    jail._applied = None  # forget our own record: detection must then see the effect
    facts = probe.probe()
    return {"report": report, "text": text, "detected": facts.landlocked}


def main_older_abi(abi: int, workspace: str, outside: str) -> dict[str, Any]:
    """Build the ruleset as for a kernel with an older ABI (newer kernels accept it)."""
    from sandbox import jail

    jail.landlock_status = lambda: (abi, "")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    os.mkdir(os.path.join(workspace, "sub"))
    write(os.path.join(workspace, "a.md"), "a")
    report = apply_landlock(writable=[workspace], read_only=runtime_read_only_paths())

    def connect_tcp() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass

    out = {
        "abi": report.abi,
        "handled_fs": report.handled_fs,
        "handled_net": report.handled_net,
        "scoped": report.scoped,
        "not_applied": report.not_applied,
        "read_etc_passwd": attempt(lambda: read("/etc/passwd")),
        "read_planted_outside": attempt(lambda: read(os.path.join(outside, "secret.txt"))),
        "rename_across_dirs": attempt(
            lambda: os.rename(os.path.join(workspace, "a.md"), os.path.join(workspace, "sub/a.md"))
        ),
        "tcp_connect_loopback": attempt(connect_tcp),
    }
    listener.close()
    return out


def main() -> None:
    mode, workspace, state, outside = sys.argv[1:5]
    if mode.startswith("abi"):
        result = main_older_abi(int(mode[3:]), workspace, outside)
    elif mode == "jail":
        result = main_jail(workspace, state, outside)
    elif mode == "doctor":
        result = main_doctor(workspace, state)
    elif mode == "threaded":
        result = main_threaded(workspace)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
