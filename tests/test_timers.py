"""Timers in the real encrypted store, and the timekeeper on an injected clock."""

import asyncio
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.records import memory_record
from elara.conversation.store import ConversationStore
from elara.skills.timers import (
    CANCELLED,
    DONE,
    PENDING,
    RINGING,
    DueTimer,
    Timekeeper,
    Timer,
    TimerBook,
    timer_from_record,
    timer_record,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self, now=T0):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += timedelta(seconds=seconds)


def book_over(path, clock):
    return TimerBook(ConversationStore(path, "timer key"), clock=clock)


def test_a_timer_is_stored_encrypted_and_read_back_after_a_restart(tmp_path):
    clock = Clock()
    book = book_over(tmp_path, clock)
    timer = book.start(480, "pasta")
    assert (timer.name, timer.seconds, timer.state, timer.due) == ("pasta", 480, PENDING, T0 + timedelta(seconds=480))
    assert b"pasta" not in timer.path.read_bytes()  # encrypted on disk
    again = book_over(tmp_path, clock).load()
    assert [(t.id, t.name, t.seconds, t.due, t.state) for t in again] == [
        (timer.id, "pasta", 480, timer.due, PENDING)]


def test_a_change_of_state_replaces_the_record(tmp_path):
    clock = Clock()
    book = book_over(tmp_path, clock)
    timer = book.start(60)
    clock.advance(60)
    assert book.set_state(timer.id, RINGING).state == RINGING
    assert book.set_state(timer.id, RINGING) is None  # already so: nothing written
    book.set_state(timer.id, DONE)
    files = [p for p in tmp_path.iterdir() if p.name.endswith("_system.json")]
    assert len(files) == 1
    assert book_over(tmp_path, clock).load()[0].state == DONE
    assert book.active() == []


def test_two_records_of_one_timer_the_newest_wins(tmp_path):
    # a crash between appending the new version and deleting the old leaves both
    clock = Clock()
    store = ConversationStore(tmp_path, "timer key")
    book = TimerBook(store, clock=clock)
    timer = book.start(30, "tea")
    clock.advance(1)
    store.append(timer_record(replace(timer, state=CANCELLED), clock()))
    reloaded = TimerBook(store, clock=clock)
    assert [t.state for t in reloaded.load()] == [CANCELLED]
    assert len([p for p in tmp_path.iterdir() if p.name.endswith("_system.json")]) == 1


@pytest.mark.parametrize("metadata, why", [
    ({"id": "", "seconds": "5", "state": "pending"}, "invalid id"),
    ({"id": "abcd1234", "seconds": "five", "state": "pending"}, "whole number"),
    ({"id": "abcd1234", "seconds": "5", "state": "snoozing"}, "unknown state"),
    ({"id": "abcd1234", "seconds": "5", "state": "pending", "due": "tomorrow"}, "ISO 8601"),
])
def test_a_corrupt_timer_record_is_skipped_with_one_warning(tmp_path, caplog, metadata, why):
    clock = Clock()
    store = ConversationStore(tmp_path, "timer key")
    good = TimerBook(store, clock=clock).start(10, "eggs")
    record = {"kind": "timer", "due": T0.isoformat(), "created": T0.isoformat(), "name": "", **metadata}
    store.append(ChatMessage(ChatRole.SYSTEM, "timer", T0, record))
    (tmp_path / "20260301T120000000Z_0099_system.json").write_bytes(b"not a sealed record")
    with caplog.at_level(logging.WARNING):
        timers = TimerBook(store, clock=clock).load()
    assert [t.id for t in timers] == [good.id]
    warnings = [r for r in caplog.records if "timer record" in r.getMessage()]
    assert len(warnings) == 1 and why in warnings[0].getMessage()


def test_records_of_other_kinds_are_left_alone(tmp_path):
    store = ConversationStore(tmp_path, "timer key")
    store.append(memory_record("fact", "The user likes tea.", T0, id="0badcafe"))
    store.append(ChatMessage(ChatRole.USER, "set a timer", T0))
    assert TimerBook(store).load() == []


def test_the_record_round_trips():
    timer = Timer("0123abcd", None, 90, T0 + timedelta(seconds=90), T0, PENDING)
    message = timer_record(timer, T0)
    assert message.role is ChatRole.SYSTEM and message.metadata["kind"] == "timer"
    assert timer_from_record(message) == timer


def run_keeper(keeper, steps):
    """Run the timekeeper while `steps` (a coroutine) drives the clock."""
    async def scenario():
        task = asyncio.create_task(keeper.run())
        try:
            await steps()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    asyncio.run(scenario())


def test_the_timekeeper_hands_over_each_timer_once_when_due(tmp_path):
    clock = Clock()
    book = book_over(tmp_path, clock)
    handed: list[DueTimer] = []
    keeper = Timekeeper(book, handed.append, clock=clock, poll=0.01)
    first = book.start(5, "a")
    second = book.start(9, "b")

    async def steps():
        await asyncio.sleep(0.05)
        assert handed == []
        clock.advance(5)
        await asyncio.sleep(0.05)
        assert [(d.timer.id, d.missed) for d in handed] == [(first.id, False)]
        clock.advance(10)
        await asyncio.sleep(0.05)
        assert [d.timer.id for d in handed] == [first.id, second.id]

    run_keeper(keeper, steps)


def test_the_keeper_forgets_a_closed_timer_and_the_book_lists_only_the_active(tmp_path):
    # months of timers: neither the keeper's memory of what it handed over nor the book's
    # active list may grow with every timer ever set
    clock = Clock()
    book = book_over(tmp_path, clock)
    keeper = Timekeeper(book, lambda due: None, clock=clock)
    later, sooner = book.start(9, "later"), book.start(5, "sooner")
    clock.advance(5)
    assert [d.timer.id for d in keeper.due(clock())] == [sooner.id]
    book.set_state(sooner.id, RINGING)
    assert [t.id for t in book.active()] == [sooner.id, later.id]
    book.set_state(sooner.id, DONE)
    assert keeper.due(clock()) == []
    assert keeper._handed == set()
    assert [t.id for t in book.active()] == [later.id]
    assert len(book.timers()) == 2


def test_a_timer_set_while_running_wakes_the_keeper(tmp_path):
    clock = Clock()
    book = book_over(tmp_path, clock)
    handed: list[DueTimer] = []
    keeper = Timekeeper(book, handed.append, clock=clock, poll=3600)  # only a change wakes it

    async def steps():
        await asyncio.sleep(0.02)
        timer = await asyncio.to_thread(book.start, 1)
        clock.advance(1)
        book.changed()
        await asyncio.sleep(0.05)
        assert [d.timer.id for d in handed] == [timer.id]

    run_keeper(keeper, steps)


def test_timers_that_came_due_while_down_are_missed_and_a_ringing_one_is_closed(tmp_path):
    clock = Clock()
    book = book_over(tmp_path, clock)
    missed = book.start(60, "pasta")
    rang = book.start(30, "tea")
    book.set_state(rang.id, RINGING)
    later = book.start(3600, "roast")
    clock.advance(12 * 60)  # Elara was down meanwhile
    book = book_over(tmp_path, clock)
    book.load()
    handed: list[DueTimer] = []
    keeper = Timekeeper(book, handed.append, clock=clock, poll=0.01)

    async def steps():
        await asyncio.sleep(0.1)

    run_keeper(keeper, steps)
    assert [(d.timer.id, d.missed) for d in handed] == [(missed.id, True)]
    assert book.get(rang.id).state == DONE
    assert book.get(later.id).state == PENDING
