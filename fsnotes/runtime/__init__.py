"""The one async request runner both transports use: admission, budgets, the requests in
flight and their cancellation, our requests to the client waiting for an answer.

``fsnotes.protocol`` parses, classifies and routes without waiting; this package runs what it
routes. ``runner`` holds the :class:`~fsnotes.runtime.runner.Runner` and its jobs,
``connection`` one client's channel (a stdio process, a legacy HTTP session), ``budget`` and
``answers`` what requests in flight and answers waiting to be written may hold. It imports
only ``fsnotes.protocol`` (and anyio).

``__all__`` is what other packages use, each imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsnotes._exports import lazy_exports

if TYPE_CHECKING:
    from fsnotes.runtime.answers import AnswerBudget
    from fsnotes.runtime.budget import InFlightBudget
    from fsnotes.runtime.connection import Out, ServerConnection
    from fsnotes.runtime.runner import Job, Runner, Write
    from fsnotes.runtime.tasks import STOPPED, TaskHost

__all__ = [
    "STOPPED",
    "AnswerBudget",
    "InFlightBudget",
    "Job",
    "Out",
    "Runner",
    "ServerConnection",
    "TaskHost",
    "Write",
]

# The module of this package that defines each public name.
_HOME = {
    "STOPPED": "tasks",
    "AnswerBudget": "answers",
    "InFlightBudget": "budget",
    "Job": "runner",
    "Out": "connection",
    "Runner": "runner",
    "ServerConnection": "connection",
    "TaskHost": "tasks",
    "Write": "runner",
}

__getattr__ = lazy_exports(__name__, _HOME)
