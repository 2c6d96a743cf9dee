"""The in-flight budget: how many bytes the requests being served (and the client answers they
wait for) may hold at once, however many clients send them.

A stdio process has one client and one budget. A Streamable HTTP server shares one budget
between every request it serves, the stateless 2026-07-28 ones and those of every legacy
session, so that the number of clients does not multiply what they can make it hold. Each
request is charged what its message holds once parsed (:class:`~fsnotes.protocol.linecost.
LineCost` ``charge``) from its start until its task ends, and the answers it waits for when they
arrive; see :data:`~fsnotes.protocol.limits.MAX_IN_FLIGHT_BYTES` for the figures.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Hold:
    """Bytes charged for one request (and the answers it waits for), given back together."""

    bytes: int = 0


class InFlightBudget:
    """At most ``max_bytes`` held by all :class:`Hold` s charged against it. Not thread-safe:
    the event loop's tasks share it (nothing in it waits)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._held = 0

    @property
    def held(self) -> int:
        """Bytes charged now, at most :attr:`max_bytes`."""
        return self._held

    def reserve(self, hold: Hold, charge: int) -> bool:
        """Charge ``charge`` bytes to ``hold`` if the budget has room; say whether it had."""
        if self._held + charge > self.max_bytes:
            return False
        hold.bytes += charge
        self._held += charge
        return True

    def release(self, hold: Hold) -> None:
        """Give back all that ``hold`` was charged (idempotent)."""
        self._held -= hold.bytes
        hold.bytes = 0
