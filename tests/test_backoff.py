"""The one backoff the remote speech services, the satellites' links and the microphone share:
its waits with numbers, on a clock the test moves."""

import pytest

from elara.service.backoff import Backoff


def test_the_wait_doubles_from_the_first_up_to_the_cap_and_a_reset_starts_again():
    backoff = Backoff(0.5, 10.0)  # the microphone's
    assert backoff.delay == 0.0 and backoff.failures_in_a_row == 0
    assert [backoff.failed() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff.failures_in_a_row == 7
    backoff.reset()
    assert backoff.failures_in_a_row == 0 and backoff.retry_at is None and backoff.remaining() is None
    assert backoff.failed() == 0.5


def test_a_try_is_due_once_the_wait_is_over_and_only_one_caller_takes_it():
    now = [50.0]
    backoff = Backoff(1.0, 30.0, clock=lambda: now[0])
    assert backoff.ready() and backoff.ready()  # nothing failed: always
    backoff.failed()
    backoff.failed()  # two in a row: 2 s
    assert backoff.retry_at == 52.0 and backoff.remaining() == 2.0
    now[0] = 51.9
    assert not backoff.ready() and backoff.remaining() == pytest.approx(0.1)
    now[0] = 52.0
    assert backoff.ready()  # this caller retries...
    assert not backoff.ready()  # ...and the next waits the same 2 s for its answer
    assert backoff.retry_at == 54.0 and backoff.failures_in_a_row == 2
    now[0] = 60.0
    assert backoff.remaining() == 0.0


@pytest.mark.parametrize("first, cap", [(0, 1), (-1, 1), (2, 1)])
def test_a_backoff_needs_a_positive_first_wait_no_longer_than_the_cap(first, cap):
    with pytest.raises(ValueError, match="0 < first <= cap"):
        Backoff(first, cap)
