"""Consent: what a sealed question is bound to, and what the person's answer said.

Written once for every flow that asks a person before acting (the confirmed delete, the
out-of-band setup), in one error style: :class:`ConsentRefused`, whose text is one sentence
saying what was wrong and that nothing was done.

A question's state travels through the client (2026-07-28 ``requestState``), which the spec
calls attacker-controlled. So it is sealed (:mod:`fsnotes.security.seal`), and on the retry
everything it was bound to is checked before anything else is read from it: the principal,
the JSON-RPC method, the tool, a digest of the call's arguments and the phase of the flow
(:class:`Binding`). A state that is merely too old, or sealed under a key this deployment no
longer holds, is not an error: the flow asks again. Missing content is never consent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from fsnotes.security.seal import (
    Sealer,
    StateExpired,
    StateInvalid,
    StateUnknownKey,
    digest_arguments,
)

METHOD = "tools/call"
Action = Literal["accept", "decline", "cancel"]
_ACTIONS: tuple[Action, ...] = ("accept", "decline", "cancel")


class ConsentRefused(Exception):
    """The retry cannot be acted on; the message is one sentence ending in what was not done."""


@dataclass(frozen=True)
class Subject:
    """How messages name a flow: 'the confirmation', 'nothing was deleted', 'notes_delete'."""

    what: str  # "confirmation", "setup"
    nothing: str  # "nothing was deleted"
    tool: str


@dataclass(frozen=True)
class Binding:
    """Who asked what: a retry is acted on only with the same binding."""

    principal: str
    tool: str
    arguments: str  # digest_arguments() of the call's arguments
    phase: str
    method: str = METHOD

    @classmethod
    def of_call(
        cls, principal: str, tool: str, arguments: Mapping[str, Any], phase: str
    ) -> Binding:
        return cls(principal, tool, digest_arguments(arguments), phase)

    def encode(self) -> dict[str, str]:
        return {
            "principal": self.principal,
            "method": self.method,
            "tool": self.tool,
            "arguments": self.arguments,
            "phase": self.phase,
        }

    @classmethod
    def decode(cls, raw: object) -> Binding:
        if not isinstance(raw, Mapping):
            raise ValueError("binding is not an object")
        fields = [raw.get(k) for k in ("principal", "tool", "arguments", "phase", "method")]
        if not all(isinstance(f, str) for f in fields):
            raise ValueError("binding is incomplete")
        principal, tool, arguments, phase, method = (str(f) for f in fields)
        return cls(principal, tool, arguments, phase, method)


S = TypeVar("S")


def open_state(
    sealer: Sealer,
    state: object,
    *,
    now: float,
    decode: Callable[[Mapping[str, Any]], S],
    expected: Binding,
    subject: Subject,
) -> S | None:
    """The flow's own state from a sealed ``state`` bound to ``expected``.

    None when the flow should simply ask again: the state expired, was sealed by a key this
    deployment does not hold (rotated, another deployment), or is of an older format.
    :class:`ConsentRefused` when it was altered or forged, or belongs to another request.
    ``decode`` turns the verified payload into the flow's state (ValueError: incomplete)
    and must expose the binding as ``.binding``.
    """
    try:
        payload = sealer.open(state, now=now)
    except (StateExpired, StateUnknownKey):
        return None
    except StateInvalid:
        raise ConsentRefused(
            f"The {subject.what} state is not one this server issued unaltered; "
            f"{subject.nothing}. Call {subject.tool} again without requestState."
        ) from None
    try:
        decoded = decode(payload)
        binding = getattr(decoded, "binding", None)
    except (KeyError, TypeError, ValueError):
        return None  # sealed by us in a format this version no longer reads: ask again
    if binding != expected:
        raise ConsentRefused(
            f"That {subject.what} was given for a different request (another principal, "
            f"tool or arguments); {subject.nothing}. Call {subject.tool} again with these "
            "arguments."
        )
    return decoded


@dataclass(frozen=True)
class Answer:
    """What the person did with the question."""

    action: Action
    content: Mapping[str, Any] | None


def answer_of(responses: Mapping[str, Any] | None, key: str, subject: Subject) -> Answer | None:
    """The answer under ``key``, or None when there is none (never consent: ask again).
    :class:`ConsentRefused` when it is not an answer at all."""
    raw = (responses or {}).get(key)
    if raw is None:
        return None
    action = raw.get("action") if isinstance(raw, Mapping) else None
    if action not in _ACTIONS:
        raise ConsentRefused(
            "The answer is malformed (it needs an action of accept, decline or cancel); "
            f"{subject.nothing}."
        )
    content = raw.get("content")
    return Answer(action, content if isinstance(content, Mapping) else None)


__all__ = [
    "METHOD",
    "Answer",
    "Binding",
    "ConsentRefused",
    "Subject",
    "answer_of",
    "open_state",
]
