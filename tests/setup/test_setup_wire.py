"""notes_setup end to end: a real `fsnotes serve` process (jailed), a raw JSON-RPC client, and
a person approving on the real setup page over HTTP. Exact wire shapes in both eras."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fsnotes.setup.code import CODE_FILE
from fsnotes.setup.flow import RETRY_WAIT_S
from fsnotes.setup.store import SetupStore
from tests.e2e.wire import LEGACY, Wire, meta
from tests.setup.person import Person, free_port, listening

URL_CAPS = {"elicitation": {"url": {}}}
# The Python SDK client was seen giving up on a call after 3 s (a short read timeout).
HOST_READ_TIMEOUT_S = 3.0
# The person approves this long after the host's answer (a person is slower, but the retry
# must also complete when the approval lands during its short wait).
PERSON_PAUSE_S = 0.3


@pytest.fixture
def place(tmp_path: Path) -> Path:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "home.md").write_text("# Home\n")
    proj = tmp_path / "shared" / "proj"
    proj.mkdir(parents=True)
    (proj / "plan.md").write_text("# Plan\n\nship it\n")
    (tmp_path / "shared" / "other").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path


def start(place: Path, port: int, *extra: str, always_on: bool = True) -> Wire:
    args = ["--setup-allow", str(place / "shared"), *extra]
    if always_on:
        args += ["--setup-port", str(port)]
    return Wire(place / "notes", place / "state", *args)


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def server(place: Path, port: int) -> Iterator[Wire]:
    w = start(place, port)
    yield w
    w.close()


def code_of(place: Path) -> str:
    return (place / "state" / CODE_FILE).read_text().strip()


def grant_at_terminal(place: Path) -> None:
    """The operator runs `fsnotes grant` (another process): read on shared/proj for ada."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "fsnotes",
            "grant",
            "--state-dir",
            str(place / "state"),
            "--setup-allow",
            str(place / "shared"),
            "--principal",
            "ada",
            "--workspace",
            str(place / "shared" / "proj"),
            "--access",
            "read",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )


def proj_args(place: Path, access: str = "write") -> dict[str, Any]:
    return {"workspaceUri": (place / "shared" / "proj").as_uri(), "access": access}


def first_round(w: Wire, args: dict[str, Any]) -> dict[str, Any]:
    reply = w.tool("notes_setup", args, URL_CAPS)
    result = reply["result"]
    assert result["resultType"] == "input_required", reply
    return result


def retry(w: Wire, args: dict[str, Any], state: str, action: str, **kw: Any) -> dict[str, Any]:
    return w.call(
        "tools/call",
        {
            "_meta": meta(URL_CAPS),
            "name": "notes_setup",
            "arguments": args,
            "inputResponses": {"connect_folder": {"action": action}},
            "requestState": state,
        },
        **kw,
    )["result"]


def test_modern_setup_approved_on_the_page_grants_the_folder(
    server: Wire, place: Path, port: int
) -> None:
    args = proj_args(place)
    first = first_round(server, args)
    ask = first["inputRequests"]["connect_folder"]
    assert ask["method"] == "elicitation/create"
    params = ask["params"]
    assert set(params) == {"mode", "message", "url"}  # no elicitationId in 2026-07-28
    assert params["mode"] == "url"
    assert params["url"].startswith(f"http://127.0.0.1:{port}/setup/")
    assert str(place / "shared" / "proj") in params["message"]
    assert code_of(place) not in str(first)  # the model never sees the code
    # Nothing is granted before the person acts.
    listed = server.tool("workspaces_list", {})["result"]["structuredContent"]
    assert [w["name"] for w in listed["workspaces"]] == ["notes"]

    person = Person(port)
    shown, _token = person.open(params["url"])
    # The page says who asks (the principal) and what the client reports itself to be.
    assert "ada" in shown.body and "reports itself as wire-test 1" in shown.body
    page = person.decide(params["url"], "approve", code_of(place))
    assert page.status == 200, page.body[:400]
    result = retry(server, args, first["requestState"], "accept")
    assert result["isError"] is False
    assert result["structuredContent"] == {
        "granted": True,
        "status": "granted",
        "message": result["structuredContent"]["message"],
        "workspaceUri": (place / "shared" / "proj").as_uri(),
        "access": "write",
    }
    listed = server.tool("workspaces_list", {})["result"]["structuredContent"]["workspaces"]
    proj = next(w for w in listed if w["uri"] == (place / "shared" / "proj").as_uri())
    assert proj["access"] == "write"
    read = server.tool("notes_read", {"uri": (place / "shared" / "proj" / "plan.md").as_uri()})
    assert "ship it" in read["result"]["structuredContent"]["content"]
    created = server.tool(
        "notes_create",
        {"workspaceUri": proj["uri"], "path": "new.md", "content": "# New\n"},
    )
    assert created["result"]["isError"] is False
    assert (place / "shared" / "proj" / "new.md").read_text() == "# New\n"
    # Write, not delete: the grant is exactly what was approved.
    deleting = server.tool("notes_delete", {"uri": proj["uri"] + "/new.md"}, {"elicitation": {}})
    assert deleting["result"]["isError"] is True
    # The same call again: already granted, no new setup.
    again = server.tool("notes_setup", args, URL_CAPS)["result"]
    assert again["structuredContent"]["status"] == "already_granted"
    # The grant is stored: another process sharing the state directory has it too.
    other = Wire(place / "notes", place / "state", "--setup-allow", str(place / "shared"))
    try:
        uris = [
            w["uri"]
            for w in other.tool("workspaces_list", {})["result"]["structuredContent"]["workspaces"]
        ]
        assert proj["uri"] in uris
    finally:
        other.close()


def test_retry_waits_for_the_person_and_completes_when_they_approve(
    server: Wire, place: Path, port: int
) -> None:
    args = proj_args(place, "read")
    first = first_round(server, args)
    url = first["inputRequests"]["connect_folder"]["params"]["url"]

    def person_later() -> None:
        time.sleep(PERSON_PAUSE_S)
        Person(port).decide(url, "approve", code_of(place))

    t = threading.Thread(target=person_later)
    t.start()
    began = time.monotonic()
    result = retry(server, args, first["requestState"], "accept", timeout=30)
    t.join()
    assert result["structuredContent"]["status"] == "granted"
    assert PERSON_PAUSE_S < time.monotonic() - began < RETRY_WAIT_S + 0.5


def test_a_retry_before_the_person_approved_answers_in_time_with_the_same_link(
    server: Wire, place: Path, port: int
) -> None:
    # The host retries at once (as hosts do once the browser is open); the person has not
    # approved. The answer must come before a host's read timeout, and point to the same page.
    args = proj_args(place, "read")
    first = first_round(server, args)
    ask = first["inputRequests"]["connect_folder"]
    began = time.monotonic()
    again = retry(server, args, first["requestState"], "accept", timeout=30)
    took = time.monotonic() - began
    assert again["resultType"] == "input_required", again
    assert again["inputRequests"]["connect_folder"] == ask  # the same link, the same setup
    assert took < HOST_READ_TIMEOUT_S
    # The person approves now; the next retry (with the new state) completes.
    Person(port).decide(ask["params"]["url"], "approve", code_of(place))
    done = retry(server, args, again["requestState"], "accept")
    assert done["structuredContent"]["status"] == "granted"


@pytest.mark.parametrize(("action", "status"), [("decline", "declined"), ("cancel", "cancelled")])
def test_decline_or_cancel_in_the_host_means_no_setup(
    server: Wire, place: Path, port: int, action: str, status: str
) -> None:
    args = proj_args(place)
    first = first_round(server, args)
    result = retry(server, args, first["requestState"], action)
    assert result["isError"] is False
    assert result["structuredContent"]["granted"] is False
    assert result["structuredContent"]["status"] == status
    assert "nothing was granted" in result["content"][0]["text"]
    # The page no longer offers the form.
    page, token = Person(port).open(first["inputRequests"]["connect_folder"]["params"]["url"])
    assert token is None and "cancel" in page.body.lower()
    assert SetupStore(place / "state", clock=time.time).grants() == []


def test_refused_on_the_page_is_a_plain_refusal(server: Wire, place: Path, port: int) -> None:
    args = proj_args(place)
    first = first_round(server, args)
    Person(port).decide(first["inputRequests"]["connect_folder"]["params"]["url"], "deny")
    result = retry(server, args, first["requestState"], "accept")
    assert result["isError"] is False
    assert result["structuredContent"]["status"] == "refused"
    assert SetupStore(place / "state", clock=time.time).grants() == []


def test_legacy_without_url_elicitation_is_an_is_error_result_with_the_command(
    place: Path, port: int
) -> None:
    w = start(place, port)
    try:
        w.call(
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        result = w.call("tools/call", {"name": "notes_setup", "arguments": proj_args(place)})[
            "result"
        ]
        assert result["isError"] is True and "fsnotes grant" in result["content"][0]["text"]
    finally:
        w.close()


@pytest.mark.parametrize(
    ("folder", "reason"),
    [
        ("outside", "outside the folders"),
        ("shared", "outside the folders"),
        ("shared/missing", "does not exist"),
        ("shared/proj/plan.md", "a file"),
    ],
)
def test_folders_outside_the_allowlist_are_refused_before_any_setup(
    place: Path, port: int, folder: str, reason: str
) -> None:
    w = start(place, port, always_on=False)
    try:
        result = w.tool("notes_setup", {"workspaceUri": (place / folder).as_uri()}, URL_CAPS)[
            "result"
        ]
        assert result["isError"] is True and reason in result["content"][0]["text"]
        assert not listening(port)  # no page was started
        assert SetupStore(place / "state", clock=time.time).pending_count() == 0
    finally:
        w.close()


def test_tampered_or_foreign_state_grants_nothing(server: Wire, place: Path, port: int) -> None:
    args = proj_args(place)
    first = first_round(server, args)
    Person(port).decide(
        first["inputRequests"]["connect_folder"]["params"]["url"], "approve", code_of(place)
    )
    state = first["requestState"]
    forged = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
    bad = retry(server, args, forged, "accept")
    assert bad["isError"] is True and "not one this server issued" in bad["content"][0]["text"]
    other = retry(server, proj_args(place, "delete"), state, "accept")
    assert other["isError"] is True and "different request" in other["content"][0]["text"]


def test_the_page_runs_only_while_a_setup_is_pending_without_setup_port(
    place: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSNOTES_SETUP_PORT", str(port))
    w = start(place, port, always_on=False)
    try:
        w.tool("workspaces_list", {})
        assert not listening(port)
        first = first_round(w, proj_args(place))
        assert listening(port)
        retry(w, proj_args(place), first["requestState"], "cancel")
    finally:
        w.close()
    assert not listening(port)


def test_cli_grant_completes_a_waiting_setup(server: Wire, place: Path) -> None:
    # The operator grants at a terminal (another process) while the host keeps retrying:
    # each retry answers in time with the same link until one sees the grant.
    args = proj_args(place, "read")
    first = first_round(server, args)
    ask = first["inputRequests"]["connect_folder"]
    t = threading.Thread(target=grant_at_terminal, args=(place,))
    t.start()
    state, rounds = first["requestState"], 0
    while True:
        began = time.monotonic()
        result = retry(server, args, state, "accept", timeout=30)
        assert time.monotonic() - began < HOST_READ_TIMEOUT_S
        rounds += 1
        if result.get("resultType") != "input_required":
            break
        assert result["inputRequests"]["connect_folder"] == ask
        assert rounds < 30, "the grant was never seen"
        state = result["requestState"]
    t.join()
    assert result["structuredContent"]["status"] == "granted"


# --- 2025-11-25 ----------------------------------------------------------------------------


def legacy_session(w: Wire, caps: dict[str, Any]) -> None:
    w.call(
        "initialize",
        {
            "protocolVersion": LEGACY,
            "capabilities": caps,
            "clientInfo": {"name": "t", "version": "1"},
        },
    )
    w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def read_until(w: Wire, predicate: Any, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = w.read(deadline - time.monotonic())
        if msg is not None and predicate(msg):
            return msg
    raise AssertionError("expected message did not arrive")


def test_legacy_live_url_elicitation_then_completion_notification_then_result(
    place: Path, port: int
) -> None:
    w = start(place, port)
    try:
        legacy_session(w, URL_CAPS)
        args = proj_args(place)
        w.send(
            {
                "jsonrpc": "2.0",
                "id": 10,
                "method": "tools/call",
                "params": {"name": "notes_setup", "arguments": args},
            }
        )
        ask = read_until(w, lambda m: m.get("method") == "elicitation/create")
        params = ask["params"]
        assert params["mode"] == "url" and params["elicitationId"]
        assert params["url"].endswith("/setup/" + params["elicitationId"])
        w.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}})

        # A second call for the same setup cannot wait as well: -32042 with the same link.
        w.send(
            {
                "jsonrpc": "2.0",
                "id": 11,
                "method": "tools/call",
                "params": {"name": "notes_setup", "arguments": args},
            }
        )
        second = read_until(w, lambda m: m.get("id") == 11)
        assert second["error"]["code"] == -32042
        assert second["error"]["data"]["elicitations"] == [
            {k: params[k] for k in ("mode", "message", "url", "elicitationId")}
        ]

        Person(port).decide(params["url"], "approve", code_of(place))
        seen: list[dict[str, Any]] = []
        result = read_until(w, lambda m: seen.append(m) or m.get("id") == 10)
        notes = [m for m in seen if m.get("method") == "notifications/elicitation/complete"]
        assert notes == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/elicitation/complete",
                "params": {"elicitationId": params["elicitationId"]},
            }
        ]  # once, before the result, though two calls asked
        assert result["result"]["structuredContent"]["status"] == "granted"
        # The client that got -32042 retries after the notification: now it is granted.
        again = w.call("tools/call", {"name": "notes_setup", "arguments": args})
        assert again["result"]["structuredContent"]["status"] == "already_granted"
    finally:
        w.close()


def test_legacy_decline_in_the_host_means_no_setup(place: Path, port: int) -> None:
    w = start(place, port)
    try:
        legacy_session(w, URL_CAPS)
        w.send(
            {
                "jsonrpc": "2.0",
                "id": 10,
                "method": "tools/call",
                "params": {"name": "notes_setup", "arguments": proj_args(place)},
            }
        )
        ask = read_until(w, lambda m: m.get("method") == "elicitation/create")
        w.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}})
        result = read_until(w, lambda m: m.get("id") == 10)["result"]
        assert result["structuredContent"]["status"] == "declined"
        assert SetupStore(place / "state", clock=time.time).grants() == []
    finally:
        w.close()


def test_an_always_on_page_whose_port_is_taken_stops_start_up_with_one_line(
    place: Path, port: int
) -> None:
    first = start(place, port)
    try:
        first.tool("workspaces_list", {})
        assert listening(port)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "fsnotes",
                "serve",
                "--workspace",
                str(place / "notes"),
                "--state-dir",
                str(place / "state2"),
                "--setup-allow",
                str(place / "shared"),
                "--setup-port",
                str(port),
            ],
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2
        assert "already in use" in done.stderr and "choose another --setup-port" in done.stderr
        assert "Traceback" not in done.stderr
    finally:
        first.close()


def test_legacy_call_completed_by_fsnotes_grant_is_notified_too(place: Path, port: int) -> None:
    w = start(place, port)
    try:
        legacy_session(w, URL_CAPS)
        args = proj_args(place, "read")
        w.send(
            {
                "jsonrpc": "2.0",
                "id": 10,
                "method": "tools/call",
                "params": {"name": "notes_setup", "arguments": args},
            }
        )
        ask = read_until(w, lambda m: m.get("method") == "elicitation/create")
        w.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}})
        # The operator grants at a terminal (another process): no page callback in ours.
        grant_at_terminal(place)
        seen: list[dict[str, Any]] = []
        result = read_until(w, lambda m: seen.append(m) or m.get("id") == 10)
        assert [
            m["params"] for m in seen if m.get("method") == "notifications/elicitation/complete"
        ] == [{"elicitationId": ask["params"]["elicitationId"]}]
        assert result["result"]["structuredContent"]["status"] == "granted"
    finally:
        w.close()


# --- what reaches the client, and what only the person sees ---------------------------------


def _secret_places(place: Path) -> list[bytes]:
    """Host paths the caller never sent and that point at the secret: never on the wire."""
    return [str(place / "state").encode(), CODE_FILE.encode()]


def test_nothing_the_client_receives_names_the_state_dir_or_the_code_file(
    place: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[bytes] = []
    # 2026-07-28: input_required, the person's page, granted, declined, -32021, a refusal.
    w = start(place, port)
    try:
        args = proj_args(place, "read")
        first = first_round(w, args)
        url = first["inputRequests"]["connect_folder"]["params"]["url"]
        page, _token = Person(port).open(url)
        # The page, which only the person sees, says where the code is.
        assert str(place / "state" / CODE_FILE) in page.body.replace("<wbr>", "")
        Person(port).decide(url, "approve", code_of(place))
        assert retry(w, args, first["requestState"], "accept")["structuredContent"]["granted"]
        raise_to = first_round(w, proj_args(place, "write"))
        declined = retry(w, proj_args(place, "write"), raise_to["requestState"], "decline")
        assert declined["structuredContent"]["status"] == "declined"
        other = {"workspaceUri": (place / "shared" / "other").as_uri(), "access": "read"}
        no_url = w.tool("notes_setup", other, {"elicitation": {"form": {}}})
        assert no_url["error"]["code"] == -32021
        outside = w.tool("notes_setup", {"workspaceUri": (place / "outside").as_uri()}, URL_CAPS)
        assert outside["result"]["isError"] is True
        # The allowlist is a host path this caller did not send either.
        assert str(place / "shared") not in outside["result"]["content"][0]["text"]
    finally:
        w.close()
    received += w.received
    # 2025-11-25: the live elicitation/create, its result; and an isError without URL support.
    w = start(place, free_port())
    try:
        legacy_session(w, URL_CAPS)
        w.send(
            {
                "jsonrpc": "2.0",
                "id": 10,
                "method": "tools/call",
                "params": {"name": "notes_setup", "arguments": proj_args(place, "delete")},
            }
        )
        ask = read_until(w, lambda m: m.get("method") == "elicitation/create")
        w.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}})
        done = read_until(w, lambda m: m.get("id") == 10)
        assert done["result"]["structuredContent"]["status"] == "declined"
    finally:
        w.close()
    received += w.received
    w = start(place, free_port())
    try:
        legacy_session(w, {"elicitation": {"form": {}}})
        result = w.call("tools/call", {"name": "notes_setup", "arguments": other})["result"]
        assert result["isError"] is True and "fsnotes grant" in result["content"][0]["text"]
    finally:
        w.close()
    received += w.received
    # The page cannot start (its port is taken): the isError names no host path either.
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        monkeypatch.setenv("FSNOTES_SETUP_PORT", str(squatter.getsockname()[1]))
        w = start(place, 0, always_on=False)
        try:
            busy = w.tool("notes_setup", other, URL_CAPS)["result"]
            assert busy["isError"] is True and "cannot start" in busy["content"][0]["text"]
        finally:
            w.close()
    received += w.received
    assert len(received) >= 10
    for line in received:
        for secret in _secret_places(place):
            assert secret not in line, line


def test_without_url_support_the_person_finds_the_exact_command_on_stderr(
    server: Wire, place: Path
) -> None:
    args = proj_args(place)
    reply = server.tool("notes_setup", args, {"elicitation": {"form": {}}})
    assert reply["error"]["code"] == -32021
    assert "fsnotes grant" in reply["error"]["message"]
    assert "error output" in reply["error"]["message"]
    err = server.stderr_until("fsnotes grant ")
    command = err[err.index("fsnotes grant ") :].splitlines()[0]
    assert f"--state-dir {place / 'state'}" in command
    assert f"--workspace {place / 'shared' / 'proj'}" in command
    assert command.endswith("--principal ada --access write")
    # The command works as printed (the person runs it at a terminal).
    argv = command.split()
    done = subprocess.run(
        [sys.executable, "-m", "fsnotes", *argv[1:]], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    listed = server.tool("workspaces_list", {})["result"]["structuredContent"]["workspaces"]
    assert (place / "shared" / "proj").as_uri() in [w["uri"] for w in listed]


def test_fsnotes_grant_tells_the_operator_which_workspace_overlaps(place: Path) -> None:
    # At a terminal the operator may see host paths; the client's message names none.
    (place / "shared" / "proj" / "sub").mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsnotes",
            "grant",
            "--state-dir",
            str(place / "state"),
            "--setup-allow",
            str(place / "shared"),
            "--workspace",
            str(place / "shared" / "proj" / "sub"),
            "--principal",
            "ada",
            "--access",
            "read",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FSNOTES_WORKSPACE": str(place / "shared" / "proj")},
    )
    assert done.returncode == 2
    assert "overlaps a workspace configured for this server" in done.stderr
    assert f"'proj' ({(place / 'shared' / 'proj').as_uri()})" in done.stderr


def test_every_notes_setup_result_carries_its_json_as_text(
    server: Wire, place: Path, port: int
) -> None:
    args = proj_args(place, "read")
    first = first_round(server, args)
    Person(port).decide(first["inputRequests"]["connect_folder"]["params"]["url"], "deny")
    results = [
        retry(server, args, first["requestState"], "accept"),
        server.tool("notes_setup", {"workspaceUri": (place / "notes").as_uri()}, URL_CAPS)[
            "result"
        ],
    ]
    assert [r["structuredContent"]["status"] for r in results] == ["refused", "already_granted"]
    for result in results:
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_the_client_app_name_is_shown_on_the_page_as_it_is(
    server: Wire, place: Path, port: int
) -> None:
    # clientInfo is free text from the host: a hidden character in it shows as an escape on
    # the page, neither drawn as something else nor silently dropped.
    reply = server.call(
        "tools/call",
        {
            "_meta": {
                **meta(URL_CAPS),
                "io.modelcontextprotocol/clientInfo": {"name": "Claude\u202eapp", "version": "1"},
            },
            "name": "notes_setup",
            "arguments": proj_args(place),
        },
    )
    url = reply["result"]["inputRequests"]["connect_folder"]["params"]["url"]
    page, _token = Person(port).open(url)
    assert "\u202e" not in page.body
    assert "reports itself as Claude\\u202eapp 1" in page.body
    # A lone surrogate (json.dumps sends the escape \udcff, as a hostile client may) cannot
    # be stored or drawn: it shows as U+FFFD, and the setup still starts.
    odd = server.call(
        "tools/call",
        {
            "_meta": {
                **meta(URL_CAPS),
                "io.modelcontextprotocol/clientInfo": {"name": "Odd\udcff", "version": "2"},
            },
            "name": "notes_setup",
            "arguments": proj_args(place, "delete"),
        },
    )
    url = odd["result"]["inputRequests"]["connect_folder"]["params"]["url"]
    page, _token = Person(port).open(url)
    assert "reports itself as Odd\ufffd 2" in page.body
