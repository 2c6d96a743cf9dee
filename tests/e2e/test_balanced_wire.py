"""Several instances behind a real load balancer: HAProxy 2.6 round-robin in front of three
``fsnotes serve --http`` processes sharing one PostgreSQL database, one seal-keys.json, one
token and one notes folder (tests/balancer.py). The 2026-07-28 revision is stateless, so any
instance may answer any request, the retry of a confirmation included; one-time use is
enforced by the shared replay store. Counted against the audit log (``fsnotes audit --json``)
and the files on disk."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import balancer
import httpx2
import pytest

from tests.transport.http_support import LEGACY, Raw, answer_of

pytestmark = pytest.mark.timeout(180)

FORM = {"elicitation": {"form": {}}}
BACKEND_HEADER = "x-fsnotes-backend"
# The request mix's length and width (the issue asks for a bounded run with 8 clients; 20 s
# keeps the whole file well under two minutes on a 2-core machine).
MIX_SECONDS = 20.0
MIX_CLIENTS = 8
# After a kill, the health check (200 ms) and the redispatch of refused connections take the
# instance out of the rotation; requests sent later than this must all be answered.
KILL_SETTLE_S = 1.0
# A client whose request was in flight on the killed instance asks again this many times.
RETRIES = 5
ALREADY_USED = "already used"


class Endpoint:
    """What Raw needs of a server: its URL."""

    def __init__(self, url: str) -> None:
        self.url = url


@pytest.fixture(scope="module")
def deploy_db(pg_cluster: Any) -> Iterator[str]:
    why = balancer.missing()
    if why is not None:
        pytest.skip(f"SKIPPED: {why}")
    dsn = str(pg_cluster.new_database())
    yield dsn
    pg_cluster.drop_database(dsn)


@pytest.fixture(scope="module")
def deployment(
    deploy_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[balancer.Deployment]:
    root = tmp_path_factory.mktemp("balanced")
    (root / "notes").mkdir()
    with balancer.deployed(root, root / "notes", deploy_db) as d:
        yield d


def client(d: balancer.Deployment, target: str | None = None) -> Raw:
    """A raw client of the balancer, or of one instance directly (``target``: its name)."""
    url = d.url if target is None else d.instances[target].server.url
    return Raw(Endpoint(url), d.token)  # type: ignore[arg-type]


def tool(raw: Raw, name: str, args: dict[str, Any], **extra: Any) -> tuple[str, dict[str, Any]]:
    """One tools/call; (the instance that answered, the call's result). A non-200 status is an
    httpx2.HTTPStatusError."""
    body = raw.request("tools/call", {"name": name, "arguments": args, **extra}, FORM)
    response = raw.post(body)
    response.raise_for_status()
    return response.headers.get(BACKEND_HEADER, "?"), answer_of(response)["result"]


def ok(result: dict[str, Any]) -> dict[str, Any]:
    assert not result.get("isError"), result
    return dict(result["structuredContent"])


def text_of(result: dict[str, Any]) -> str:
    assert result.get("isError") is True, result
    return str(result["content"][0]["text"])


def ask_delete(raw: Raw, uri: str, note_id: str, call: Any = None) -> tuple[str, dict[str, Any]]:
    """The first round of a confirmed delete; (who asked, the accepting retry's extra params).
    ``call``: how to send it (default :func:`tool`)."""
    who, first = (call or tool)(raw, "notes_delete", {"uri": uri})[:2]
    assert first["resultType"] == "input_required", first
    ((key, _),) = first["inputRequests"].items()
    return who, {
        "inputResponses": {
            key: {"action": "accept", "content": {"note_id": note_id, "confirm": True}}
        },
        "requestState": first["requestState"],
    }


def deletes_done(rows: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    return [
        r for r in rows if r["action"] == "delete" and r["path"] == path and r["outcome"] == "done"
    ]


def test_a_confirmation_asked_by_one_instance_is_executed_by_another_behind_the_balancer(
    deployment: balancer.Deployment,
) -> None:
    note = deployment.notes / "cross.md"
    note.write_text("# Cross\n")
    raw = client(deployment)
    try:
        asked_by, answer = ask_delete(raw, note.as_uri(), "cross.md")
        done_by, done = tool(raw, "notes_delete", {"uri": note.as_uri()}, **answer)
        assert ok(done)["deleted"] is True and not note.exists()
        assert asked_by != done_by, (asked_by, done_by)  # round-robin: another instance
        replay_by, replay = tool(raw, "notes_delete", {"uri": note.as_uri()}, **answer)
        assert replay_by not in (asked_by, done_by)  # and the third refuses the replay
        # (The note is gone, so the check before the claim already refuses it.)
        assert "Nothing was deleted" in text_of(replay)
    finally:
        raw.close()
    (row,) = deletes_done(deployment.audit(), "cross.md")
    assert (row["instance"], row["confirmed_by"], row["principal"]) == (done_by, "ada", "ada")


def _at_once(clients: dict[str, Raw], note: Path, answer: dict[str, Any]) -> dict[str, str]:
    """The same retry sent by every client at the same moment (a barrier); each one's
    outcome, "deleted" or the refusal's text."""
    barrier = threading.Barrier(len(clients))
    got: dict[str, str] = {}

    def retry(name: str) -> None:
        barrier.wait()
        _, result = tool(clients[name], "notes_delete", {"uri": note.as_uri()}, **answer)
        got[name] = "deleted" if not result.get("isError") else text_of(result)

    threads = [threading.Thread(target=retry, args=(n,)) for n in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return got


def test_the_same_retry_sent_to_all_three_instances_at_once_executes_once(
    deployment: balancer.Deployment,
) -> None:
    rounds = 4
    names = sorted(deployment.instances)
    clients = {n: client(deployment, n) for n in names}
    outcomes: list[list[str]] = []
    try:
        for i in range(rounds):
            rel = f"race-{i}.md"
            note = deployment.notes / rel
            note.write_text(f"# Race {i}\n")
            _, answer = ask_delete(clients[names[i % 3]], note.as_uri(), rel)
            got = _at_once(clients, note, answer)
            assert len(got) == len(names), got
            winners = [n for n, g in got.items() if g == "deleted"]
            assert len(winners) == 1, got
            for name, text in got.items():
                if name not in winners:
                    # The claim refuses it, or (when the winner had already removed the note
                    # before this one read it) the note is gone: nothing deleted either way.
                    assert ALREADY_USED in text or "Nothing was deleted" in text, text
            assert not note.exists()
            outcomes.append(sorted(got.values()))
    finally:
        for c in clients.values():
            c.close()
    losers = [text for per_round in outcomes for text in per_round if text != "deleted"]
    # The three retries did reach the one-time claim at the same moment, not one after the
    # other: at least one of them was refused by the claim itself.
    assert any(ALREADY_USED in text for text in losers), losers
    rows = deployment.audit()
    for i in range(rounds):
        assert len(deletes_done(rows, f"race-{i}.md")) == 1, [
            r for r in rows if r["path"] == f"race-{i}.md"
        ]


def test_a_2025_11_25_session_stays_on_the_instance_that_opened_it(
    deployment: balancer.Deployment,
) -> None:
    """A 2025-11-25 session lives in one process: the balancer routes by Mcp-Session-Id (a
    round-robin one would send its next request to an instance that answers 404)."""
    ws = {"workspaceUri": deployment.notes.as_uri()}
    raw = client(deployment)
    try:
        init = raw.post(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": LEGACY, "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}},
            modern=False,
        )  # fmt: skip
        assert init.status_code == 200, init.text
        opened_by = init.headers[BACKEND_HEADER]
        session = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": LEGACY}
        note = raw.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session,
                        modern=False)  # fmt: skip
        assert note.status_code == 202, note.text
        served = []
        for i in range(6):
            r = raw.post(
                {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                 "params": {"name": "notes_list", "arguments": ws}},
                session, modern=False,
            )  # fmt: skip
            assert r.status_code == 200, (r.status_code, r.text[:300])
            assert not answer_of(r)["result"].get("isError")
            served.append(r.headers[BACKEND_HEADER])
        assert set(served) == {opened_by}, served
        # Stateless requests meanwhile still go round all three.
        assert {tool(raw, "notes_list", ws)[0] for _ in range(3)} == set(deployment.instances)
    finally:
        raw.close()


def _retrying(raw: Raw, name: str, args: dict[str, Any], **extra: Any) -> tuple[str, Any, int]:
    """A call asked again after a 502/503 or a dropped connection (its reply was lost with
    the instance that died); (who answered, the result, how many attempts failed)."""
    failures = 0
    while True:
        try:
            who, result = tool(raw, name, args, **extra)
            return who, result, failures
        except (httpx2.HTTPStatusError, httpx2.TransportError):
            failures += 1
            if failures > RETRIES:
                raise
            time.sleep(0.1)


def test_killing_one_instance_mid_flight_the_others_keep_serving_and_nothing_runs_twice(
    pg_dsn: str, tmp_path: Path
) -> None:
    why = balancer.missing()
    if why is not None:
        pytest.skip(f"SKIPPED: {why}")
    notes = tmp_path / "notes"
    notes.mkdir()
    clients_n, seconds, kill_at = 4, 6.0, 2.0
    with balancer.deployed(tmp_path, notes, pg_dsn) as d:
        stop = threading.Event()
        killed_at: list[float] = []
        lock = threading.Lock()
        log: list[dict[str, Any]] = []  # one entry per confirmation
        errors: list[BaseException] = []

        def work(i: int) -> None:
            raw = client(d)
            try:
                k = 0
                while not stop.is_set():
                    rel = f"k{i}/n{k}.md"
                    k += 1
                    who, result, f1 = _retrying(
                        raw, "notes_create",
                        {"workspaceUri": notes.as_uri(), "path": rel, "content": "x\n"},
                    )  # fmt: skip
                    if result.get("isError"):
                        # Asked again after a lost reply: the first attempt had created it.
                        assert f1 and "already exists" in text_of(result), result
                    uri = (notes / rel).as_uri()
                    _, asked = ask_delete(raw, uri, rel, _retrying)
                    sent = time.monotonic()
                    who, result, f2 = _retrying(raw, "notes_delete", {"uri": uri}, **asked)
                    with lock:
                        log.append(
                            {"path": rel, "who": who, "sent": sent, "failures": f1 + f2,
                             "result": "deleted" if not result.get("isError")
                             else text_of(result)}
                        )  # fmt: skip
            except BaseException as exc:
                errors.append(exc)
            finally:
                raw.close()

        threads = [threading.Thread(target=work, args=(i,)) for i in range(clients_n)]
        for t in threads:
            t.start()
        # Killed once it has served some of the deletes (at least kill_at s in), while the
        # clients keep going; then they run on for the rest of the time.
        started = time.monotonic()
        while time.monotonic() < started + 30:
            with lock:
                served_by_b = sum(e["who"] == "b" for e in log)
            if served_by_b >= 3 and time.monotonic() >= started + kill_at:
                break
            time.sleep(0.05)
        d.instances["b"].kill()
        killed_at.append(time.monotonic())
        time.sleep(seconds - kill_at)
        stop.set()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors[0]
        rows = d.audit()

    killed = killed_at[0]
    after = [e for e in log if e["sent"] > killed + KILL_SETTLE_S]
    assert len(after) >= 10, len(after)  # the survivors kept serving through the balancer
    assert {e["who"] for e in after} == {"a", "c"}
    assert all(e["failures"] == 0 for e in after), [e for e in after if e["failures"]]
    # No more failed attempts than requests in flight at the kill (one per client at most).
    assert sum(e["failures"] for e in log) <= clients_n
    interrupted = 0
    for e in log:
        done = deletes_done(rows, e["path"])
        assert len(done) <= 1, done  # never executed twice
        assert not (notes / e["path"]).exists()
        if e["result"] == "deleted":
            assert len(done) == 1 and done[0]["instance"] == e["who"]
        else:
            # Only a retry whose first attempt died with instance b may be refused, and only
            # because that attempt had done the delete (the note is gone, the confirmation
            # used): b had recorded its intent in the audit log before it died.
            assert e["failures"], e
            assert ALREADY_USED in e["result"] or "does not exist" in e["result"], e
            by_b = [
                r
                for r in rows
                if (r["action"], r["path"], r["instance"]) == ("delete", e["path"], "b")
            ]
            assert by_b, [r for r in rows if r["path"] == e["path"]]
            interrupted += 1
    assert {e["who"] for e in log if e["sent"] < killed} >= {"b"}  # b served before the kill
    print(f"\nkill: {len(log)} confirmed deletes, {len(after)} after the kill, "
          f"{sum(e['failures'] for e in log)} attempts lost with b, {interrupted} executed by b "
          "before it died (their retry refused)")  # fmt: skip


class MixClient:
    """One client of the request mix: its own notes (creates, updates with etags, moves,
    confirmed deletes), and appends to one shared note every client updates under its
    etag (conflicts expected, each success counted)."""

    def __init__(self, d: balancer.Deployment, i: int, shared: Path) -> None:
        self.raw = client(d)
        self.i = i
        self.notes = d.notes
        self.shared = shared
        self.rand = random.Random(i)
        self.mine: dict[str, tuple[str, str]] = {}  # path -> (content, etag)
        self.count: Counter[str] = Counter()
        self.appended: list[str] = []
        self.k = 0

    def run(self, until: float) -> None:
        try:
            while time.monotonic() < until:
                self.step()
        finally:
            self.raw.close()

    def step(self) -> None:
        ws = self.notes.as_uri()
        choice = self.rand.random()
        if not self.mine or choice < 0.3:
            self.k += 1
            rel = f"c{self.i}/n{self.k}.md"
            content = f"# {rel}\n"
            _, r = tool(self.raw, "notes_create", {"workspaceUri": ws, "path": rel,
                                                    "content": content})  # fmt: skip
            self.mine[rel] = (content, ok(r)["etag"])
            self.count["create"] += 1
            return
        rel = self.rand.choice(sorted(self.mine))
        content, etag = self.mine[rel]
        uri = (self.notes / rel).as_uri()
        if choice < 0.5:
            new = content + f"v{self.count['update']}\n"
            _, r = tool(self.raw, "notes_update", {"uri": uri, "content": new, "etag": etag})
            self.mine[rel] = (new, ok(r)["etag"])
            self.count["update"] += 1
        elif choice < 0.65:
            self.k += 1
            to = f"c{self.i}/m{self.k}.md"
            _, r = tool(self.raw, "notes_move", {"uri": uri, "newPath": to, "etag": etag})
            del self.mine[rel]
            self.mine[to] = (content, ok(r)["etag"])
            self.count["move"] += 1
        elif choice < 0.8:
            _, answer = ask_delete(self.raw, uri, rel)
            _, r = tool(self.raw, "notes_delete", {"uri": uri}, **answer)
            assert ok(r)["deleted"] is True
            del self.mine[rel]
            self.count["delete"] += 1
        else:
            self.append_shared()

    def append_shared(self) -> None:
        uri = self.shared.as_uri()
        for _ in range(50):
            _, r = tool(self.raw, "notes_read", {"uri": uri})
            read = ok(r)
            line = f"client {self.i} line {len(self.appended)}"
            new = read["content"] + line + "\n"
            _, r = tool(self.raw, "notes_update", {"uri": uri, "content": new,
                                                    "etag": read["etag"]})  # fmt: skip
            if not r.get("isError"):
                self.appended.append(line)
                self.count["shared"] += 1
                return
            assert "changed since you read it" in text_of(r), r
            self.count["conflict"] += 1
        raise AssertionError("50 conflicts in a row on the shared note")


def test_a_bounded_request_mix_through_the_balancer_loses_and_duplicates_nothing(
    deployment: balancer.Deployment,
) -> None:
    shared = deployment.notes / "shared.md"
    raw = client(deployment)
    try:
        args = {"workspaceUri": deployment.notes.as_uri(), "path": "shared.md"}
        ok(tool(raw, "notes_create", {**args, "content": "# Shared\n"})[1])
    finally:
        raw.close()
    before = len(deployment.audit())
    clients = [MixClient(deployment, i, shared) for i in range(MIX_CLIENTS)]
    errors: list[BaseException] = []

    def run(c: MixClient) -> None:
        try:
            c.run(time.monotonic() + MIX_SECONDS)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(MIX_SECONDS + 60)
    assert not errors, errors[0]
    total: Counter[str] = Counter()
    for c in clients:
        total.update(c.count)
    assert min(total[k] for k in ("create", "update", "move", "delete", "shared")) > 0, total

    # The files: exactly every client's notes with the content it last wrote, nothing else.
    on_disk = {
        str(p.relative_to(deployment.notes)): p.read_text()
        for p in deployment.notes.rglob("*.md")
        if p.name != "shared.md"
    }
    expected = {rel: content for c in clients for rel, (content, _) in c.mine.items()}
    assert on_disk == expected
    lines = shared.read_text().splitlines()[1:]
    assert sorted(lines) == sorted(line for c in clients for line in c.appended)
    assert len(lines) == len(set(lines)) == total["shared"]

    # The audit log: one "done" row per mutation the clients saw succeed, no more, no fewer.
    rows = deployment.audit()[before:]
    done = Counter((r["action"], r["path"] == "shared.md") for r in rows if r["outcome"] == "done")
    assert done == Counter(
        {
            ("create", False): total["create"],
            ("update", False): total["update"],
            ("update", True): total["shared"],
            ("move", False): total["move"],
            ("delete", False): total["delete"],
        }
    ), (done, total)
    failed = [r for r in rows if r["outcome"] != "done"]
    assert len(failed) == total["conflict"] and all(r["path"] == "shared.md" for r in failed)
    assert {r["instance"] for r in rows} == set(deployment.instances)
    print(f"\nrequest mix: {dict(total)} in {MIX_SECONDS:g} s with {MIX_CLIENTS} clients")
