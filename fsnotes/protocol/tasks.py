"""The Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) as the core speaks it.

2026-07-28 only. A client opts in per request: its ``_meta`` clientCapabilities list the
extension under ``extensions``. To such a request a ``tools/call`` of a tool that supports
tasks may be answered with a task handle (``resultType: "task"``, a flat CreateTaskResult)
instead of its result; the client then polls ``tasks/get`` (the result or error is inlined
once the task ends), answers the input a task waits for with ``tasks/update``, and may
``tasks/cancel`` it. ``tasks/result`` and ``tasks/list`` (the 2025-11-25 experimental core)
do not exist here: unknown methods.

What is here is pure: the vocabulary, the wire shapes (:func:`create_result`,
:func:`detailed`), the parameter checks, and :class:`TaskService`, what the core needs of
whoever runs tasks (:mod:`fsnotes.runtime.tasks`). A request that did not opt in is served
exactly as without the extension; its ``tasks/*`` requests are refused with -32021
(Missing Required Client Capability), naming the extension.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from fsnotes.protocol import limits
from fsnotes.protocol.calls import Call, Channel
from fsnotes.protocol.registry import InputRequired, JSONObject
from fsnotes.protocol.wire import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, Fault

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]

# One round of a task's work: called with the input responses and state of that round, it
# returns the round's tool result body, or the input it needs next (unencoded). A protocol
# error (Fault and the registry's errors) propagates: the task then ends ``failed``.
Step = Callable[[Mapping[str, Any] | None, str | None], Awaitable[JSONObject | InputRequired]]


def opted_in(capabilities: Mapping[str, Any]) -> bool:
    """Did the request's clientCapabilities declare the Tasks extension?"""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION), Mapping)


def required_extension() -> JSONObject:
    """The ``requiredCapabilities`` of a -32021 for want of the extension."""
    return {"extensions": {TASKS_EXTENSION: {}}}


def missing_extension(what: str) -> Fault:
    """-32021 for ``what`` without the extension declared on this request."""
    return Fault(
        MISSING_CLIENT_CAPABILITY,
        f"Missing required client capability: {what} needs the {TASKS_EXTENSION} extension "
        "declared in this request's clientCapabilities.extensions",
        {"requiredCapabilities": required_extension()},
    )


def unknown_task() -> Fault:
    """The one answer for a task id that is unknown, expired, or another principal's."""
    return Fault(INVALID_PARAMS, "Invalid params: no such task (unknown, expired, or not yours)")


def task_id_of(params: Mapping[str, Any]) -> str:
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not 0 < len(task_id) <= limits.MAX_TASK_ID_CHARS:
        raise Fault(INVALID_PARAMS, "Invalid params: taskId must be a non-empty string")
    return task_id


def responses_of(params: Mapping[str, Any]) -> dict[str, Any]:
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise Fault(INVALID_PARAMS, "Invalid params: tasks/update needs an inputResponses object")
    for key, value in responses.items():
        if not isinstance(value, dict):
            raise Fault(
                INVALID_PARAMS,
                f"Invalid params: inputResponses[{key[: limits.MAX_QUOTED_VALUE_CHARS]!r}] must "
                "be an object (the result of the input request sent under that key)",
            )
    return responses


@dataclass(frozen=True)
class TaskView:
    """A task as the client is shown it."""

    task_id: str
    status: Status
    message: str | None
    created_at: float
    updated_at: float
    ttl_ms: int
    poll_ms: int
    input_requests: JSONObject | None = None
    result: JSONObject | None = None
    error: JSONObject | None = None


def _iso(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _fields(task: TaskView) -> JSONObject:
    body: JSONObject = {
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": _iso(task.created_at),
        "lastUpdatedAt": _iso(task.updated_at),
        "ttlMs": task.ttl_ms,
        "pollIntervalMs": task.poll_ms,
    }
    if task.message is not None:
        body["statusMessage"] = task.message
    return body


def create_result(task: TaskView) -> JSONObject:
    """The CreateTaskResult body: flat, ``resultType: "task"``, no result, error or input."""
    return {"resultType": "task", **_fields(task)}


def detailed(task: TaskView) -> JSONObject:
    """The ``tasks/get`` body (DetailedTask): the input a task waits for, its result once
    completed, its JSON-RPC error once failed."""
    body = _fields(task)
    if task.status == "input_required" and task.input_requests:
        body["inputRequests"] = task.input_requests
    elif task.status == "completed" and task.result is not None:
        body["result"] = task.result
    elif task.status == "failed" and task.error is not None:
        body["error"] = task.error
    return body


class TaskService(Protocol):
    """What the core needs of whoever runs tasks (:mod:`fsnotes.runtime.tasks`); the
    :class:`~fsnotes.protocol.registry.App` carries it as ``tasks``."""

    async def run(self, call: Call, channel: Channel, step: Step) -> JSONObject:
        """Run ``call``'s rounds (``step``): the plain result body if it ends soon (or
        needs input first, MRTR), else the CreateTaskResult body of the task it now is."""
        ...

    async def get(self, principal: str, task_id: str) -> TaskView | None: ...

    async def update(
        self, principal: str, task_id: str, responses: Mapping[str, Any]
    ) -> TaskView | None: ...

    async def cancel(self, principal: str, task_id: str) -> TaskView | None: ...


async def serve(service: TaskService, call: Call) -> JSONObject:
    """The body of a ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` request (opted in)."""
    if not opted_in(call.capabilities):
        raise missing_extension(call.method)
    task_id = task_id_of(call.params)
    if call.method == "tasks/get":
        task = await service.get(call.principal, task_id)
        if task is None:
            raise unknown_task()
        return detailed(task)
    if call.method == "tasks/update":
        responses = responses_of(call.params)
        if await service.update(call.principal, task_id, responses) is None:
            raise unknown_task()
        return {}
    if await service.cancel(call.principal, task_id) is None:
        raise unknown_task()
    return {}
