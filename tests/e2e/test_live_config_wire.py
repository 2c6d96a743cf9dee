"""What an operator changes under a running team takes effect without a restart: three
``fsnotes serve --http`` instances behind HAProxy on one PostgreSQL database, sharing one
configuration file (tests/balancer.py).

- A token removed from the configuration's ``[[http.token]]`` is refused by every instance
  at its next request, whether the file was replaced (an editor's save, ``mv``) or rewritten
  in place; the other tokens keep working, and one added there counts at once.
- After ``fsnotes rotate-key`` and the new ``seal-keys.json`` given to every instance (copied
  in place, or replaced by a rename), every instance seals with the new key at its next
  question; a question asked before still verifies everywhere, until its key is retired.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import balancer
import pytest

from fsnotes.security.seal import KEYRING_NAME, Keyring
from fsnotes.security.tokens import digest_of, new_token
from tests.e2e.test_balanced_wire import ask_delete, ok, tool
from tests.transport.http_support import Raw

pytestmark = pytest.mark.timeout(180)


class Endpoint:
    """What Raw needs of a server: its URL."""

    def __init__(self, url: str) -> None:
        self.url = url


def token_entry(principal: str, token: str) -> str:
    return (
        f"[[http.token]]\nprincipal = {json.dumps(principal)}\n"
        f'sha256 = "{digest_of(token).hex()}"\n'
    )


class Team:
    def __init__(self, deployment: balancer.Deployment, tokens: dict[str, str]) -> None:
        self.d = deployment
        self.tokens = tokens
        # The configuration as the deployment wrote it, without the token entries.
        self.base = deployment.config.read_text().split("[[http.token]]", 1)[0]

    def status(self, token: str, target: str | None) -> int:
        """tools/list with ``token`` through the balancer or one instance (by name)."""
        url = self.d.url if target is None else self.d.instances[target].server.url
        raw = Raw(Endpoint(url), token)  # type: ignore[arg-type]
        try:
            return int(raw.post(raw.request("tools/list")).status_code)
        finally:
            raw.close()

    def everywhere(self, token: str) -> list[int]:
        """The status of each instance, then of the balancer, for ``token``."""
        return [self.status(token, name) for name in self.d.instances] + [self.status(token, None)]

    def configure(self, principals: list[str], *, in_place: bool) -> None:
        """Rewrite the shared configuration with the token entries of ``principals``:
        replaced by a rename (as editors and ``mv`` do), or truncated and written in place."""
        text = self.base + "".join(token_entry(p, self.tokens[p]) for p in principals)
        config = self.d.config
        if in_place:
            with config.open("r+") as f:
                f.truncate(0)
                f.write(text)
            return
        tmp = config.with_name(config.name + ".new")
        tmp.write_text(text)
        tmp.chmod(0o600)
        os.replace(tmp, config)


@pytest.fixture(scope="module")
def team(pg_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    why = balancer.missing()
    if why is not None:
        pytest.skip(f"SKIPPED: {why}")
    dsn = str(pg_cluster.new_database())
    root = tmp_path_factory.mktemp("live")
    (root / "notes").mkdir()
    tokens = {name: new_token() for name in ("erin", "frank", "gus")}
    extra = token_entry("erin", tokens["erin"]) + token_entry("frank", tokens["frank"])
    try:
        with balancer.deployed(root, root / "notes", dsn, config_extra=extra) as d:
            yield Team(d, tokens)
    finally:
        pg_cluster.drop_database(dsn)


def test_a_token_removed_from_the_shared_configuration_is_refused_at_the_next_request(
    team: Team,
) -> None:
    erin, frank, gus = (team.tokens[p] for p in ("erin", "frank", "gus"))
    assert team.everywhere(erin) == [200] * 4
    assert team.everywhere(frank) == [200] * 4
    assert team.everywhere(gus) == [401] * 4

    # erin's token leaked: removed from the configuration (saved by a rename).
    team.configure(["frank"], in_place=False)
    assert team.everywhere(erin) == [401] * 4
    assert team.everywhere(frank) == [200] * 4
    assert team.everywhere(team.d.token) == [200] * 4  # the tokens file's, untouched

    # A token added there counts at once; one removed by an in-place rewrite is refused.
    team.configure(["gus"], in_place=True)
    assert team.everywhere(gus) == [200] * 4
    assert team.everywhere(frank) == [401] * 4
    assert team.everywhere(erin) == [401] * 4


def kid_of(answer: dict[str, Any]) -> str:
    """The key id a requestState (``v1.<kid>.<payload>.<mac>``) was sealed with."""
    return str(answer["requestState"]).split(".")[1]


def test_a_rotated_key_seals_at_the_next_question_without_a_restart(team: Team) -> None:
    d = team.d
    names = list(d.instances)
    states = {n: d.instances[n].state for n in names}
    old = Keyring.load_or_create(states["a"]).active
    clients = {n: Raw(Endpoint(d.instances[n].server.url), d.token) for n in names}  # type: ignore[arg-type]
    try:

        def ask(name: str, rel: str) -> dict[str, Any]:
            note = d.notes / rel
            note.write_text(f"# {rel}\n")
            return ask_delete(clients[name], note.as_uri(), rel)[1]

        before = {n: ask(n, f"before-{n}.md") for n in names}
        assert {kid_of(a) for a in before.values()} == {old}

        rotated = subprocess.run(
            [sys.executable, "-m", "fsnotes", "rotate-key", "--state-dir", str(states["a"])],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        new = Keyring.load_or_create(states["a"]).active
        assert new != old and new in rotated.stdout
        # b gets the file copied in place (same inode), c by a rename (a new inode).
        shutil.copyfile(states["a"] / KEYRING_NAME, states["b"] / KEYRING_NAME)
        tmp = states["c"] / "seal-keys.new"
        shutil.copyfile(states["a"] / KEYRING_NAME, tmp)  # mode 0644 from the umask
        os.replace(tmp, states["c"] / KEYRING_NAME)
        # A keyring readable by others is refused: c says so and keeps sealing with the old
        # key; made private, it is taken at the next question.
        assert kid_of(ask("c", "loose-c.md")) == old
        assert d.instances["c"].server.logged(f"cannot use the new {KEYRING_NAME}")
        (states["c"] / KEYRING_NAME).chmod(0o600)

        after = {n: ask(n, f"after-{n}.md") for n in names}
        assert {n: kid_of(a) for n, a in after.items()} == {n: new for n in names}
        # A state sealed before the rotation still verifies, on another instance.
        uri = (d.notes / "before-a.md").as_uri()
        _, done = tool(clients["c"], "notes_delete", {"uri": uri}, **before["a"])
        assert ok(done)["deleted"] is True and not (d.notes / "before-a.md").exists()
        uri = (d.notes / "after-b.md").as_uri()
        _, done = tool(clients["a"], "notes_delete", {"uri": uri}, **after["b"])
        assert ok(done)["deleted"] is True

        # The old key retired (dropped from every copy): its states stop verifying at once;
        # the person is asked again, nothing is deleted.
        ring = Keyring.load_or_create(states["a"])
        retired = Keyring(active=ring.active, keys={new: ring.keys[new]})
        for state in states.values():
            retired.save(state)
        uri = (d.notes / "before-b.md").as_uri()
        _, again = tool(clients["c"], "notes_delete", {"uri": uri}, **before["b"])
        assert again.get("resultType") == "input_required", again
        assert kid_of(again) == new and (d.notes / "before-b.md").exists()
        uri = (d.notes / "after-c.md").as_uri()
        _, done = tool(clients["b"], "notes_delete", {"uri": uri}, **after["c"])
        assert ok(done)["deleted"] is True
    finally:
        for raw in clients.values():
            raw.close()
