"""The notes prompts: ``daily_note``, ``summarise_folder`` and ``related_notes``.

A prompt only composes text from what the principal may read: it never writes, moves or
deletes anything (the model may then call the tools, which authorize and confirm as
always). Each request is authorized for its own principal (``ctx.principal``, with a legacy
session's roots as hints), exactly as the tools are. Arguments are completed
(``completion/complete`` with a ``ref/prompt``) from the same catalog.

What a prompt embeds is bounded: at most :data:`MAX_EMBEDDED_CHARS` of note text, the rest
named by URI for the model to read with ``notes_read``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from urllib.parse import unquote

import anyio

from fsnotes.notes.index import related
from fsnotes.notes.index.catalog import Catalog, CatalogUnavailable
from fsnotes.notes.index.connections import IndexProblem
from fsnotes.notes.index.indexer import until_indexed
from fsnotes.notes.store import NoteError, display
from fsnotes.notes.text import daily
from fsnotes.notes.text.daily import DailySettings
from fsnotes.notes.tools.errors import ServiceError, explain
from fsnotes.notes.tools.located import Located
from fsnotes.notes.tools.resources import mime_for
from fsnotes.notes.tools.service import Notes, NotesService
from fsnotes.protocol.registry import (
    InputRequired,
    InternalError,
    InvalidParams,
    JSONObject,
    RequestContext,
)
from fsnotes.security.grants import Access, NotGranted, Workspace
from sandbox import errors as sx
from sandbox import uri as lexical

# Note text embedded in one prompt, in characters (about 25k tokens): the context a model
# has left for reading and answering, not the whole folder. Notes past it are named.
MAX_EMBEDDED_CHARS = 100_000
# Notes of a folder named in summarise_folder (embedded while they fit, then by URI).
MAX_FOLDER_NOTES = 50
# Completion values offered (the spec's cap is 100).
MAX_COMPLETIONS = 100
# Days offered when completing a daily note's date: a week either side of today.
COMPLETION_DAYS = 7
# Longest prompt argument accepted: a file:// URI of the longest path layer 1 allows.
MAX_ARGUMENT_CHARS = 8_192


@dataclass(frozen=True)
class Argument:
    name: str
    description: str
    required: bool = False


@dataclass(frozen=True)
class Prompt:
    name: str
    title: str
    description: str
    arguments: tuple[Argument, ...]

    def descriptor(self) -> JSONObject:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "arguments": [
                {"name": a.name, "description": a.description, "required": a.required}
                for a in self.arguments
            ],
        }


_WORKSPACE = Argument(
    "workspaceUri",
    "The workspace's file:// URI (from workspaces_list); may be omitted when you have one.",
)

PROMPTS = (
    Prompt(
        "daily_note",
        "Daily note",
        "The daily note for a date, from the configured template (or a built-in one), with "
        "where it goes; the model then creates it with notes_create. Writes nothing itself.",
        (
            Argument("date", "The day, YYYY-MM-DD (or today, yesterday, tomorrow); default today."),
            _WORKSPACE,
        ),
    ),
    Prompt(
        "summarise_folder",
        "Summarise a folder",
        "Summarise the notes of a folder: their text (as much as fits) and the names of the "
        "rest. Writes nothing.",
        (
            Argument("folder", "The folder, relative to the workspace; omit for all of it."),
            _WORKSPACE,
        ),
    ),
    Prompt(
        "related_notes",
        "Find related notes",
        "Notes related to one note: the notes it links to, the notes that link to it, notes "
        "sharing its tags and notes matching its title, with its broken links. Writes nothing.",
        (Argument("uri", "The note's file:// URI.", required=True),),
    ),
)
_BY_NAME = {p.name: p for p in PROMPTS}


def _text(text: str) -> JSONObject:
    return {"role": "user", "content": {"type": "text", "text": text}}


def _embedded(uri: str, name: str, text: str) -> JSONObject:
    resource = {"uri": uri, "mimeType": mime_for(name), "text": text}
    return {"role": "user", "content": {"type": "resource", "resource": resource}}


def _refused(exc: Exception) -> InvalidParams:
    """A notes refusal (not granted, not found, outside) as the prompt's -32602."""
    return InvalidParams(str(exc) if isinstance(exc, ServiceError | NotGranted) else explain(exc))


class NotesPrompts:
    """A PromptProvider over the workspaces the request's principal may read."""

    def __init__(
        self,
        service: NotesService,
        settings: DailySettings | None = None,
        *,
        today: Callable[[], date] = date.today,
    ) -> None:
        self.service = service
        self.settings = settings or DailySettings()
        self.today = today  # the server's local day (tests pass their own)

    def _acting(self, ctx: RequestContext) -> Notes:
        return self.service.acting_for(ctx.principal, ctx.roots, ctx.ceiling)

    # --- prompts/list, prompts/get -----------------------------------------------------------

    async def list_prompts(
        self, ctx: RequestContext, cursor: str | None
    ) -> tuple[list[JSONObject], str | None]:
        if cursor:
            raise InvalidParams("Invalid cursor: the prompts come in one page; list again.")
        return [p.descriptor() for p in PROMPTS], None

    async def get_prompt(
        self, ctx: RequestContext, name: str, arguments: Mapping[str, str]
    ) -> JSONObject | InputRequired:
        prompt = _BY_NAME.get(name)
        if prompt is None:
            raise InvalidParams(f"Unknown prompt {name!r}; prompts/list names the prompts.")
        known = {a.name for a in prompt.arguments}
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise InvalidParams(
                f"Prompt {name!r} takes no argument {unknown[0]!r}; its arguments: "
                f"{', '.join(sorted(known))}."
            )
        for arg in prompt.arguments:
            if arg.required and not arguments.get(arg.name):
                raise InvalidParams(f"Prompt {name!r} needs the argument {arg.name!r}.")
        if any(len(v) > MAX_ARGUMENT_CHARS for v in arguments.values()):
            raise InvalidParams(
                f"A prompt argument may hold at most {MAX_ARGUMENT_CHARS} characters."
            )
        notes = self._acting(ctx)
        if name == "daily_note":
            return await anyio.to_thread.run_sync(self._daily, notes, dict(arguments))
        if name == "summarise_folder":
            loc = await anyio.to_thread.run_sync(_folder, notes, dict(arguments))
            await _indexed(ctx, notes, loc)
            return await anyio.to_thread.run_sync(_summarise, notes, loc)
        loc = await anyio.to_thread.run_sync(_note, notes, arguments["uri"])
        await _indexed(ctx, notes, loc)
        return await anyio.to_thread.run_sync(_related, notes, loc)

    # --- daily_note --------------------------------------------------------------------------

    def _daily(self, notes: Notes, arguments: dict[str, str]) -> JSONObject:
        today = self.today()
        try:
            day = daily.parse_day(arguments.get("date") or "today", today)
        except ValueError as exc:
            raise InvalidParams(str(exc)) from None
        try:
            ws = notes.workspace(arguments.get("workspaceUri"), Access.READ)
        except NotGranted as exc:
            raise InvalidParams(str(exc)) from None
        target = _relative(notes, ws, daily.path_for(self.settings, day))
        template = daily.BUILTIN_TEMPLATE
        if self.settings.template is not None:
            source = _relative(notes, ws, self.settings.template)
            try:
                template = notes.read_located(source).text
            except ServiceError as exc:
                # The operator's configuration, not the caller's arguments.
                raise InternalError(
                    f"The daily note template '{self.settings.template}' ([prompts] "
                    f"daily_template) cannot be read in workspace '{ws.name}': {exc}"
                ) from None
        content = daily.fill(template, day)
        path = display(target.parts)
        when = f"{daily.weekday(day)} {day.isoformat()}"
        messages: list[JSONObject] = []
        existing = _existing(target)
        may_write = (notes.scope.access(ws) or Access.READ) >= Access.WRITE
        if existing is not None:
            messages.append(
                _text(
                    f"The daily note for {when} already exists: '{path}' in workspace "
                    f"'{ws.name}' ({target.uri}). Its text follows. Read it with notes_read "
                    "and add to it with notes_update (pass its etag) rather than creating it "
                    "again; ask the person what to add."
                )
            )
            messages.append(_embedded(target.uri, path, existing))
        elif not may_write:
            messages.append(
                _text(
                    f"The daily note for {when} would be '{path}' in workspace '{ws.name}', "
                    "but you may only read that workspace: show the person this text "
                    f"instead of creating the note.\n\n{content}"
                )
            )
        else:
            messages.append(
                _text(
                    f"Create the daily note for {when}: call notes_create with workspaceUri "
                    f"{ws.uri}, path '{path}' and this content (adapt it only if the person "
                    f"asks):\n\n{content}"
                )
            )
        return {"description": f"Daily note for {day.isoformat()}", "messages": messages}

    # --- completion ----------------------------------------------------------------------

    async def complete(
        self,
        ctx: RequestContext,
        ref: JSONObject,
        argument: JSONObject,
        context_arguments: Mapping[str, str],
    ) -> tuple[list[str], int | None, bool]:
        prompt = _BY_NAME.get(str(ref.get("name")))
        if prompt is None:
            raise InvalidParams("Unknown prompt; prompts/list names the prompts.")
        name, value = str(argument["name"]), str(argument["value"])
        if name not in {a.name for a in prompt.arguments}:
            raise InvalidParams(f"Prompt {prompt.name!r} has no argument {name!r}.")
        notes = self._acting(ctx)
        if name == "workspaceUri":
            uris = [ws.uri for ws in notes.readable() if ws.uri.startswith(value)]
            return _capped(uris)
        if name == "date":
            return _capped(_days(self.today(), value))
        # Like the resources' completion, wait (bounded) for a first indexing to finish.
        if name == "folder":
            workspace_uri = context_arguments.get("workspaceUri")
            try:
                ws = notes.workspace(workspace_uri, Access.READ)
            except NotGranted:
                return [], 0, False  # completion offers nothing it cannot check
            await _indexed(ctx, notes, notes.relative(ws, "", allow_empty=True))
            return await anyio.to_thread.run_sync(_complete_folder, notes, ws, value)
        for ws in notes.readable():
            await _indexed(ctx, notes, notes.relative(ws, "", allow_empty=True))
        return await anyio.to_thread.run_sync(_complete_uri, notes, value)


# --- helpers (run in worker threads) ---------------------------------------------------------


def _relative(notes: Notes, ws: Workspace, path: str) -> Located:
    try:
        return notes.relative(ws, path)
    except ServiceError as exc:
        raise InvalidParams(str(exc)) from None


def _existing(loc: Located) -> str | None:
    """The text of the note at ``loc``, or None when there is none."""
    try:
        return loc.store.read(loc.parts).text
    except sx.NotFound:
        return None
    except (sx.SandboxError, NoteError) as exc:
        raise InvalidParams(explain(exc, loc.parts)) from None


def _folder(notes: Notes, arguments: dict[str, str]) -> Located:
    try:
        ws = notes.workspace(arguments.get("workspaceUri"), Access.READ)
        loc = notes.relative(ws, arguments.get("folder") or "", allow_empty=True)
        notes.check_folder(loc)
    except (ServiceError, NotGranted) as exc:
        raise _refused(exc) from None
    return loc


def _note(notes: Notes, uri: str) -> Located:
    try:
        loc = notes.locate(uri, Access.READ)
        notes.read_located(loc)  # a note, readable now
    except (ServiceError, NotGranted) as exc:
        raise _refused(exc) from None
    return loc


async def _indexed(ctx: RequestContext, notes: Notes, loc: Located) -> None:
    try:
        catalog = await anyio.to_thread.run_sync(lambda: notes.catalog(loc, fresh=True))
    except ServiceError:
        return  # the prompt itself reports it
    await until_indexed(catalog, ctx.report_progress)


def _catalog(notes: Notes, loc: Located) -> Catalog:
    try:
        return notes.catalog(loc, fresh=True)
    except ServiceError as exc:
        raise InternalError(str(exc)) from None


def _summarise(notes: Notes, loc: Located) -> JSONObject:
    catalog = _catalog(notes, loc)
    try:
        page = catalog.page(loc.parts, None, MAX_FOLDER_NOTES)
    except CatalogUnavailable as exc:
        raise InternalError(str(exc)) from None
    where = f"folder '{display(loc.parts)}'" if loc.parts else "the whole workspace"
    if not page.rows:
        raise InvalidParams(
            f"There are no notes in {where} of workspace '{loc.workspace.name}'; check the "
            "folder with notes_list."
        )
    embedded: list[JSONObject] = []
    named: list[str] = []
    left = MAX_EMBEDDED_CHARS
    for row in page.rows:
        note = Notes.try_read(loc.store, row.parts)
        uri = lexical.to_file_uri(loc.workspace.components + row.parts)
        if note is not None and len(note.text) <= left:
            left -= len(note.text)
            embedded.append(_embedded(uri, row.parts[-1], note.text))
        elif note is not None:
            named.append(f"- {row.title} ({display(row.parts)}): {uri}")
    intro = [
        f"Summarise the notes in {where} of workspace '{loc.workspace.name}': the main "
        "subjects, decisions and open tasks, naming the notes you draw on.",
        f"The text of {len(embedded)} note(s) follows.",
    ]
    if named:
        intro.append(
            "These did not fit; read them with notes_read if they matter:\n" + "\n".join(named)
        )
    if page.more:
        intro.append(
            f"The folder holds more than {MAX_FOLDER_NOTES} notes; list the others with "
            "notes_list (folder, cursor)."
        )
    if not page.status.complete:
        intro.append("The workspace is still being indexed, so some notes may be missing.")
    return {
        "description": f"Summarise {where}",
        "messages": [_text("\n\n".join(intro)), *embedded],
    }


def _related(notes: Notes, loc: Located) -> JSONObject:
    catalog = _catalog(notes, loc)
    try:
        note = notes.read_located(loc)  # again: the wait for the index may have let it change
    except ServiceError as exc:
        raise InvalidParams(str(exc)) from None
    try:
        found = related.related(catalog, loc.store, loc.parts, note.meta)
    except CatalogUnavailable as exc:
        raise InternalError(str(exc)) from None
    path = display(loc.parts)
    lines = [
        f"Find the notes related to '{note.meta.title}' ({path}, {loc.uri}); its text is "
        "below. Read the promising candidates with notes_read and tell the person how each "
        "relates, and which links between them are missing."
    ]
    if found.candidates:
        ws = loc.workspace
        lines.append(
            "Candidates, from its links and the search index:\n"
            + "\n".join(
                f"- {related.describe(c)}: {lexical.to_file_uri(ws.components + c.row.parts)}"
                for c in found.candidates
            )
        )
    else:
        lines.append("No note links to it or from it, shares its tags or matches its title.")
    if found.broken:
        lines.append("Its links that lead to no note: " + ", ".join(found.broken))
    messages = [_text("\n\n".join(lines))]
    if len(note.text) <= MAX_EMBEDDED_CHARS:
        messages.append(_embedded(loc.uri, loc.parts[-1], note.text))
    return {"description": f"Notes related to {path}", "messages": messages}


def _capped(values: list[str]) -> tuple[list[str], int | None, bool]:
    return values[:MAX_COMPLETIONS], len(values), len(values) > MAX_COMPLETIONS


def _days(today: date, prefix: str) -> list[str]:
    """Today, tomorrow, yesterday, then the rest of the week either side, matching ``prefix``."""
    offsets = [0, 1, -1]
    for n in range(2, COMPLETION_DAYS + 1):
        offsets += [n, -n]
    days = [(today + timedelta(days=o)).isoformat() for o in offsets]
    return [d for d in days if d.startswith(prefix)]


def _complete_folder(
    notes: Notes, ws: Workspace, prefix: str
) -> tuple[list[str], int | None, bool]:
    try:
        loc = notes.relative(ws, "", allow_empty=True)
        catalog = notes.catalog(loc, fresh=True)
        # The folders summarise_folder has notes for: those holding notes, and the folders
        # above them (a summary takes in the notes below its folder).
        folders = catalog.index.note_folders()
    except (ServiceError, NotGranted, CatalogUnavailable, IndexProblem):
        return [], 0, False  # completion is a convenience; it offers nothing it cannot check
    names: set[str] = set()
    for folder in folders:
        for depth in range(1, len(folder) + 1):
            names.add(display(folder[:depth]))
    want = prefix.casefold()
    matching = sorted(n for n in names if n.casefold().startswith(want))
    checked = [n for n in matching[:MAX_COMPLETIONS] if _is_folder(loc, n)]
    return checked, len(matching), len(matching) > MAX_COMPLETIONS


def _is_folder(loc: Located, path: str) -> bool:
    try:
        return loc.store.root.stat(tuple(path.split("/"))).kind == "dir"
    except sx.SandboxError:
        return False


def _complete_uri(notes: Notes, value: str) -> tuple[list[str], int | None, bool]:
    out: list[str] = []
    total = 0
    for ws in notes.readable():
        base = ws.uri.rstrip("/") + "/"
        if value.startswith(base):
            prefix = unquote(value[len(base) :])
        elif base.startswith(value):
            prefix = ""
        else:
            continue
        try:
            catalog = notes.catalog(notes.relative(ws, "", allow_empty=True), fresh=True)
            paths, count = catalog.complete(prefix, MAX_COMPLETIONS - len(out))
        except (ServiceError, CatalogUnavailable):
            continue
        out.extend(lexical.to_file_uri(ws.components + p) for p in paths)
        total += count
    return out, total, total > len(out)


__all__ = ["MAX_EMBEDDED_CHARS", "PROMPTS", "NotesPrompts"]
