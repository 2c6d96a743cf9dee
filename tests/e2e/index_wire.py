"""Helpers for the search-index tests on the wire: a real `fsnotes serve` over stdio (see
wire.py), the generated vaults of benchmarks/vault.py, and what a client may never see.

The vault generator is imported by path (benchmarks/ is not a package) and each vault is
generated once per test session, into a session temporary folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from e2e.wire import Wire, meta

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# Words that only SQLite or FTS5 say: none may ever reach a client.
SQLITE_WORDS = re.compile(
    r"sqlite|fts5|malformed|not a database|syntax error|no such (?:table|column)|"
    r"unterminated|database disk image|disk I/O|unable to open|constraint failed",
    re.IGNORECASE,
)


def vault_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fsnotes_bench_vault", _BENCHMARKS / "vault.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_VAULTS: dict[int, tuple[Path, dict[str, Any]]] = {}


def generated_vault(factory: pytest.TempPathFactory, count: int) -> tuple[Path, dict[str, Any]]:
    """A generated vault of ``count`` notes (made once per session) and its facts. Tests
    must not change it."""
    if count not in _VAULTS:
        root = factory.mktemp(f"vault{count}") / "vault"
        facts = vault_module().generate(root, count)
        _VAULTS[count] = root, facts
    return _VAULTS[count]


def call(w: Wire, name: str, arguments: dict[str, Any], **extra_meta: Any) -> dict[str, Any]:
    """A modern tools/call (``extra_meta``: e.g. progressToken) and its whole response."""
    params: dict[str, Any] = {"_meta": {**meta({"elicitation": {"form": {}}}), **extra_meta}}
    params.update(name=name, arguments=arguments)
    return w.call("tools/call", params, timeout=30.0)


def ok(w: Wire, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The structured result of a tool call that must succeed."""
    response = call(w, name, arguments)
    assert "result" in response, response
    result = response["result"]
    assert result.get("isError") is not True, result
    return dict(result["structuredContent"])


def search(w: Wire, query: str, **arguments: Any) -> dict[str, Any]:
    return ok(w, "notes_search", {"query": query, "limit": 50, **arguments})


def found(w: Wire, query: str) -> list[str]:
    """Paths of the notes that match ``query``, sorted."""
    return sorted(hit["path"] for hit in search(w, query)["results"])


def found_all(w: Wire, query: str) -> list[str]:
    """Paths of the matches of ``query`` that hold every searched term (allTerms), sorted."""
    return sorted(hit["path"] for hit in search(w, query)["results"] if hit["allTerms"])


def listed(w: Wire, **arguments: Any) -> list[str]:
    """Every path notes_list gives (all pages)."""
    paths: list[str] = []
    cursor = None
    while True:
        more: dict[str, Any] = {"cursor": cursor} if cursor else {}
        page = ok(w, "notes_list", {"limit": 500, **arguments, **more})
        paths += [n["path"] for n in page["notes"]]
        cursor = page.get("nextCursor")
        if not cursor:
            return paths


def wait_for(check: Callable[[], bool], timeout: float, poll: float = 0.02) -> float | None:
    """Seconds until ``check()`` first held (polled), or None if not within ``timeout``."""
    start = time.monotonic()
    while True:
        if check():
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            return None
        time.sleep(poll)


def wait_complete(w: Wire, timeout: float = 20.0) -> dict[str, Any]:
    """Poll notes_list until the index says complete; its index info."""
    deadline = time.monotonic() + timeout
    while True:
        info = ok(w, "notes_list", {"limit": 1})["index"]
        if info["complete"]:
            return dict(info)
        assert time.monotonic() < deadline, info
        time.sleep(0.1)


def index_files(state: Path) -> list[Path]:
    return sorted((state / "index").glob("ws-*.sqlite3"))


def the_index(state: Path) -> Path:
    (path,) = index_files(state)
    return path


def assert_no_sqlite_text(w: Wire) -> None:
    """Nothing the client received names SQLite, FTS5 or their errors."""
    for line in w.received:
        text = line.decode(errors="replace")
        assert not SQLITE_WORDS.search(text), text[:500]


def error_text(response: dict[str, Any]) -> str:
    result = response["result"]
    assert result.get("isError") is True, result
    return " ".join(c.get("text", "") for c in result["content"])


def inotify_watches(pid: int) -> int | None:
    """How many inotify watches process ``pid`` holds (None: it has no inotify instance),
    from /proc/PID/fdinfo, which lists one ``inotify wd:`` line per watch."""
    fds = Path(f"/proc/{pid}/fd")
    total = None
    for fd in fds.iterdir():
        try:
            if os.readlink(fd) != "anon_inode:inotify":
                continue
            info = (Path(f"/proc/{pid}/fdinfo") / fd.name).read_text()
        except OSError:
            continue
        total = (total or 0) + sum(1 for line in info.splitlines() if line.startswith("inotify"))
    return total


def reindexed_counts(stderr: str) -> list[int]:
    """The '(re)indexed' counts of every full rescan the server logged."""
    return [int(m) for m in re.findall(r"(\d+) \(re\)indexed", stderr)]


def text_of(response: dict[str, Any]) -> str:
    return json.dumps(response)
