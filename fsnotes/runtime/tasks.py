"""MCP tasks (the Tasks extension) run in the background, their state in a durable store.

:class:`TaskHost` is the :class:`~fsnotes.protocol.tasks.TaskService` both transports use.
A ``tools/call`` that may become a task (the client opted in, the tool supports tasks) runs
its rounds in the host's own task group, not in the request's job, while the request waits
for one of three things:

- the call ends first: its answer is the plain result (or an InputRequiredResult, MRTR),
  and no task was made;
- its handler says its work will be long (``RequestContext.run_as_task``), or it is still
  running after ``after_s`` (measured, whatever the tool): the task is created in the store
  (committed before the answer is sent: a ``tasks/get`` right after it, to any instance,
  finds it) and the request is answered with the task handle; the work goes on.

A task's work then reports to the store: its status message (from ``report_progress``),
the input it waits for (``input_required``; ``tasks/update`` answers it, from any instance),
and its end: ``completed`` with the tool result (a tool's own error included, as
``isError``), ``failed`` with the JSON-RPC error of a protocol failure, ``cancelled`` after
``tasks/cancel``. While it runs it beats every ``beat_s`` (the store then reads as failed a
task whose owner stopped beating: the instance died); the beat also carries a cancel asked
on another instance. Nothing ever starts a task's work again: a task lost with its instance
stays failed, and the client decides whether to call again.

When the server stops, tasks still running are ended as failed ("the server stopped").
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.to_thread

from fsnotes.protocol import limits
from fsnotes.protocol.calls import Call, Channel
from fsnotes.protocol.encoding import encode_input_required
from fsnotes.protocol.registry import InputRequired, InvalidParams, JSONObject
from fsnotes.protocol.tasks import Status, Step, TaskView, create_result
from fsnotes.protocol.wire import INTERNAL_ERROR, INVALID_PARAMS, Fault

_log = logging.getLogger("fsnotes.runtime")


class StoredTask(Protocol):
    """A task's row as the store returns it (:class:`fsnotes.state.tasks.TaskRow`)."""

    @property
    def task_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def message(self) -> str | None: ...
    @property
    def created_at(self) -> float: ...
    @property
    def updated_at(self) -> float: ...
    @property
    def ttl_ms(self) -> int: ...
    @property
    def poll_ms(self) -> int: ...
    @property
    def cancel_requested(self) -> bool: ...
    @property
    def ended(self) -> bool: ...
    @property
    def input_requests(self) -> dict[str, Any] | None: ...
    @property
    def result(self) -> dict[str, Any] | None: ...
    @property
    def error(self) -> dict[str, Any] | None: ...


class TaskStore(Protocol):
    """What the host needs of the task store (:class:`fsnotes.state.tasks.SQLTaskStore`).
    Its methods block (a database): the host calls them in worker threads. Every failure is
    raised as the store's own exception, with a sentence for the client."""

    def create(
        self,
        task_id: str,
        principal: str,
        owner: str,
        *,
        ttl_ms: int,
        poll_ms: int,
        message: str | None = None,
    ) -> StoredTask: ...

    def beat(self, task_id: str, owner: str, message: str | None) -> StoredTask | None: ...

    def park(self, task_id: str, owner: str, requests: dict[str, Any]) -> bool: ...

    def take_answers(self, task_id: str, owner: str) -> dict[str, Any] | None: ...

    def finish(
        self,
        task_id: str,
        owner: str,
        status: str,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> bool: ...

    def get(self, task_id: str, principal: str) -> StoredTask | None: ...

    def answer(
        self, task_id: str, principal: str, responses: dict[str, Any]
    ) -> StoredTask | None: ...

    def request_cancel(self, task_id: str, principal: str) -> StoredTask | None: ...


# The error a task ends with when its instance stopped under it (also the store's "lost").
STOPPED: JSONObject = {
    "code": INTERNAL_ERROR,
    "message": "The server running this task stopped before it finished; what it had done "
    "stays done. Call the tool again to finish the job.",
}


def view(row: StoredTask) -> TaskView:
    status: Status = row.status  # type: ignore[assignment]  # the store writes only these
    return TaskView(
        task_id=row.task_id,
        status=status,
        message=row.message,
        created_at=row.created_at,
        updated_at=row.updated_at,
        ttl_ms=row.ttl_ms,
        poll_ms=row.poll_ms,
        input_requests=row.input_requests,
        result=row.result,
        error=row.error,
    )


def _error_of(exc: BaseException) -> JSONObject:
    """The JSON-RPC error object a task that raised ``exc`` ends with."""
    if isinstance(exc, Fault):
        error: JSONObject = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            error["data"] = exc.data
        return error
    if isinstance(exc, InvalidParams):
        return {"code": INVALID_PARAMS, "message": exc.message}
    return {"code": INTERNAL_ERROR, "message": "Internal error"}


class _Store:
    """The store's calls in worker threads, its failures as the request's Fault."""

    def __init__(self, store: TaskStore) -> None:
        self.raw = store

    async def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        function = getattr(self.raw, method)
        try:
            return await anyio.to_thread.run_sync(lambda: function(*args, **kwargs))
        except Exception as exc:  # the store raises only its own errors, each a sentence
            raise Fault(INTERNAL_ERROR, f"Tasks unavailable: {exc}") from None


class _Running:
    """One call that may become a task, and the task it becomes (see the module)."""

    def __init__(self, host: TaskHost, call: Call, step: Step) -> None:
        self.host = host
        self.call = call
        self.step = step
        self.task_id: str | None = None
        self.detached = False  # a task (or being made one): the request no longer waits
        self.refused = False  # making it a task failed: it stays a plain call
        self.decided = anyio.Event()  # it ended, or must become a task
        self.created = anyio.Event()  # its row is committed (or could not be)
        self.done = anyio.Event()
        self.answer: JSONObject | None = None  # its plain answer, when not a task
        self.failure: BaseException | None = None  # what the plain call raised
        self.message: str | None = None
        self.scope: anyio.CancelScope | None = None
        self.cancel_asked = False  # by the client (tasks/cancel), not by a server stop
        self.wake = anyio.Event()  # answers may have arrived

    # --- TaskHooks (the handler's side) --------------------------------------------------

    async def detach(self, message: str | None) -> bool:
        if message is not None:
            self.message = message
        if self.refused:
            return False
        if not self.detached:
            self.detached = True
            self.decided.set()
        await self.created.wait()
        return self.task_id is not None

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if message is not None:
            self.message = message
        elif total:
            self.message = f"{progress:g} of {total:g}"
        else:
            self.message = f"{progress:g}"

    # --- the work ----------------------------------------------------------------------------

    async def work(self) -> None:
        outcome: JSONObject | None = None
        failure: BaseException | None = None
        scope = anyio.CancelScope()
        try:
            with scope:
                self.scope = scope
                try:
                    outcome = await self._rounds()
                except Exception as exc:
                    failure = exc
                    if not isinstance(exc, Fault | InvalidParams):
                        _log.exception("task work of request %r failed", self.call.id)
        finally:
            # Also when the host's group is cancelled (the server stops): then neither an
            # outcome nor a client's cancel, and the task is recorded as failed (STOPPED).
            with anyio.CancelScope(shield=True):
                # A cancel that arrived while the work sat in a worker thread is not raised
                # once the thread returns: a client's cancel counts all the same.
                cancelled = scope.cancelled_caught or (scope.cancel_called and self.cancel_asked)
                if cancelled:
                    outcome = failure = None
                await self._settle(outcome, failure, cancelled=cancelled)

    async def _rounds(self) -> JSONObject:
        call = self.call
        responses, state = call.input_responses, call.request_state
        rounds = 0
        while True:
            outcome = await self.step(responses, state)
            if not isinstance(outcome, InputRequired):
                return outcome
            if not self.detached:
                return encode_input_required(outcome)  # MRTR: the client retries
            rounds += 1
            if rounds > self.host.asking_rounds:
                raise Fault(
                    INTERNAL_ERROR,
                    f"Gave up after {self.host.asking_rounds} rounds of asking for input",
                )
            responses = await self._wait_for_input(outcome)
            state = outcome.state

    async def _wait_for_input(self, outcome: InputRequired) -> dict[str, Any]:
        await self.created.wait()
        if self.task_id is None:
            raise Fault(INTERNAL_ERROR, "Tasks unavailable")
        requests = encode_input_required(outcome).get("inputRequests") or {}
        store, owner = self.host.store, self.host.instance
        if not requests:
            return {}  # only a state: the next round at once
        if not await store("park", self.task_id, owner, requests):
            # Ended meanwhile (cancelled, or read as lost): nothing more to record.
            raise Fault(INTERNAL_ERROR, "The task ended while it waited for input")
        while True:
            answers: dict[str, Any] | None = await store("take_answers", self.task_id, owner)
            if answers is not None:
                return answers
            self.wake = anyio.Event()
            with anyio.move_on_after(self.host.beat_s):
                await self.wake.wait()

    async def _settle(
        self, outcome: JSONObject | None, failure: BaseException | None, *, cancelled: bool
    ) -> None:
        """Record how it ended: in the store if it is a task, else for the waiting request."""
        try:
            if self.detached:
                await self.created.wait()
            if self.task_id is None:
                self.answer = outcome
                self.failure = failure
                if outcome is None and failure is None:
                    self.failure = Fault(INTERNAL_ERROR, "Server stopping: the call was cancelled")
                return
            store, owner = self.host.store, self.host.instance
            try:
                if outcome is not None:
                    await store("finish", self.task_id, owner, "completed", result=outcome)
                elif failure is not None:
                    await store("finish", self.task_id, owner, "failed", error=_error_of(failure))
                elif cancelled and self.cancel_asked:
                    await store("finish", self.task_id, owner, "cancelled")
                else:
                    await store("finish", self.task_id, owner, "failed", error=STOPPED)
            except Fault as exc:
                # Not recorded: the row stops beating and reads as failed after stale_after.
                _log.error("task %s: its end could not be recorded: %s", self.task_id, exc)
        finally:
            if self.task_id is not None:
                self.host.running.pop(self.task_id, None)
            self.done.set()
            self.decided.set()

    async def beat(self) -> None:
        """While the task runs: tell the store it is alive (and its status message), and
        take a cancel asked on any instance."""
        assert self.task_id is not None
        store, owner = self.host.store, self.host.instance
        written = self.message  # the row was created with it
        while not self.done.is_set():
            with anyio.move_on_after(self.host.beat_s):
                await self.done.wait()
            if self.done.is_set():
                return
            message = self.message if self.message != written else None
            try:
                row: StoredTask | None = await store("beat", self.task_id, owner, message)
            except Fault as exc:
                _log.warning("task %s: beat not recorded: %s", self.task_id, exc)
                continue
            written = self.message if message is not None else written
            if row is None or row.ended or row.cancel_requested:
                # Cancelled by the client here or elsewhere, or read as lost meanwhile.
                self.cancel_asked = row is not None and row.cancel_requested
                self.cancel()
            self.wake.set()

    def cancel(self) -> None:
        if self.scope is not None:
            self.scope.cancel()


class TaskHost:
    """Runs the tasks of one server process (see the module docstring). Serve it with
    :meth:`serving` around the transport (the server's lifespan); outside it, calls are
    never made tasks."""

    def __init__(
        self,
        store: TaskStore,
        *,
        instance: str | None = None,
        after_s: float = limits.TASK_AFTER_S,
        beat_s: float = limits.TASK_BEAT_S,
        ttl_ms: int = limits.TASK_TTL_MS,
        poll_ms: int = limits.TASK_POLL_MS,
        max_running: int = limits.MAX_RUNNING_TASKS,
        asking_rounds: int = limits.MAX_INPUT_ROUNDS,
    ) -> None:
        self.store = _Store(store)
        # Who owns the rows this process creates: new with every process, so a restarted
        # instance never takes over (or runs again) the tasks of the one before.
        self.instance = instance or secrets.token_hex(8)
        self.after_s = after_s
        self.beat_s = beat_s
        self.ttl_ms = ttl_ms
        self.poll_ms = poll_ms
        self.max_running = max_running
        self.asking_rounds = asking_rounds
        self.running: dict[str, _Running] = {}
        self._group: anyio.abc.TaskGroup | None = None

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Tasks may be made while in this block; those still running when it ends are
        cancelled and recorded as failed."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    # --- TaskService ---------------------------------------------------------------------

    async def run(self, call: Call, channel: Channel, step: Step) -> JSONObject:
        group = self._group
        if group is None or len(self.running) >= self.max_running:
            return await self._plain(call, step)
        job = _Running(self, call, step)
        call.task = job
        group.start_soon(job.work)
        try:
            with anyio.move_on_after(self.after_s):
                await job.decided.wait()
            if not job.done.is_set():
                job.detached = True
                try:
                    row: StoredTask = await self.store(
                        "create",
                        secrets.token_urlsafe(24),
                        call.principal,
                        self.instance,
                        ttl_ms=self.ttl_ms,
                        poll_ms=self.poll_ms,
                        message=job.message,
                    )
                except Fault as exc:
                    _log.warning("request %r: not made a task (%s)", call.id, exc.message)
                    job.detached = False
                    job.refused = True
                    job.created.set()
                    await job.done.wait()
                else:
                    job.task_id = row.task_id
                    self.running[row.task_id] = job
                    job.created.set()
                    group.start_soon(job.beat)
                    return create_result(view(row))
        except anyio.get_cancelled_exc_class():
            if not job.detached or job.task_id is None:
                job.cancel()  # the request went before it was a task: so does its work
            raise
        if job.failure is not None:
            raise job.failure
        assert job.answer is not None
        return job.answer

    async def _plain(self, call: Call, step: Step) -> JSONObject:
        """A call run as without tasks (no host serving, or too many tasks running)."""
        outcome = await step(call.input_responses, call.request_state)
        if isinstance(outcome, InputRequired):
            return encode_input_required(outcome)
        return outcome

    async def get(self, principal: str, task_id: str) -> TaskView | None:
        row: StoredTask | None = await self.store("get", task_id, principal)
        return None if row is None else view(row)

    async def update(
        self, principal: str, task_id: str, responses: Mapping[str, Any]
    ) -> TaskView | None:
        row: StoredTask | None = await self.store("answer", task_id, principal, dict(responses))
        job = self.running.get(task_id)
        if job is not None:
            job.wake.set()
        return None if row is None else view(row)

    async def cancel(self, principal: str, task_id: str) -> TaskView | None:
        row: StoredTask | None = await self.store("request_cancel", task_id, principal)
        if row is None:
            return None
        job = self.running.get(task_id)
        if job is not None and not row.ended:
            job.cancel_asked = True
            job.cancel()
        return view(row)
