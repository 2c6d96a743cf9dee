"""History behind a real load balancer: three ``fsnotes serve --http`` processes on one
PostgreSQL database behind HAProxy round-robin (tests/balancer.py). Every instance must list
the same versions of a note, and a restore answered by any instance must write exactly the
bytes of the version the caller was shown (its etag), whichever instance kept it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import balancer
import pytest

from tests.e2e.test_balanced_wire import ask_delete, client, ok, text_of, tool

pytestmark = pytest.mark.timeout(180)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def deployment(
    pg_cluster: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[balancer.Deployment]:
    why = balancer.missing()
    if why is not None:
        pytest.skip(f"SKIPPED: {why}")
    dsn = str(pg_cluster.new_database())
    root = tmp_path_factory.mktemp("balanced-history")
    (root / "notes").mkdir()
    try:
        with balancer.deployed(root, root / "notes", dsn) as d:
            yield d
    finally:
        pg_cluster.drop_database(dsn)


def call(d: balancer.Deployment, instance: str, name: str, args: dict[str, Any]) -> Any:
    """One tools/call sent straight to one instance (not through the balancer)."""
    raw = client(d, instance)
    try:
        who, result = tool(raw, name, args)
    finally:
        raw.close()
    assert who == "?"  # no balancer on the way: the instance itself answered
    return result


def histories(d: balancer.Deployment, uri: str) -> dict[str, dict[str, Any]]:
    """notes_history of ``uri`` as each instance answers it."""
    return {n: ok(call(d, n, "notes_history", {"uri": uri})) for n in d.instances}


def test_every_instance_lists_the_versions_kept_through_any_other(
    deployment: balancer.Deployment,
) -> None:
    d = deployment
    note = d.notes / "hist" / "h.md"
    note.parent.mkdir()
    note.write_text("first text\n")
    uri = note.as_uri()
    ok(call(d, "a", "notes_update", {"uri": uri, "content": "second text\n"}))
    ok(call(d, "b", "notes_update", {"uri": uri, "content": "third text\n"}))
    seen = histories(d, uri)
    listed = {n: [(v["version"], v["etag"]) for v in h["versions"]] for n, h in seen.items()}
    assert [e for _, e in listed["a"]] == [sha("second text\n"), sha("first text\n")], listed
    assert listed["b"] == listed["a"] and listed["c"] == listed["a"], listed
    assert {h["total"] for h in seen.values()} == {2}
    # Through the balancer too: three calls, three instances, one answer.
    raw = client(d)
    try:
        answers = [tool(raw, "notes_history", {"uri": uri}) for _ in range(3)]
    finally:
        raw.close()
    assert {who for who, _ in answers} == set(d.instances)
    assert all([v["version"] for v in ok(r)["versions"]] == [v for v, _ in listed["a"]]
               for _, r in answers)  # fmt: skip


def test_a_restore_answered_by_another_instance_writes_exactly_the_version_shown(
    deployment: balancer.Deployment,
) -> None:
    d = deployment
    note = d.notes / "hist" / "r.md"
    note.parent.mkdir(exist_ok=True)
    note.write_text("the original text\n")
    uri = note.as_uri()
    # Each instance keeps one version, so that on any of them a per-instance counter names
    # one of its own versions, never a stranger's.
    for i, name in enumerate(d.instances):
        ok(call(d, name, "notes_update", {"uri": uri, "content": f"edit {i} by {name}\n"}))
    shown = ok(call(d, "a", "notes_history", {"uri": uri}))
    by_etag = {v["etag"]: v for v in shown["versions"]}
    original = by_etag[sha("the original text\n")]
    restored = ok(
        call(d, "b", "notes_restore",
             {"uri": uri, "version": original["version"], "etag": shown["currentEtag"]})
    )  # fmt: skip
    assert note.read_text() == "the original text\n"
    assert restored["etag"] == original["etag"] == sha(note.read_text())
    # And the other way round: a version kept by c, listed by b, restored by a.
    later = ok(call(d, "b", "notes_history", {"uri": uri}))
    by_c = next(v for v in later["versions"] if v["etag"] == sha("edit 2 by c\n"))
    again = ok(
        call(d, "a", "notes_restore",
             {"uri": uri, "version": by_c["version"], "etag": later["currentEtag"]})
    )  # fmt: skip
    assert note.read_text() == "edit 2 by c\n" and again["etag"] == by_c["etag"]
    # The restore through b kept what it replaced as a version every instance lists.
    final = histories(d, uri)
    assert final["a"]["versions"] == final["b"]["versions"] == final["c"]["versions"]
    assert final["c"]["versions"][0]["etag"] == sha("the original text\n")
    assert final["c"]["versions"][0]["tool"] == "notes_restore"


def test_a_note_deleted_through_one_instance_is_re_created_by_another(
    deployment: balancer.Deployment,
) -> None:
    d = deployment
    note = d.notes / "hist" / "d.md"
    note.parent.mkdir(exist_ok=True)
    note.write_text("deleted words\n")
    uri = note.as_uri()
    raw = client(d, "a")
    try:
        _, answer = ask_delete(raw, uri, "hist/d.md")
        assert ok(tool(raw, "notes_delete", {"uri": uri}, **answer)[1])["deleted"] is True
    finally:
        raw.close()
    assert not note.exists()
    gone = ok(call(d, "c", "notes_history", {"uri": uri}))
    ((version,),) = [gone["versions"]]
    assert (version["tool"], version["etag"]) == ("notes_delete", sha("deleted words\n"))
    back = ok(call(d, "b", "notes_restore", {"uri": uri, "version": version["version"]}))
    assert back["created"] is True and note.read_text() == "deleted words\n"


def test_a_version_id_that_names_nothing_is_no_such_version_on_every_instance(
    deployment: balancer.Deployment,
) -> None:
    d = deployment
    note = d.notes / "hist" / "n.md"
    note.parent.mkdir(exist_ok=True)
    note.write_text("untouched\n")
    uri = note.as_uri()
    other = d.notes / "hist" / "o.md"
    other.write_text("another note\n")
    ok(call(d, "a", "notes_update", {"uri": uri, "content": "changed once\n"}))
    ok(call(d, "b", "notes_update", {"uri": other.as_uri(), "content": "changed too\n"}))
    (kept,) = ok(call(d, "a", "notes_history", {"uri": uri}))["versions"]
    (others,) = ok(call(d, "b", "notes_history", {"uri": other.as_uri()}))["versions"]
    current = sha("changed once\n")
    for name in d.instances:
        # An id no store ever issued, and one naming another note's version.
        for vid in (kept["version"] + 7_777_777, others["version"]):
            text = text_of(
                call(d, name, "notes_restore", {"uri": uri, "version": vid, "etag": current})
            )
            assert "no such version" in text and "pruned" not in text, (name, text)
            assert "Nothing was written" in text
        assert note.read_text() == "changed once\n"
