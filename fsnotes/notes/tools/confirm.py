"""Deleting a note: a person confirms, and one confirmation executes at most once.

The flow (DESIGN.md section 4), written once for both protocol eras:

1. First call: authorize (delete access), find the candidates, and return *input required*:
   a flat form (``note_id``: a titled single-select of the candidates; ``confirm``: a
   boolean) plus a sealed state binding principal, method, tool, a digest of the arguments,
   the workspace, each candidate's (path, device, inode, etag, mtime), the phase, a random nonce
   and an expiry. Always, even for a single candidate: the model never confirms.
2. The retry: verify the seal, then the binding; validate the answer against the form;
   re-authorize, re-contain, re-read the live note and require its identity to equal the
   sealed one; then claim the nonce and remove the note (the sandbox's identity-checked
   remove) in one critical section of the replay store.

Answers: ``accept`` with ``confirm: true`` and a sealed id deletes. ``decline`` is final:
the nonce is consumed and nothing is deleted (a normal result that says so). ``cancel``, an
unticked ``confirm``, or a malformed answer delete nothing and leave the state usable until
it expires. A missing answer is never consent: the person is asked again.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from fsnotes.notes.history import HistoryUnavailable
from fsnotes.notes.index.catalog import CatalogUnavailable
from fsnotes.notes.store import Note, NoteError, display, iso_time
from fsnotes.notes.tools.errors import ServiceError, explain
from fsnotes.notes.tools.located import Located
from fsnotes.notes.tools.models import DeleteResult, NotesDeleteArgs
from fsnotes.notes.tools.service import Notes
from fsnotes.protocol.registry import ElicitForm, InputRequired, JSONObject
from fsnotes.security.consent import Binding, ConsentRefused, Subject, answer_of, open_state
from fsnotes.security.grants import Access, NotGranted, Workspace
from fsnotes.security.seal import Sealer
from fsnotes.security.shown import distinguishable, shown
from fsnotes.state.replay import AlreadyUsed, ClaimNotRecorded, ReplayStore, StoreBusy, StoreFull
from sandbox import errors as sx
from sandbox.root import FileIdentity

TOOL_NAME = "notes_delete"
PHASE = "confirm"
SUBJECT = Subject(what="confirmation", nothing="nothing was deleted", tool=TOOL_NAME)
STATE_VERSION = 2  # 1: one-letter keys (states of that format are simply asked again)
CONFIRM_KEY = "confirm_delete"
# How long a question stays answerable. Long enough for a person to read a dialog and
# decide; short enough that a leaked state is soon useless (the spec asks for a short
# expiry on requestState that drives business logic).
STATE_LIFETIME_S = 300
# A person picks from a list; past a couple of dozen entries the dialog is unusable and the
# request is too vague to act on, so the model is asked to narrow it instead.
MAX_DELETE_CANDIDATES = 25
NONCE_BYTES = 16


@dataclass(frozen=True)
class Candidate:
    note_id: str  # the note's path relative to the workspace, '/'-joined
    identity: FileIdentity
    etag: str
    # With (dev, ino) and the etag: a file deleted and re-created with the same text can get
    # the same inode number back; its modification time still differs.
    mtime_ns: int


@dataclass(frozen=True)
class DeleteState:
    """What a delete question seals: its binding, where, which notes exactly, once, until."""

    binding: Binding
    workspace: str
    candidates: tuple[Candidate, ...]
    nonce: str
    expires: int

    def encode(self) -> dict[str, Any]:
        return {
            "v": STATE_VERSION,
            "binding": self.binding.encode(),
            "workspace": self.workspace,
            "candidates": [
                [c.note_id, c.identity.dev, c.identity.ino, c.etag, c.mtime_ns]
                for c in self.candidates
            ],
            "nonce": self.nonce,
            "exp": self.expires,
        }

    @classmethod
    def decode(cls, payload: Mapping[str, Any]) -> DeleteState:
        """ValueError (or KeyError/TypeError) for anything but this version's shape."""
        if payload.get("v") != STATE_VERSION:
            raise ValueError("another state version")
        candidates = tuple(
            Candidate(str(c[0]), FileIdentity(int(c[1]), int(c[2])), str(c[3]), int(c[4]))
            for c in payload["candidates"]
        )
        return cls(
            binding=Binding.decode(payload["binding"]),
            workspace=str(payload["workspace"]),
            candidates=candidates,
            nonce=str(payload["nonce"]),
            expires=int(payload["exp"]),
        )

    def offered(self) -> dict[str, Candidate]:
        """The candidates by the option the person was shown (the form's const), rebuilt
        from the sealed set exactly as the form was."""
        ids = distinguishable([c.note_id for c in self.candidates])
        return dict(zip(ids, self.candidates, strict=True))


class DeleteAnswer(BaseModel):
    """The form the person fills (:meth:`form` renders it) and what an accepted answer must
    be (:meth:`of` validates it against the notes the question offered).

    Both fields are required: a missing ``confirm`` is not an unticked box but a malformed
    answer. Strict: ``"true"`` or ``1`` is not a tick, and the chosen note is a string that
    was one of the options shown. Other keys a host adds are ignored.
    """

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    note_id: str = Field(title="Note to delete")
    # The form shows the box unticked ("default" is a hint to the host's form, not a value
    # the answer may leave out).
    confirm: bool = Field(
        title="Yes, delete this note permanently", json_schema_extra={"default": False}
    )

    @field_validator("note_id")
    @classmethod
    def _offered(cls, value: str, info: ValidationInfo) -> str:
        offered = info.context.get("offered", ()) if isinstance(info.context, Mapping) else ()
        if value not in offered:
            raise ValueError("not one of the notes offered")
        return value

    @classmethod
    def form(cls, options: list[dict[str, str]]) -> JSONObject:
        """The flat form schema (elicitation's restricted JSON Schema) offering ``options``
        (``const``: what the answer carries; ``title``: what the person reads) as the note;
        the only one preselected when there is one."""
        properties: dict[str, JSONObject] = {}
        for name, field in cls.model_fields.items():
            prop: JSONObject = {"type": _FORM_TYPES[field.annotation], "title": field.title}
            if isinstance(field.json_schema_extra, dict):
                prop.update(field.json_schema_extra)
            properties[name] = prop
        properties["note_id"]["oneOf"] = options
        if len(options) == 1:
            properties["note_id"]["default"] = options[0]["const"]
        required = [name for name, field in cls.model_fields.items() if field.is_required()]
        return {"type": "object", "properties": properties, "required": required}

    @classmethod
    def of(cls, content: Mapping[str, Any], offered: Mapping[str, Candidate]) -> DeleteAnswer:
        """The validated answer; :class:`ConsentRefused` (the chosen note first, then the box)
        for one that is not."""
        try:
            return cls.model_validate(dict(content), context={"offered": offered})
        except ValidationError as exc:
            failed = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
        if "note_id" in failed or not failed:
            raise ConsentRefused(
                "The chosen note is not one of those offered in the question; nothing was deleted."
            )
        raise ConsentRefused(
            "The form's 'confirm' answer must be true or false; nothing was deleted."
        )


# The form's field types: elicitation forms are flat, of primitive types only.
_FORM_TYPES: dict[Any, str] = {str: "string", bool: "boolean"}


class DeleteFlow:
    """The confirmed delete; every call gets the requesting principal's view of the notes."""

    def __init__(
        self,
        sealer: Sealer,
        replay: ReplayStore,
        clock: Callable[[], float],
    ) -> None:
        self.sealer = sealer
        self.replay = replay
        self.clock = clock

    # --- first round ---------------------------------------------------------------------

    def ask(self, notes: Notes, args: NotesDeleteArgs) -> InputRequired:
        """The question for these arguments; ServiceError/NotGranted when there is nothing
        to ask about (not granted, no such note)."""
        ws, found = self._candidates(notes, args)
        state = DeleteState(
            binding=self._binding(notes, args),
            workspace=ws.name,
            candidates=tuple(
                Candidate(display(n.parts), n.identity, n.etag, n.info.mtime_ns) for n in found
            ),
            nonce=secrets.token_urlsafe(NONCE_BYTES),
            expires=int(self.clock()) + STATE_LIFETIME_S,
        )
        return InputRequired(
            requests={CONFIRM_KEY: self._form(ws, args, found)},
            state=self.sealer.seal(state.encode()),
        )

    @staticmethod
    def _binding(notes: Notes, args: NotesDeleteArgs) -> Binding:
        # The digest is of the arguments as the wire carries them (states sealed before the
        # arguments were typed stay answerable).
        bound = args.model_dump(mode="json", exclude_none=True)
        return Binding.of_call(notes.principal, TOOL_NAME, bound, PHASE)

    @staticmethod
    def _candidates(svc: Notes, args: NotesDeleteArgs) -> tuple[Workspace, list[Note]]:
        if args.uri is not None:
            loc = svc.locate(args.uri, Access.DELETE)
            return loc.workspace, [svc.read_located(loc)]
        title = args.title or ""  # the model holds exactly one of uri and title
        ws = svc.workspace(args.workspaceUri, Access.DELETE)
        wanted = title.casefold()
        root = svc.relative(ws, "", allow_empty=True)
        catalog = svc.catalog(root, fresh=True)
        # One more than can be offered: enough to tell "too many" from "this many". Each
        # candidate is then read from its file (the truth), and kept only if its current
        # title still matches.
        try:
            rows = catalog.titled(wanted, MAX_DELETE_CANDIDATES + 1)
        except CatalogUnavailable as exc:
            raise ServiceError(str(exc)) from None
        notes = []
        for row in rows:
            note = svc.try_read(root.store, row.parts)
            if note is not None and wanted in note.meta.title.casefold():
                notes.append(note)
        if not notes:
            raise ServiceError(
                f"No note in workspace '{ws.name}' has a title containing "
                f"'{title}'; check the title with notes_search."
            )
        if len(notes) > MAX_DELETE_CANDIDATES:
            raise ServiceError(
                f"More than {MAX_DELETE_CANDIDATES} notes have a title containing "
                f"'{title}'; use a more specific title or the note's uri (at most "
                f"{MAX_DELETE_CANDIDATES} can be offered to the person)."
            )
        return ws, notes

    @staticmethod
    def _form(ws: Workspace, args: NotesDeleteArgs, notes: list[Note]) -> ElicitForm:
        # Everything the person reads goes through the one rule in security.shown: names and
        # titles come from whoever wrote the files, the asked title from the model. Each
        # option's const is its path as shown (one-to-one with the paths, and distinct in
        # look), so a host that displays consts shows no hidden characters either.
        labels = distinguishable([display(n.parts) for n in notes])
        options = [
            {
                "const": label,
                "title": f"{label} — “{shown(n.meta.title)}”, modified "
                f"{iso_time(n.info.mtime_ns).replace('T', ' ')}",
            }
            for label, n in zip(labels, notes, strict=True)
        ]
        asked = (
            f"the note at '{labels[0]}'"
            if args.uri is not None
            else f"a note titled like “{shown(args.title or '')}”"
        )
        return ElicitForm(
            unavailable=(
                "This host cannot ask you for confirmation (it did not declare form "
                "elicitation), and fsnotes deletes nothing without a person's confirmation; "
                "delete the note in your file manager instead."
            ),
            message=(
                f"The assistant wants to delete {asked} from workspace '{shown(ws.name)}'. "
                "Choose the note and tick the box to delete it permanently; "
                "decline to keep it."
            ),
            requested_schema=DeleteAnswer.form(options),
        )

    # --- the retry -----------------------------------------------------------------------

    def resume(
        self,
        notes: Notes,
        args: NotesDeleteArgs,
        state: str,
        responses: Mapping[str, Any] | None,
    ) -> InputRequired | DeleteResult:
        """The retry: its result, or the question again (expired, no answer). Refusals
        raise ConsentRefused or ServiceError, each saying that nothing was deleted."""
        sealed = open_state(
            self.sealer,
            state,
            now=self.clock(),
            decode=DeleteState.decode,
            expected=self._binding(notes, args),
            subject=SUBJECT,
        )
        if sealed is None:
            return self.ask(notes, args)  # too old, rotated key, older format
        answer = answer_of(responses, CONFIRM_KEY, SUBJECT)
        if answer is None:
            return self.ask(notes, args)  # no answer is never consent: ask again
        if answer.action == "cancel":
            return _result(
                False, "cancelled", "The person dismissed the question; nothing was deleted."
            )
        if answer.action == "decline":
            try:
                with self.replay.claim(sealed.nonce, sealed.expires):
                    pass
            except AlreadyUsed:
                raise ConsentRefused(
                    "This confirmation was already used; nothing more happened."
                ) from None
            except (StoreFull, StoreBusy) as exc:
                raise ConsentRefused(f"Nothing was deleted: {exc}.") from None
            return _result(False, "declined", "The person declined; nothing was deleted.")
        content = answer.content
        if content is None:
            raise ConsentRefused(
                "The confirmation was accepted without the form's content; nothing was "
                "deleted (missing content is never consent)."
            )
        candidates = sealed.offered()
        chosen = DeleteAnswer.of(content, candidates)
        if not chosen.confirm:
            return _result(
                False,
                "not_confirmed",
                "The person did not tick the confirmation box; nothing was deleted.",
            )
        return self._execute(notes, args, candidates[chosen.note_id], sealed)

    def _execute(
        self, svc: Notes, args: NotesDeleteArgs, chosen: Candidate, sealed: DeleteState
    ) -> DeleteResult:
        try:
            # Re-authorize and re-contain from the arguments, as on the first call: a grant
            # revoked meanwhile, or a changed configuration, stops the delete here.
            if args.uri is not None:
                loc = svc.locate(args.uri, Access.DELETE)
                ws = loc.workspace
            else:
                ws = svc.workspace(args.workspaceUri, Access.DELETE)
            if ws.name != sealed.workspace:
                raise ConsentRefused(
                    "The workspace is no longer the one you confirmed; nothing was deleted."
                )
            target: Located = svc.relative(ws, chosen.note_id)
            if args.uri is not None and target.parts != loc.parts:
                raise ConsentRefused(
                    "The confirmed note does not match the uri; nothing was deleted."
                )
            live = svc.read_located(target)
        except (NotGranted, ServiceError) as exc:
            raise ServiceError(f"{exc} Nothing was deleted.") from None
        if (
            live.identity != chosen.identity
            or live.etag != chosen.etag
            or live.info.mtime_ns != chosen.mtime_ns
        ):
            raise ConsentRefused(
                f"'{chosen.note_id}' was changed or replaced after the question was asked; "
                "nothing was deleted. Ask again to confirm the current note."
            )
        # Every check passed. The audit log's intent comes first (if it cannot be written,
        # nothing is claimed: the confirmation stays usable), then the claim and the
        # removal in one critical section. A removal that fails inside it still commits the
        # claim: the confirmation is spent and the result says so (at most once, never a
        # second try of a confirmed delete).
        recorded = True
        failure: sx.SandboxError | NoteError | None = None
        with svc.audited(
            "delete", TOOL_NAME, target, etag_before=chosen.etag, confirmed_by=svc.principal
        ) as ticket:
            try:
                # What is deleted is kept first (durably, before the unlink), under the
                # claim: no copy, no delete.
                with svc.keeping(target, TOOL_NAME) as keep:
                    try:
                        with self.replay.claim(sealed.nonce, sealed.expires):
                            keep(live.text.encode("utf-8"))  # the bytes read (strict UTF-8)
                            try:
                                target.store.remove(target.parts, chosen.identity)
                            except (sx.SandboxError, NoteError) as exc:
                                failure = exc
                    except ClaimNotRecorded:
                        # The note is gone; only the record that this confirmation was used
                        # is missing. A replay finds no note with the sealed identity, so it
                        # deletes nothing more.
                        recorded = False
                    if failure is not None:
                        raise _Spent  # the claim stays committed; the copy is not needed
            except _Spent:
                pass
            except AlreadyUsed:
                raise ConsentRefused(
                    "This confirmation was already used; nothing more was deleted."
                ) from None
            except (StoreFull, StoreBusy, HistoryUnavailable) as exc:
                raise ConsentRefused(f"Nothing was deleted: {exc}.") from None
            if failure is not None:
                ticket.failed(f"confirmation spent: {type(failure).__name__}")
                raise ServiceError(
                    f"{explain(failure, target.parts)} Nothing was deleted, and this "
                    "confirmation is now used up (each executes at most once); ask again to "
                    "delete the note."
                ) from None
        svc.after_write(target, lambda c: c.removed(target.parts))
        message = f"Deleted '{chosen.note_id}'."
        if not recorded:
            message += " (The confirmation could not be recorded as used; it deletes nothing more.)"
        return _result(True, "deleted", message, uri=target.uri, path=chosen.note_id)


class _Spent(Exception):
    """Leaves the history's block as a failure when a removal failed after its claim was
    committed: the note is still there, so the copy taken of it is dropped."""


def _result(
    deleted: bool,
    outcome: Literal["deleted", "declined", "cancelled", "not_confirmed"],
    message: str,
    **where: str,
) -> DeleteResult:
    return DeleteResult(deleted=deleted, outcome=outcome, message=message, **where)
