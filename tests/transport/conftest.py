"""Servers for the HTTP transport tests: one per test module (a start costs about 2 s), fresh
ones where a test changes what others would see."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from transport.http_support import (
    HttpServer,
    Raw,
    add_token,
    make_workspace,
    start_demo,
    start_fsnotes,
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("http")


@pytest.fixture(scope="module")
def workspace(home: Path) -> Path:
    return make_workspace(home)


@pytest.fixture(scope="module")
def state(home: Path) -> Path:
    return home / "state"


@pytest.fixture(scope="module")
def token(state: Path) -> str:
    return add_token(state, "ada")


@pytest.fixture(scope="module")
def server(workspace: Path, state: Path, token: str) -> Iterator[HttpServer]:
    with start_fsnotes(workspace, state) as s:
        yield s


@pytest.fixture
def raw(server: HttpServer, token: str) -> Iterator[Raw]:
    client = Raw(server, token)
    yield client
    client.close()


@pytest.fixture(scope="module")
def demo_token() -> str:
    return "fsn_" + secrets.token_urlsafe(32)


@pytest.fixture(scope="module")
def other_token() -> str:
    return "fsn_" + secrets.token_urlsafe(32)


@pytest.fixture(scope="module")
def marks(home: Path) -> Path:
    path = home / "marks"
    path.mkdir()
    return path


@pytest.fixture(scope="module")
def demo(marks: Path, demo_token: str, other_token: str) -> Iterator[HttpServer]:
    with start_demo(marks, demo_token, other_token) as s:
        yield s


@pytest.fixture
def draw(demo: HttpServer, demo_token: str) -> Iterator[Raw]:
    client = Raw(demo, demo_token)
    yield client
    client.close()


@pytest.fixture
def fresh_draw(tmp_path: Path, demo_token: str) -> Iterator[Raw]:
    """A raw client of a demo server of its own (for tests that count sessions)."""
    path = tmp_path / "marks"
    path.mkdir()
    with start_demo(path, demo_token) as s:
        client = Raw(s, demo_token)
        yield client
        client.close()
