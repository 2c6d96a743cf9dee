"""Consent (fsnotes/security/consent.py): what a sealed question is bound to, when a retry
is asked again, refused or acted on, and what counts as the person's answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fsnotes.security.consent import (
    METHOD,
    Answer,
    Binding,
    ConsentRefused,
    Subject,
    answer_of,
    open_state,
)
from fsnotes.security.seal import Keyring, Sealer, digest_arguments

SUBJECT = Subject(what="confirmation", nothing="nothing was deleted", tool="notes_delete")
NOW = 1_000_000.0


@dataclass(frozen=True)
class Flow:
    """A flow's state as a flow keeps it: its binding and one field of its own."""

    binding: Binding
    note: str

    def encode(self, expires: float) -> dict[str, Any]:
        return {"binding": self.binding.encode(), "note": self.note, "exp": expires}

    @classmethod
    def decode(cls, payload: Mapping[str, Any]) -> Flow:
        return cls(Binding.decode(payload["binding"]), str(payload["note"]))


def binding(principal: str = "ada", **arguments: Any) -> Binding:
    return Binding.of_call(
        principal, "notes_delete", arguments or {"uri": "file:///a.md"}, "confirm"
    )


@pytest.fixture
def sealer(tmp_path: Path) -> Sealer:
    return Sealer(Keyring.load_or_create(tmp_path))


def opened(sealer: Sealer, state: object, expected: Binding, now: float = NOW) -> Flow | None:
    return open_state(
        sealer, state, now=now, decode=Flow.decode, expected=expected, subject=SUBJECT
    )


def test_a_binding_is_who_asked_what_and_round_trips() -> None:
    b = binding(uri="file:///a.md")
    assert (b.principal, b.tool, b.phase, b.method) == ("ada", "notes_delete", "confirm", METHOD)
    assert b.arguments == digest_arguments({"uri": "file:///a.md"})
    assert Binding.decode(b.encode()) == b
    assert binding(uri="file:///b.md") != b and binding("bob", uri="file:///a.md") != b


@pytest.mark.parametrize(
    "raw",
    [None, "binding", [], {"principal": "ada"}, {**binding().encode(), "phase": 3}],
)
def test_a_binding_that_is_not_complete_strings_does_not_decode(raw: object) -> None:
    with pytest.raises(ValueError):
        Binding.decode(raw)


def test_the_retry_of_the_same_request_gets_its_state(sealer: Sealer) -> None:
    state = sealer.seal(Flow(binding(), "a.md").encode(NOW + 60))
    assert opened(sealer, state, binding()) == Flow(binding(), "a.md")


def test_an_expired_state_or_one_sealed_by_another_key_is_asked_again(
    sealer: Sealer, tmp_path: Path
) -> None:
    state = sealer.seal(Flow(binding(), "a.md").encode(NOW + 60))
    assert opened(sealer, state, binding(), now=NOW + 60) is None
    (tmp_path / "elsewhere").mkdir()
    other = Sealer(Keyring.load_or_create(tmp_path / "elsewhere"))
    assert opened(other, state, binding()) is None


def test_a_state_of_a_format_no_longer_read_is_asked_again(sealer: Sealer) -> None:
    state = sealer.seal({"exp": NOW + 60, "v": 1, "b": "old"})
    assert opened(sealer, state, binding()) is None


@pytest.mark.parametrize("state", ["forged", 42, None])
def test_an_altered_or_forged_state_is_refused(sealer: Sealer, state: object) -> None:
    with pytest.raises(ConsentRefused) as caught:
        opened(sealer, state, binding())
    assert "not one this server issued unaltered; nothing was deleted" in str(caught.value)
    assert "Call notes_delete again without requestState" in str(caught.value)


def test_an_altered_byte_of_a_real_state_is_refused(sealer: Sealer) -> None:
    state = sealer.seal(Flow(binding(), "a.md").encode(NOW + 60))
    flipped = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
    with pytest.raises(ConsentRefused):
        opened(sealer, flipped, binding())


@pytest.mark.parametrize(
    "expected",
    [binding("bob"), binding(uri="file:///other.md"), Binding("ada", "notes_setup", "x", "y")],
)
def test_a_state_given_for_another_request_is_refused(sealer: Sealer, expected: Binding) -> None:
    state = sealer.seal(Flow(binding(), "a.md").encode(NOW + 60))
    with pytest.raises(ConsentRefused, match="given for a different request"):
        opened(sealer, state, expected)


def test_no_answer_is_never_consent_and_a_malformed_one_is_refused() -> None:
    assert answer_of(None, "k", SUBJECT) is None
    assert answer_of({"other": {"action": "accept"}}, "k", SUBJECT) is None
    for raw in ("accept", {"action": "maybe"}, {"content": {}}, ["accept"]):
        with pytest.raises(ConsentRefused, match=r"malformed.*; nothing was deleted"):
            answer_of({"k": raw}, "k", SUBJECT)


def test_an_answer_keeps_its_action_and_only_object_content() -> None:
    accepted = answer_of({"k": {"action": "accept", "content": {"confirm": True}}}, "k", SUBJECT)
    assert accepted == Answer("accept", {"confirm": True})
    assert answer_of({"k": {"action": "accept", "content": "yes"}}, "k", SUBJECT) == Answer(
        "accept", None
    )
    assert answer_of({"k": {"action": "decline"}}, "k", SUBJECT) == Answer("decline", None)
    assert answer_of({"k": {"action": "cancel"}}, "k", SUBJECT) == Answer("cancel", None)
