"""PageRunner: the page starts on demand, once, stops when idle, and reports a taken port."""

from __future__ import annotations

import signal
import socket
import threading
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from fsnotes.setup.policy import PageUnavailable, SetupPolicy
from fsnotes.setup.runner import PageRunner
from setup.conftest import LivePage, free_port, http_request

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

# Short on purpose: the tests wait for these to pass.
GRACE_S = 0.4
POLL_S = 0.05


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn needs asyncio


class Pending:
    """has_pending, switched by the test; counts calls (it runs in a worker thread)."""

    def __init__(self, value: bool) -> None:
        self.value = value
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self) -> bool:
        with self._lock:
            self.calls += 1
            return self.value


def make_runner(
    tmp_path: Path, *, always_on: bool = False, pending: Pending | None = None
) -> tuple[LivePage, PageRunner]:
    page = LivePage(tmp_path)
    policy = SetupPolicy(allow=page.policy.allow, port=page.port, always_on=always_on)
    page.policy = policy
    runner = PageRunner(
        policy,
        page.app,  # type: ignore[arg-type]
        has_pending=pending or Pending(True),
        idle_grace=GRACE_S,
        poll_interval=POLL_S,
    )
    return page, runner


async def fetch_status(page: LivePage, path: str = "/") -> int:
    response = await anyio.to_thread.run_sync(lambda: http_request(page.port, "GET", path))
    return response.status


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        # As the runner binds: TIME_WAIT leftovers do not count, a listener does.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen(1)
        except OSError:
            return False
        return True


async def test_ensure_started_serves_the_page_and_is_idempotent(tmp_path: Path) -> None:
    page, runner = make_runner(tmp_path)
    setup = page.start_setup()
    async with runner.running():
        assert not runner.is_running
        assert port_is_free(page.port)
        await runner.ensure_started()
        assert runner.is_running
        server = runner._server
        await runner.ensure_started()
        assert runner._server is server  # the same server, not a second one
        assert runner.url_base == f"http://127.0.0.1:{page.port}"
        assert await fetch_status(page, f"/setup/{setup.id}") == 200
    assert not runner.is_running
    assert port_is_free(page.port)  # stopped and released on exit


async def test_concurrent_ensure_started_calls_start_one_server(tmp_path: Path) -> None:
    page, runner = make_runner(tmp_path)
    async with runner.running():
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(runner.ensure_started)
        assert runner.is_running
        assert await fetch_status(page) == 404


async def test_port_in_use_raises_page_unavailable_naming_the_port(tmp_path: Path) -> None:
    page, runner = make_runner(tmp_path)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", page.port))
        squatter.listen(1)
        async with runner.running():
            with pytest.raises(PageUnavailable) as caught:
                await runner.ensure_started()
            assert f"127.0.0.1:{page.port}" in str(caught.value)
            assert "already in use" in str(caught.value)
            assert not runner.is_running
        # The squatter leaves; the next call succeeds.
    async with runner.running():
        await runner.ensure_started()
        assert await fetch_status(page) == 404


async def test_bind_refused_raises_page_unavailable(tmp_path: Path) -> None:
    page, _ = make_runner(tmp_path)
    # 192.0.2.1 (TEST-NET-1) is not an address of this machine: bind is refused.
    policy = SetupPolicy(allow=page.policy.allow, port=page.port, bind="192.0.2.1")
    runner = PageRunner(policy, page.app, has_pending=Pending(True))  # type: ignore[arg-type]
    async with runner.running():
        with pytest.raises(PageUnavailable, match=r"192\.0\.2\.1"):
            await runner.ensure_started()


async def test_ensure_started_outside_running_is_a_clear_error(tmp_path: Path) -> None:
    _, runner = make_runner(tmp_path)
    with pytest.raises(RuntimeError, match="running"):
        await runner.ensure_started()


async def test_page_stops_after_the_idle_grace_and_starts_again_on_demand(
    tmp_path: Path,
) -> None:
    pending = Pending(True)
    page, runner = make_runner(tmp_path, pending=pending)
    async with runner.running():
        await runner.ensure_started()
        # While a setup is pending, the page stays up well past the grace.
        await anyio.sleep(GRACE_S * 3)
        assert runner.is_running and pending.calls > 0
        pending.value = False
        with anyio.fail_after(GRACE_S + 5):
            while runner.is_running:
                await anyio.sleep(POLL_S)
        assert port_is_free(page.port)
        await runner.ensure_started()  # a new setup: the same port again
        assert runner.is_running
        assert await fetch_status(page) == 404


async def test_a_new_setup_within_the_grace_keeps_the_page_up(tmp_path: Path) -> None:
    pending = Pending(False)
    _, runner = make_runner(tmp_path, pending=pending)
    async with runner.running():
        await runner.ensure_started()
        await anyio.sleep(GRACE_S * 0.6)
        await runner.ensure_started()  # restarts the grace
        await anyio.sleep(GRACE_S * 0.6)
        assert runner.is_running  # 1.2 x grace since start, 0.6 x since the last call
        with anyio.fail_after(GRACE_S + 5):
            while runner.is_running:
                await anyio.sleep(POLL_S)


async def test_always_on_starts_with_running_and_ignores_idleness(tmp_path: Path) -> None:
    pending = Pending(False)
    page, runner = make_runner(tmp_path, always_on=True, pending=pending)
    async with runner.running():
        assert runner.is_running
        assert await fetch_status(page) == 404
        await anyio.sleep(GRACE_S * 3)
        assert runner.is_running
        assert pending.calls == 0  # no watcher at all
    assert not runner.is_running and port_is_free(page.port)


async def test_stop_is_prompt_and_repeatable(tmp_path: Path) -> None:
    page, runner = make_runner(tmp_path)
    async with runner.running():
        await runner.ensure_started()
        with anyio.fail_after(3):
            await runner.stop()
        await runner.stop()
        assert not runner.is_running and port_is_free(page.port)


async def test_cancelling_the_host_stops_the_page_and_frees_the_port(tmp_path: Path) -> None:
    page, runner = make_runner(tmp_path, always_on=True)
    with anyio.move_on_after(0.5):
        async with runner.running():
            await anyio.sleep(10)
    assert not runner.is_running
    assert port_is_free(page.port)


async def test_the_host_keeps_its_own_signal_handlers(tmp_path: Path) -> None:
    def handler(signum: int, frame: object) -> None:
        raise AssertionError("never delivered in this test")

    _, runner = make_runner(tmp_path)
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        async with runner.running():
            await runner.ensure_started()
            assert signal.getsignal(signal.SIGTERM) is handler
            assert signal.getsignal(signal.SIGINT) is not None
            await runner.stop()
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)


async def test_the_port_can_be_a_fixed_free_one(tmp_path: Path) -> None:
    # Same port twice in a row, as the default (fixed) setup port is used in production.
    port = free_port()
    page, _ = make_runner(tmp_path)
    policy = SetupPolicy(allow=page.policy.allow, port=port)
    page.policy = policy
    for _ in range(2):
        runner = PageRunner(policy, page.app, has_pending=Pending(True))  # type: ignore[arg-type]
        async with runner.running():
            await runner.ensure_started()
            status = await anyio.to_thread.run_sync(lambda: http_request(port, "GET", "/").status)
            assert status == 404


@pytest.mark.anyio
async def test_a_failing_pending_check_keeps_the_page_up_and_the_host_alive(
    tmp_path: Path,
) -> None:
    class Broken(Pending):
        def __call__(self) -> bool:
            super().__call__()
            raise OSError("database is locked")

    broken = Broken(False)
    _page, runner = make_runner(tmp_path, pending=broken)
    with anyio.fail_after(10):
        async with runner.running():
            await runner.ensure_started()
            while broken.calls < 5:
                await anyio.sleep(POLL_S)
            assert runner.is_running  # the error counted as "pending"; nothing crashed
