"""One Scope per request: a tool call consults the grants (and, with run-time setup on, the
grant store) once, and makes each catalog fresh once, whatever steps it takes.

The counts come from spies on the real objects of a real server (the real methods wrapped,
each call counted and passed on): the grants table's consultation (``Grants._current``,
where every authorization starts), ``Catalogs.fresh`` and the setup store's queries. Before
this, a notes_search consulted the grants and refreshed the catalog twice (once to wait for
the index, once to query it), a delete by title likewise, and a legacy request once more
for its root hints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.notes.index.indexer import Catalogs
from fsnotes.protocol.registry import InputRequired, JSONObject, RequestContext
from fsnotes.security.grants import Grants
from fsnotes.setup.store import SetupStore


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    calls: Counter[str] = Counter()

    def spy(cls: Any, name: str, key: str) -> None:
        real = getattr(cls, name)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            calls[key] += 1
            return real(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, wrapper)

    spy(Grants, "_current", "grants consulted")
    spy(Catalogs, "fresh", "catalog refreshes")
    spy(SetupStore, "generation", "grant store queries")
    spy(SetupStore, "grants", "grant store queries")
    return calls


@pytest.fixture
def setup_server(vault: Path, tmp_path: Path) -> Iterator[Server]:
    """The notes vault, with run-time setup configured (its store: the state directory's)."""
    (tmp_path / "shared").mkdir()
    cfg = load(
        workspaces=[str(vault)],
        state_dir=str(tmp_path / "state"),
        principal="ada",
        setup_allow=[str(tmp_path / "shared")],
        env={},
    )
    srv = build(cfg)
    yield srv
    srv.close()


def ctx(
    era: str = "modern",
    roots: tuple[JSONObject, ...] | None = None,
    state: str | None = None,
    responses: dict[str, Any] | None = None,
) -> RequestContext:
    return RequestContext(
        era="legacy" if era == "legacy" else "modern",
        protocol_version="2025-11-25" if era == "legacy" else "2026-07-28",
        method="tools/call",
        principal="ada",
        client_capabilities={"elicitation": {"form": {}}},
        client_info=None,
        roots=roots,
        input_responses=responses,
        request_state=state,
    )


def call(server: Server, name: str, arguments: dict[str, Any], context: RequestContext) -> Any:
    (tool,) = [t for t in server.app.tools if t.name == name]
    args = tool.input_model.model_validate(arguments)
    return anyio.run(tool.handler, context, args)


def test_a_search_consults_the_grants_and_refreshes_the_catalog_once(
    setup_server: Server, vault: Path, counted: Counter[str]
) -> None:
    found = call(
        setup_server, "notes_search", {"workspaceUri": vault.as_uri(), "query": "plan"}, ctx()
    )
    assert found.results
    assert counted == {"grants consulted": 1, "catalog refreshes": 1, "grant store queries": 1}


def test_a_legacy_search_derives_its_root_hints_from_the_same_consultation(
    setup_server: Server, vault: Path, counted: Counter[str]
) -> None:
    roots = ({"uri": (vault / "projects").as_uri()}, {"uri": "not a uri"})
    found = call(setup_server, "notes_search", {"query": "plan"}, ctx("legacy", roots))
    assert found.results  # the one granted workspace, no workspaceUri needed
    assert counted == {"grants consulted": 1, "catalog refreshes": 1, "grant store queries": 1}


def test_a_delete_by_title_consults_once_per_round(
    setup_server: Server, vault: Path, counted: Counter[str]
) -> None:
    args = {"workspaceUri": vault.as_uri(), "title": "budget"}
    asked = call(setup_server, "notes_delete", args, ctx())
    assert isinstance(asked, InputRequired)
    assert counted == {"grants consulted": 1, "catalog refreshes": 1, "grant store queries": 1}
    counted.clear()
    ((key, _),) = asked.requests.items()
    answer = {
        key: {"action": "accept", "content": {"note_id": "projects/budget.md", "confirm": True}}
    }
    done = call(setup_server, "notes_delete", args, ctx(state=asked.state, responses=answer))
    assert done.deleted is True and not (vault / "projects" / "budget.md").exists()
    # The retry is a request of its own: authorized again (a grant revoked while the person
    # decided stops it), once; it queries nothing of the index.
    assert counted == {"grants consulted": 1, "grant store queries": 1}


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("notes_list", {}),
        ("notes_tags", {}),
        ("notes_links", {"uri": "projects/plan.md"}),
        ("notes_move", {"uri": "projects/plan.md", "newPath": "plans/plan.md"}),
    ],
)
def test_other_index_queries_consult_and_refresh_once(
    setup_server: Server, vault: Path, counted: Counter[str], name: str, arguments: dict[str, Any]
) -> None:
    if "uri" in arguments:
        arguments = {**arguments, "uri": (vault / arguments["uri"]).as_uri()}
    call(setup_server, name, arguments, ctx())
    assert counted == {"grants consulted": 1, "catalog refreshes": 1, "grant store queries": 1}
