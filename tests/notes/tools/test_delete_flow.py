"""Every checkpoint of the confirmed delete, below the protocol (both eras share it)."""

from __future__ import annotations

import base64
import contextlib
import json
import multiprocessing
import os
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.notes.tools.confirm import CONFIRM_KEY, STATE_LIFETIME_S, DeleteAnswer
from fsnotes.notes.tools.models import DeleteResult, NotesDeleteArgs
from fsnotes.notes.tools.service import Notes, ServiceError
from fsnotes.protocol.registry import ElicitForm, InputRequired
from fsnotes.security.consent import ConsentRefused
from fsnotes.security.grants import NotGranted


@dataclass(frozen=True)
class Outcome:
    """A finished call of the flow: its result body, or the sentence it refused with."""

    body: dict[str, Any] | None = None
    error: str | None = None


def settle(call: Callable[[], InputRequired | DeleteResult]) -> InputRequired | Outcome:
    try:
        out = call()
    except (ConsentRefused, ServiceError, NotGranted) as exc:  # the flow's one error style
        return Outcome(error=str(exc))
    if isinstance(out, InputRequired):
        return out
    return Outcome(body=out.model_dump(exclude_none=True))


def ada(server: Server) -> Notes:
    """The service acting for the principal the test server is configured with."""
    return server.service.acting_for(server.config.principal)


def resume(
    server: Server, args: dict[str, Any], state: str, responses: dict[str, Any] | None
) -> InputRequired | Outcome:
    typed = NotesDeleteArgs.model_validate(args)
    return settle(lambda: server.deletes.resume(ada(server), typed, state, responses))


def ask(server: Server, args: dict[str, Any]) -> InputRequired:
    out = server.deletes.ask(ada(server), NotesDeleteArgs.model_validate(args))
    assert isinstance(out, InputRequired), out
    return out


def answer(action: str, **content: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"action": action}
    if content:
        result["content"] = content
    return {CONFIRM_KEY: result}


def test_form_is_flat_and_lists_candidates(server: Server, vault: Path) -> None:
    q = ask(server, {"title": "plan"})
    form = q.requests[CONFIRM_KEY]
    assert isinstance(form, ElicitForm)
    schema = form.requested_schema
    assert schema["required"] == ["note_id", "confirm"]
    assert schema["properties"]["confirm"]["type"] == "boolean"
    options = schema["properties"]["note_id"]["oneOf"]
    assert [o["const"] for o in options] == ["projects/plan.md"]
    assert "modified" in options[0]["title"]
    for prop in schema["properties"].values():  # flat: primitives only
        assert prop["type"] in ("string", "boolean")
    assert q.state and str(vault) not in q.state


def test_single_uri_candidate_still_asks(server: Server, vault: Path) -> None:
    q = ask(server, {"uri": (vault / "inbox.md").as_uri()})
    assert [
        o["const"]
        for o in q.requests[CONFIRM_KEY].requested_schema["properties"]["note_id"]["oneOf"]
    ] == ["inbox.md"]  # type: ignore[union-attr]
    assert (vault / "inbox.md").exists()


def test_zero_candidates_is_an_error(server: Server) -> None:
    out = settle(
        lambda: server.deletes.ask(ada(server), NotesDeleteArgs(title="no such title anywhere"))
    )
    assert isinstance(out, Outcome) and out.error and "No note" in out.error


def test_accept_deletes_exactly_the_chosen_note(server: Server, vault: Path) -> None:
    args = {"title": "b"}  # "Budget", "Inbox", "Project plan"? only titles containing 'b'
    q = ask(server, args)
    ids = [
        o["const"]
        for o in q.requests[CONFIRM_KEY].requested_schema["properties"]["note_id"]["oneOf"]
    ]  # type: ignore[union-attr]
    assert "projects/budget.md" in ids
    out = resume(
        server, args, q.state or "", answer("accept", note_id="projects/budget.md", confirm=True)
    )
    assert isinstance(out, Outcome) and out.body and out.body["deleted"] is True
    assert not (vault / "projects/budget.md").exists()
    assert (vault / "inbox.md").exists()
    again = resume(
        server, args, q.state or "", answer("accept", note_id="projects/budget.md", confirm=True)
    )
    assert isinstance(again, Outcome) and again.error


def test_decline_keeps_the_note_and_consumes_the_confirmation(server: Server, vault: Path) -> None:
    args = {"title": "inbox"}
    q = ask(server, args)
    out = resume(server, args, q.state or "", answer("decline"))
    assert isinstance(out, Outcome) and out.body == {
        "deleted": False,
        "outcome": "declined",
        "message": "The person declined; nothing was deleted.",
    }
    late = resume(server, args, q.state or "", answer("accept", note_id="inbox.md", confirm=True))
    assert isinstance(late, Outcome) and late.error and "already used" in late.error
    assert (vault / "inbox.md").exists()


@pytest.mark.parametrize(
    "responses",
    [
        answer("cancel"),
        answer("accept", note_id="inbox.md", confirm=False),
        answer("accept"),  # no content: never consent
        answer("accept", note_id="projects/plan.md", confirm=True),  # not offered
        answer("accept", note_id="inbox.md", confirm="yes"),
        {CONFIRM_KEY: {"action": "maybe"}},
        {CONFIRM_KEY: "accept"},
    ],
)
def test_non_consent_deletes_nothing_and_state_stays_usable(
    server: Server, vault: Path, responses: dict[str, Any]
) -> None:
    args = {"title": "inbox"}
    q = ask(server, args)
    out = resume(server, args, q.state or "", responses)
    assert isinstance(out, Outcome)
    assert out.error or (out.body and out.body["deleted"] is False)
    assert (vault / "inbox.md").exists()
    ok = resume(server, args, q.state or "", answer("accept", note_id="inbox.md", confirm=True))
    assert isinstance(ok, Outcome) and ok.body and ok.body["deleted"]


def test_missing_answer_asks_again(server: Server, vault: Path) -> None:
    args = {"title": "inbox"}
    q = ask(server, args)
    assert isinstance(resume(server, args, q.state or "", None), InputRequired)
    assert isinstance(resume(server, args, q.state or "", {}), InputRequired)
    assert (vault / "inbox.md").exists()


def test_changed_title_cannot_reuse_a_confirmation(server: Server, vault: Path) -> None:
    q = ask(server, {"title": "inbox"})
    out = resume(
        server, {"title": "plan"}, q.state or "", answer("accept", note_id="inbox.md", confirm=True)
    )
    assert isinstance(out, Outcome) and out.error and "different request" in out.error
    assert (vault / "inbox.md").exists()


def test_tampered_state_is_refused(server: Server, vault: Path) -> None:
    args = {"title": "inbox"}
    q = ask(server, args)
    state = q.state or ""
    tampered = state[:-3] + ("AAA" if not state.endswith("AAA") else "BBB")
    out = resume(server, args, tampered, answer("accept", note_id="inbox.md", confirm=True))
    assert isinstance(out, Outcome) and out.error and "altered" in out.error
    assert (vault / "inbox.md").exists()


def test_other_principal_cannot_use_the_state(server: Server, vault: Path, tmp_path: Path) -> None:
    args = {"title": "inbox"}
    q = ask(server, args)
    other = build(
        load(workspaces=[str(vault)], state_dir=str(tmp_path / "state"), principal="eve", env={})
    )
    try:
        out = resume(other, args, q.state or "", answer("accept", note_id="inbox.md", confirm=True))
        assert isinstance(out, Outcome) and out.error and "different request" in out.error
    finally:
        other.close()
    assert (vault / "inbox.md").exists()


def test_expired_state_asks_again(server: Server, vault: Path) -> None:
    args = {"title": "inbox"}
    q = ask(server, args)
    real_clock = server.deletes.clock
    server.deletes.clock = lambda: real_clock() + STATE_LIFETIME_S + 1
    out = resume(server, args, q.state or "", answer("accept", note_id="inbox.md", confirm=True))
    assert isinstance(out, InputRequired)
    assert (vault / "inbox.md").exists()


def test_note_swapped_for_symlink_after_question(server: Server, vault: Path) -> None:
    args = {"title": "inbox"}
    q = ask(server, args)
    outside = vault.parent / "outside" / "secret.md"
    os.rename(vault / "inbox.md", vault.parent / "inbox-moved.md")
    os.symlink(outside, vault / "inbox.md")
    out = resume(server, args, q.state or "", answer("accept", note_id="inbox.md", confirm=True))
    assert isinstance(out, Outcome) and out.error
    assert outside.read_text().startswith("# Secret")
    assert os.path.islink(vault / "inbox.md")


def test_note_replaced_by_another_file_after_question(server: Server, vault: Path) -> None:
    args = {"title": "inbox"}
    q = ask(server, args)
    # the original stays alive elsewhere, so the replacement cannot reuse its inode
    original = (vault / "inbox.md").read_text()
    os.rename(vault / "inbox.md", vault.parent / "kept.md")
    (vault / "inbox.md").write_text(original)
    out = resume(server, args, q.state or "", answer("accept", note_id="inbox.md", confirm=True))
    assert isinstance(out, Outcome) and out.error and "changed or replaced" in out.error
    assert (vault / "inbox.md").read_text() == original


def test_note_edited_after_question(server: Server, vault: Path) -> None:
    args = {"title": "inbox"}
    q = ask(server, args)
    with open(vault / "inbox.md", "a") as f:
        f.write("one more line\n")
    out = resume(server, args, q.state or "", answer("accept", note_id="inbox.md", confirm=True))
    assert isinstance(out, Outcome) and out.error
    assert (vault / "inbox.md").exists()


def _resume_in_process(vault: str, state_dir: str, state: str, barrier: Any, out: Any) -> None:
    srv = build(load(workspaces=[vault], state_dir=state_dir, principal="ada", env={}))
    barrier.wait()
    result = resume(
        srv, {"title": "inbox"}, state, answer("accept", note_id="inbox.md", confirm=True)
    )
    assert isinstance(result, Outcome)
    out.put("deleted" if result.body and result.body["deleted"] else f"error: {result.error}")


def test_two_processes_given_one_confirmation_execute_it_once(
    server: Server, vault: Path, tmp_path: Path
) -> None:
    ctx = multiprocessing.get_context("spawn")
    for round_ in range(3):
        (vault / "inbox.md").write_text("# Inbox\n")
        decoy = vault / f"decoy-{round_}.md"
        q = ask(server, {"title": "inbox"})
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [
            ctx.Process(
                target=_resume_in_process,
                args=(str(vault), str(tmp_path / "state"), q.state, barrier, out),
            )
            for _ in range(2)
        ]
        for p in procs:
            p.start()
        results = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(30)
        assert sorted(r == "deleted" for r in results) == [False, True], results
        assert not (vault / "inbox.md").exists()
        assert not decoy.exists()


def test_note_recreated_with_same_text_after_question(server: Server, vault: Path) -> None:
    # unlink + create may hand the same inode number back; the sealed mtime still differs
    args = {"title": "inbox"}
    q = ask(server, args)
    original = (vault / "inbox.md").read_text()
    time.sleep(0.01)
    (vault / "inbox.md").unlink()
    (vault / "inbox.md").write_text(original)
    out = resume(server, args, q.state or "", answer("accept", note_id="inbox.md", confirm=True))
    assert isinstance(out, Outcome) and out.error and "changed or replaced" in out.error
    assert (vault / "inbox.md").read_text() == original


# --- what the person is shown ----------------------------------------------------------------

# Characters that draw as nothing or reorder what follows them; none may reach the person raw.
RLO, LRI, ZWSP, BEL = "\u202e", "\u2066", "\u200b", "\u0007"


def options_of(q: InputRequired) -> list[dict[str, Any]]:
    form = q.requests[CONFIRM_KEY]
    assert isinstance(form, ElicitForm)
    return list(form.requested_schema["properties"]["note_id"]["oneOf"])


def test_hostile_names_and_titles_reach_the_person_escaped(server: Server, vault: Path) -> None:
    # A right-to-left override draws the rest of a name backwards ("report-dm.doc.md"); a
    # zero-width space makes "re<U+200B>port.md" draw exactly like "report.md".
    (vault / f"report-{RLO}dm.cod.md").write_text("# Report\n")
    (vault / f"re{ZWSP}port.md").write_text(f"# Report{LRI} final{BEL}\n")
    (vault / "report.md").write_text("# Report\n")
    args = {"title": "report"}
    q = ask(server, args)
    form = q.requests[CONFIRM_KEY]
    assert isinstance(form, ElicitForm)
    options = options_of(q)
    shown = [o["const"] for o in options]
    assert sorted(shown) == ["re\\u200bport.md", "report-\\u202edm.cod.md", "report.md"]
    for text in [form.message, *shown, *(o["title"] for o in options)]:
        assert not any(ch in text for ch in (RLO, LRI, ZWSP, BEL)), text
    zw = next(o for o in options if o["const"] == "re\\u200bport.md")
    assert "“Report\\u2066 final\\u0007”" in zw["title"]
    # The person picks the option they saw; exactly that file goes.
    out = resume(
        server, args, q.state or "", answer("accept", note_id="re\\u200bport.md", confirm=True)
    )
    assert isinstance(out, Outcome) and out.body and out.body["deleted"] is True, out
    assert not (vault / f"re{ZWSP}port.md").exists()
    assert (vault / "report.md").exists() and (vault / f"report-{RLO}dm.cod.md").exists()


def test_the_form_message_shows_the_asked_title_escaped(server: Server, vault: Path) -> None:
    (vault / f"in{RLO}box.md").write_text(f"# In{RLO}box\n")
    q = ask(server, {"title": f"in{RLO}box"})
    form = q.requests[CONFIRM_KEY]
    assert isinstance(form, ElicitForm)
    assert RLO not in form.message and "“in\\u202ebox”" in form.message
    by_uri = ask(server, {"uri": (vault / f"in{RLO}box.md").as_uri()}).requests[CONFIRM_KEY]
    assert isinstance(by_uri, ElicitForm)
    assert RLO not in by_uri.message and "'in\\u202ebox.md'" in by_uri.message


def test_raw_name_is_not_an_offered_option(server: Server, vault: Path) -> None:
    # Only what was shown can be chosen: the raw name (never offered) deletes nothing.
    (vault / f"re{ZWSP}port.md").write_text("# Report\n")
    args = {"title": "report"}
    q = ask(server, args)
    out = resume(
        server, args, q.state or "", answer("accept", note_id=f"re{ZWSP}port.md", confirm=True)
    )
    assert isinstance(out, Outcome) and out.error and "not one of those offered" in out.error
    assert (vault / f"re{ZWSP}port.md").exists()


def test_names_equal_under_normalisation_give_options_that_look_different(
    server: Server, vault: Path
) -> None:
    nfc, nfd = unicodedata.normalize("NFC", "café.md"), unicodedata.normalize("NFD", "café.md")
    assert nfc != nfd
    for name in (nfc, nfd):
        (vault / name).write_text("# Café\n")
        os.utime(vault / name, ns=(1_700_000_000 * 10**9, 1_700_000_000 * 10**9))
    assert sorted(os.listdir(vault)).count(nfc) == 1 and nfd in os.listdir(vault)
    args = {"title": "café"}
    q = ask(server, args)
    options = options_of(q)
    assert len(options) == 2
    looks = {unicodedata.normalize("NFKC", o["title"]) for o in options}
    assert len(looks) == 2, [o["title"] for o in options]  # not two identical-looking lines
    consts = {unicodedata.normalize("NFKC", o["const"]) for o in options}
    assert len(consts) == 2
    by_const = {o["const"]: o for o in options}
    assert set(by_const) == {"caf\\u00e9.md", "cafe\\u0301.md"}
    out = resume(
        server, args, q.state or "", answer("accept", note_id="cafe\\u0301.md", confirm=True)
    )
    assert isinstance(out, Outcome) and out.body and out.body["deleted"] is True, out
    assert nfd not in os.listdir(vault) and nfc in os.listdir(vault)


# --- at most once: a confirmation whose removal fails after the claim is spent --------------


class _SwapInsideClaim:
    """The server's own replay store, with another writer replacing the note at the one
    instant between the claim and the removal (every check before the claim has passed)."""

    def __init__(self, real: Any, note: Path) -> None:
        self.real, self.note = real, note

    @contextlib.contextmanager
    def claim(self, nonce: str, expires_at: float) -> Iterator[None]:
        with self.real.claim(nonce, expires_at):
            other = self.note.with_name("replacement.tmp")
            other.write_text(self.note.read_text())
            os.replace(other, self.note)  # same text, another file
            yield

    def is_used(self, nonce: str) -> bool:
        return bool(self.real.is_used(nonce))


def _nonce_of(state: str) -> str:
    body = state.split(".")[2]
    return str(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))["nonce"])


def test_a_removal_that_fails_after_the_claim_spends_the_confirmation_and_says_so(
    server: Server, vault: Path
) -> None:
    args = {"title": "inbox"}
    q = ask(server, args)
    real = server.deletes.replay
    server.deletes.replay = _SwapInsideClaim(real, vault / "inbox.md")  # type: ignore[assignment]
    try:
        out = resume(
            server, args, q.state or "", answer("accept", note_id="inbox.md", confirm=True)
        )
    finally:
        server.deletes.replay = real
    assert isinstance(out, Outcome) and out.error, out
    assert "Nothing was deleted" in out.error and "used up" in out.error, out.error
    assert (vault / "inbox.md").exists()  # the replacement was not deleted
    assert real.is_used(_nonce_of(q.state or ""))  # spent: at most once
    again = resume(server, args, q.state or "", answer("accept", note_id="inbox.md", confirm=True))
    assert isinstance(again, Outcome) and again.error
    assert (vault / "inbox.md").exists()
    [row] = [r for r in server.audit.log.read() if r.action == "delete"]
    assert (row.outcome, row.path, row.confirmed_by) == ("failed", "inbox.md", "ada")
    assert row.detail is not None and row.detail.startswith("confirmation spent")


def test_the_answer_model_renders_the_form_exactly_as_hosts_get_it() -> None:
    one = [{"const": "inbox.md", "title": "inbox.md — “Inbox”"}]
    assert DeleteAnswer.form(one) == {
        "type": "object",
        "properties": {
            "note_id": {
                "type": "string",
                "title": "Note to delete",
                "oneOf": one,
                "default": "inbox.md",
            },
            "confirm": {
                "type": "boolean",
                "title": "Yes, delete this note permanently",
                "default": False,
            },
        },
        "required": ["note_id", "confirm"],
    }
    two = [*one, {"const": "b.md", "title": "b.md — “B”"}]
    assert "default" not in DeleteAnswer.form(two)["properties"]["note_id"]


@pytest.mark.parametrize(
    ("content", "refused"),
    [
        ({"note_id": "a.md", "confirm": True}, None),
        ({"note_id": "a.md", "confirm": False, "extra": 1}, None),  # other keys ignored
        ({"note_id": "b.md", "confirm": True}, "not one of those offered"),
        ({"note_id": 5, "confirm": True}, "not one of those offered"),
        ({"confirm": True}, "not one of those offered"),
        ({"note_id": "b.md", "confirm": "yes"}, "not one of those offered"),  # the note first
        ({"note_id": "a.md", "confirm": "true"}, "true or false"),  # strict: no coercion
        ({"note_id": "a.md", "confirm": 1}, "true or false"),
        ({"note_id": "a.md"}, "true or false"),  # a missing box is not an unticked one
    ],
)
def test_the_answer_model_validates_the_reply_against_the_notes_offered(
    content: dict[str, Any], refused: str | None
) -> None:
    offered = {"a.md": object()}
    if refused is None:
        got = DeleteAnswer.of(content, offered)  # type: ignore[arg-type]
        assert got.note_id == "a.md" and got.confirm is content["confirm"]
        return
    with pytest.raises(ConsentRefused, match=refused) as caught:
        DeleteAnswer.of(content, offered)  # type: ignore[arg-type]
    assert str(caught.value).endswith("nothing was deleted.")
