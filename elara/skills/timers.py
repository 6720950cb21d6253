"""Timers that last: each one an encrypted System-role record in the conversation store.

A timer record's content is a short description ("pasta timer, 480 seconds") and its metadata is
`{"kind": "timer", "id": <8 hex>, "name": "pasta" or "", "seconds": "480", "due": <ISO 8601 UTC>,
"created": <ISO 8601 UTC>, "state": "pending"|"ringing"|"done"|"cancelled"}`, and for a reminder
`"reminder": <what it reminds of>`. A change of state
appends the new version first and then deletes the old file, as facts do, so a crash in between
leaves two records with one id and the next `load` keeps the newest. Finished and cancelled
timers stay on disk as history (retention deletes them with the rest).

`TimerBook` is blocking and thread-safe (callers use asyncio.to_thread); `Timekeeper` watches it
from the event loop and hands each timer to a callback the moment it comes due.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.prompts import utc_now
from elara.conversation.records import kind_of, memory_record, parse_time
from elara.conversation.store import ConversationStore
from elara.errors import StoreError

log = logging.getLogger(__name__)

TIMER = "timer"
PENDING, RINGING, DONE, CANCELLED = "pending", "ringing", "done", "cancelled"
STATES = (PENDING, RINGING, DONE, CANCELLED)
#: states of a timer that has not been dealt with yet
ACTIVE = (PENDING, RINGING)


@dataclass(frozen=True)
class Timer:
    """One timer: how long it runs, when it is due (UTC), and where it stands."""

    id: str
    name: str | None
    seconds: int
    due: datetime
    created: datetime
    state: str = PENDING
    path: Path | None = None
    room: str | None = None  # the satellite's room it was set in (None: Elara's own)
    reminder: str | None = None  # what a reminder reminds of (None: a plain timer)

    def remaining(self, now: datetime) -> float:
        """Seconds until it is due (negative once past)."""
        return (self.due - now).total_seconds()

    @property
    def active(self) -> bool:
        """True while it counts down or rings."""
        return self.state in ACTIVE


def timer_record(timer: Timer, timestamp: datetime) -> ChatMessage:
    """The store record of this version of `timer`."""
    what = f"{timer.name} timer" if timer.name else "timer"
    if timer.reminder:
        what = f"reminder: {timer.reminder}"
    return memory_record(TIMER, f"{what}, {timer.seconds} seconds", timestamp, **{
        "id": timer.id, "name": timer.name or "", "seconds": str(timer.seconds),
        "due": timer.due.astimezone(UTC).isoformat(), "created": timer.created.astimezone(UTC).isoformat(),
        "state": timer.state, **({"room": timer.room} if timer.room else {}),
        **({"reminder": timer.reminder} if timer.reminder else {})})


def timer_from_record(message: ChatMessage, path: Path | None = None) -> Timer:
    """The timer a record holds; ValueError naming what is wrong with a malformed one."""
    meta = message.metadata
    timer_id = meta.get("id", "")
    if len(timer_id) < 4 or not timer_id.isalnum():
        raise ValueError("missing or invalid id")
    state = meta.get("state", "")
    if state not in STATES:
        raise ValueError(f"unknown state {state!r}")
    try:
        seconds = int(meta.get("seconds", ""))
    except ValueError:
        raise ValueError("seconds is not a whole number") from None
    if seconds <= 0:
        raise ValueError("seconds is not positive")
    due, created = parse_time(meta.get("due")), parse_time(meta.get("created"))
    if due is None or created is None:
        raise ValueError("due or created is not an ISO 8601 time with a UTC offset")
    return Timer(timer_id, meta.get("name") or None, seconds, due.astimezone(UTC),
                 created.astimezone(UTC), state, path, meta.get("room") or None,
                 meta.get("reminder") or None)


class TimerBook:
    """The timers in the store, kept in memory; every change goes to disk before it returns."""

    def __init__(self, store: ConversationStore, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._store = store
        self._clock = clock
        self._lock = threading.RLock()
        self._timers: dict[str, Timer] = {}
        self._published: tuple[Timer, ...] = ()
        #: the active ones, soonest due first: the timekeeper asks every second, and the book
        #: keeps every timer ever set
        self._active: tuple[Timer, ...] = ()
        #: told after every change (the timekeeper re-plans); called from the changing thread
        self.on_change: Callable[[], None] | None = None

    def load(self) -> list[Timer]:
        """Read every timer record; of several with one id the newest wins (the older files are
        deleted). A malformed record is skipped with one warning. StoreError when the store
        itself cannot be read."""
        with self._lock:
            versions: dict[str, list[Timer]] = {}
            for stored in self._store.iter_messages(roles={ChatRole.SYSTEM}):
                if kind_of(stored.message) != TIMER:
                    continue
                try:
                    timer = timer_from_record(stored.message, stored.path)
                except ValueError as exc:
                    log.warning("skipping timer record %s: %s", stored.path.name, exc)
                    continue
                versions.setdefault(timer.id, []).append(timer)
            self._timers = {}
            for timer_id, found in versions.items():
                self._timers[timer_id] = found[-1]  # name order is append order
                if len(found) > 1:
                    self._delete_quietly([t.path for t in found[:-1] if t.path is not None])
            self._publish()
            return self.timers()

    def timers(self) -> list[Timer]:
        """Every timer as last loaded or changed, soonest due first; never waits for a write."""
        return sorted(self._published, key=lambda t: t.due)

    def active(self) -> list[Timer]:
        """The timers counting down or ringing, soonest due first."""
        return list(self._active)

    def get(self, timer_id: str) -> Timer | None:
        """The timer with this id (or unique id prefix of at least 4 characters)."""
        found = [t for t in self._published if t.id == timer_id] or (
            [t for t in self._published if t.id.startswith(timer_id)] if len(timer_id) >= 4 else [])
        return found[0] if len(found) == 1 else None

    def start(self, seconds: int, name: str | None = None, room: str | None = None, *,
              reminder: str | None = None) -> Timer:
        """A new pending timer due `seconds` from now (a reminder, with what it reminds of), on
        disk before it returns (StoreError)."""
        if seconds <= 0:
            raise ValueError("a timer needs a positive number of seconds")
        now = self._clock()
        with self._lock:
            timer = Timer(self._new_id(), name, int(seconds), now + timedelta(seconds=seconds), now,
                          room=room, reminder=reminder)
            timer = self._write(timer)
            log.info("timer %s set for %d s", timer.id, seconds)
        self.changed()
        return timer

    def set_state(self, timer_id: str, state: str) -> Timer | None:
        """Move a timer to `state` (on disk before it returns); None when there is no such timer
        or it already is in that state."""
        if state not in STATES:
            raise ValueError(f"unknown timer state {state!r}")
        with self._lock:
            old = self._timers.get(timer_id)
            if old is None or old.state == state:
                return None
            new = self._write(replace(old, state=state))
            if old.path is not None:
                self._delete_quietly([old.path])
            log.info("timer %s %s", timer_id, state)
        self.changed()
        return new

    def cancel_all(self) -> list[Timer]:
        """Cancel every active timer; returns them."""
        return [t for t in (self.set_state(t.id, CANCELLED) for t in self.active()) if t is not None]

    # -- inside the lock ---------------------------------------------------------------------

    def _write(self, timer: Timer) -> Timer:
        path = self._store.append(timer_record(timer, self._clock()))
        timer = replace(timer, path=path)
        self._timers[timer.id] = timer
        self._publish()
        return timer

    def _publish(self) -> None:
        self._published = tuple(self._timers.values())
        self._active = tuple(sorted((t for t in self._published if t.active), key=lambda t: t.due))

    def changed(self) -> None:
        """Tell `on_change` the timers changed (done by every change made here)."""
        if self.on_change is not None:
            self.on_change()

    def _delete_quietly(self, paths: list[Path]) -> None:
        try:
            self._store.delete(paths)
        except StoreError as exc:
            log.warning("cannot delete an old timer record yet (tried again on the next load): %s", exc)

    def _new_id(self) -> str:
        while (timer_id := secrets.token_hex(4)) in self._timers:
            pass
        return timer_id


@dataclass(frozen=True)
class DueTimer:
    """A timer that came due, and whether that happened while Elara was not running."""

    timer: Timer
    missed: bool


class Timekeeper:
    """Hands each active timer of the book to `on_due` once, the moment it comes due.

    Timers already due when it starts (they came due while Elara was down) are handed over at
    once, marked missed; a timer that was ringing when Elara stopped counts as heard and is
    closed. Wall-clock time is polled at least every `poll` seconds, so a clock step or a
    suspended machine delays a timer by at most that."""

    def __init__(self, book: TimerBook, on_due: Callable[[DueTimer], Awaitable[None] | None], *,
                 clock: Callable[[], datetime] = utc_now, poll: float = 1.0) -> None:
        self.book = book
        self._on_due = on_due
        self._clock = clock
        self._poll = poll
        self._handed: set[str] = set()
        self._started: datetime | None = None
        self._changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def wake(self) -> None:
        """The book changed: plan again (safe from any thread)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._changed.set)

    def due(self, now: datetime) -> list[DueTimer]:
        """The pending timers due by `now` not handed over yet (and from now on counted as handed)."""
        started = self._started or now
        found = []
        active = self.book.active()
        self._handed &= {t.id for t in active}  # a closed timer is never handed again
        for timer in active:
            if timer.id in self._handed or timer.state != PENDING or timer.due > now:
                continue
            self._handed.add(timer.id)
            found.append(DueTimer(timer, missed=timer.due < started))
        return found

    async def run(self) -> None:
        """Watch the book until cancelled."""
        self._loop = asyncio.get_running_loop()
        self._started = self._clock()
        self.book.on_change = self.wake
        for timer in self.book.active():
            if timer.state == RINGING:
                # It rang when Elara stopped: it was heard, and ringing again would be a surprise.
                await asyncio.to_thread(self.book.set_state, timer.id, DONE)
        while True:
            self._changed.clear()
            now = self._clock()
            for due in self.due(now):
                result = self._on_due(due)
                if result is not None:
                    await result
            upcoming = [t.remaining(now) for t in self.book.active()
                        if t.state == PENDING and t.id not in self._handed]
            wait = min([self._poll, *upcoming])
            try:
                async with asyncio.timeout(max(wait, 0.0)):
                    await self._changed.wait()
            except TimeoutError:
                pass


def timer_status(timer: Timer, now: datetime) -> dict[str, object]:
    """One timer as `elara status` shows it."""
    return {"id": timer.id, "name": timer.name, "seconds": timer.seconds, "state": timer.state,
            "due_utc": timer.due.astimezone(UTC).isoformat(timespec="seconds"),
            "remaining_seconds": round(max(0.0, timer.remaining(now)), 1),
            **({"room": timer.room} if timer.room else {}),
            **({"reminder": timer.reminder} if timer.reminder else {})}
