"""How long to leave something that failed alone before trying it again: a first wait, doubling
with each failure in a row up to a cap, and back to the first wait once a try succeeds.

One helper for everything Elara retries — a remote speech service, a satellite's link, the
microphone's stream — so the three agree on what "backoff" means. It only counts and times; the
caller sleeps, or asks `ready()` before the next call.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Backoff:
    """The wait before the next try: `first` after one failure, doubling, at most `cap`."""

    def __init__(self, first: float, cap: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if first <= 0 or cap < first:
            raise ValueError(f"a backoff needs 0 < first <= cap, not first={first}, cap={cap}")
        self.first = float(first)
        self.cap = float(cap)
        self._clock = clock
        #: Failures since the last success.
        self.failures_in_a_row = 0
        #: When the next try is due (the clock's time), or None while nothing has failed.
        self.retry_at: float | None = None

    @property
    def delay(self) -> float:
        """The wait the failures so far call for (0 while nothing has failed)."""
        if self.failures_in_a_row == 0:
            return 0.0
        return min(self.cap, self.first * 2 ** (self.failures_in_a_row - 1))

    def failed(self) -> float:
        """One more failure in a row: the wait before the next try, which starts now."""
        self.failures_in_a_row += 1
        self.retry_at = self._clock() + self.delay
        return self.delay

    def reset(self) -> None:
        """A try worked (or retrying starts afresh): no wait, and the next failure waits `first`."""
        self.failures_in_a_row = 0
        self.retry_at = None

    def ready(self) -> bool:
        """True when a try may go ahead: nothing failed, or the wait is over. A retry restarts
        the same wait, so that of several callers only the first tries while one is under way."""
        if self.retry_at is None:
            return True
        now = self._clock()
        if now < self.retry_at:
            return False
        self.retry_at = now + self.delay
        return True

    def remaining(self) -> float | None:
        """Seconds until the next try is due (0 when it is), or None while nothing has failed."""
        return None if self.retry_at is None else max(0.0, self.retry_at - self._clock())
