"""Daily notes: where the note for a date goes and what it starts with (the daily_note prompt).

Pure functions; no file access, no clock (the caller says which day). Configured in
``[prompts]``: ``daily_template``, the relative path of a template note in the workspace
(none: :data:`BUILTIN_TEMPLATE`), and ``daily_path``, where a day's note goes, with ``{date}``
standing for the day (default :data:`DEFAULT_DAILY_PATH`).

A template's placeholders, Obsidian's core set: ``{{date}}`` and ``{{title}}`` (the day,
``YYYY-MM-DD``), ``{{weekday}}`` (its English name), ``{{yesterday}}`` and ``{{tomorrow}}``
(the days around it, for links). Anything else between double braces (``{{time}}``,
``{{date:YYYY}}``) is left as written: a prompt is composed at some moment, the note is
written later, and a format language is more than a template needs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from sandbox import uri as lexical
from sandbox.errors import SandboxError

DEFAULT_DAILY_PATH = "journal/{date}.md"
DATE_SLOT = "{date}"

BUILTIN_TEMPLATE = """# {{date}}

{{weekday}}. Yesterday: [[{{yesterday}}]]

## Plan

## Notes

## Log
"""

_PLACEHOLDER = re.compile(r"\{\{\s*(date|title|weekday|yesterday|tomorrow)\s*\}\}")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class DailySettings:
    template: str | None = None  # a note's path relative to the workspace; None: built in
    path: str = DEFAULT_DAILY_PATH  # where a day's note goes; {date} is the day


def weekday(day: date) -> str:
    return _WEEKDAYS[day.weekday()]


def fill(template: str, day: date) -> str:
    """``template`` with its placeholders for ``day`` filled in (others left as written)."""
    values = {
        "date": day.isoformat(),
        "title": day.isoformat(),
        "weekday": weekday(day),
        "yesterday": (day - timedelta(days=1)).isoformat(),
        "tomorrow": (day + timedelta(days=1)).isoformat(),
    }
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def path_for(settings: DailySettings, day: date) -> str:
    return settings.path.replace(DATE_SLOT, day.isoformat())


def parse_day(text: str, today: date) -> date:
    """A day given as ``YYYY-MM-DD``, ``today``, ``yesterday`` or ``tomorrow``; ValueError
    with a sentence otherwise."""
    word = text.strip().casefold()
    relative = {"today": 0, "yesterday": -1, "tomorrow": 1}
    if word in relative:
        return today + timedelta(days=relative[word])
    if _ISO_DAY.fullmatch(word):
        try:
            return date.fromisoformat(word)
        except ValueError:
            pass
    raise ValueError(
        f"{text[:40]!r} is not a date; give it as YYYY-MM-DD (or today, yesterday, tomorrow)."
    )


def daily_settings(template: str | None, path: str, extensions: Sequence[str]) -> DailySettings:
    """The settings, if both paths are relative note paths (``path`` with ``{date}`` once);
    ValueError with a sentence for the person who wrote the configuration otherwise."""
    if path.count(DATE_SLOT) != 1:
        raise ValueError(f"daily_path must hold {DATE_SLOT} once, not {path!r}")
    for what, value in (("daily_template", template), ("daily_path", path)):
        if value is None:
            continue
        sample = value.replace(DATE_SLOT, "2026-01-31")
        try:
            lexical.parse_relative(sample)
        except SandboxError as exc:
            raise ValueError(f"{what} {value!r} is not a relative path: {exc}") from None
        if not sample.lower().endswith(tuple(e.lower() for e in extensions)):
            raise ValueError(f"{what} {value!r} must end in {', '.join(extensions)}")
        if any(part.startswith(".") for part in sample.split("/")):
            raise ValueError(f"{what} {value!r} is inside a hidden folder; notes never are")
    return DailySettings(template=template, path=path)
