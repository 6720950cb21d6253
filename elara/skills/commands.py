"""Everyday commands carried out without the language model: timers, the time and date, "stop", and
the questions whose answer is computed (arithmetic, unit conversions, the calendar).

`elara.skills.intents` (pure) says what was asked; `LocalCommands` works out the spoken answer from the
timers and the clock, and what doing it takes (`LocalReply.act`), which the orchestrator runs only
once the turn is committed — a speculative reply that is dropped sets no timer. `Alarms` joins the
timers and the announcer to the store: a due timer rings, each announcement heard is stored, and
a timer's record follows what became of its ring.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any, Protocol

from elara.conversation.messages import ChatMessage
from elara.conversation.prompts import utc_now
from elara.errors import StoreError
from elara.skills import arithmetic, conversions, dates, spoken
from elara.skills import intents as i
from elara.skills.announcements import TIMER_DONE, TIMER_MISSED, Announcement, Announcer, announcement_record
from elara.skills.timers import CANCELLED, DONE, RINGING, DueTimer, Timer, TimerBook

log = logging.getLogger(__name__)

#: how long the question "which one?" waits for its answer
ASK_BACK_SECONDS = 30.0
_ALL = re.compile(r"\b(all|both|every|everything)\b")
_FILLER = re.compile(r"\b(the|one|timer|that|for|please)\b|[^\w\s-]")


class MessageStore(Protocol):
    """Where announcements are kept."""

    def append(self, message: ChatMessage) -> object:
        """Store one complete message."""


@dataclass(frozen=True)
class LocalReply:
    """A command's answer: what to say, what doing it takes, how it is kept."""

    intent: str  # e.g. "set_timer"; stored as `metadata.intent`
    text: str  # what Elara says ("" says nothing)
    act: Callable[[], Awaitable[None]] | None = None  # run once the turn is committed
    store: bool = True  # False: a "stop" is no conversation, and leaves no turn behind
    expects_answer: bool = False  # it asked a question: listen for the answer without the wake word


def timer_label(timer: Timer) -> str:
    """How a timer is named aloud: "pasta timer", "timer for ten minutes", "reminder to call mum"."""
    if timer.reminder:
        return f"reminder to {timer.reminder}" if _imperative(timer.reminder) else \
            f"reminder: {timer.reminder}"
    if timer.name:
        return f"{timer.name} timer"
    return f"timer for {spoken.say_duration(timer.seconds)}"


def done_text(timer: Timer) -> str:
    """What a ringing timer says; a reminder says what it reminds of."""
    if timer.reminder:
        return f"Reminder: {timer.reminder.rstrip('.')}."
    return f"Your {timer_label(timer)} is done."


def missed_text(timer: Timer, now: datetime) -> str:
    """What a timer that came due while Elara was down says once she is back."""
    ago = spoken.say_remaining(max(1.0, -timer.remaining(now)))
    return f"Your {timer_label(timer)} went off {ago} ago while I was offline."


class LocalCommands:
    """Answers the commands `elara.skills.intents` recognises, or None (the model answers)."""

    def __init__(self, book: TimerBook, *, max_seconds: float, announcer: Announcer | None = None,
                 notify: Callable[[], None] | None = None,
                 clock: Callable[[], datetime] = utc_now, local_zone: tzinfo | None = None,
                 monotonic: Callable[[], float] = time.monotonic, room: str | None = None) -> None:
        self.book = book
        self.room = room  # timers set here ring in this satellite's room
        self.max_seconds = max_seconds
        self.announcer = announcer
        #: told after a timer changed in this process (`elara ask` tells the running daemon)
        self.notify = notify
        self._clock = clock
        self._zone = local_zone
        self._monotonic = monotonic
        self._asked: tuple[float, tuple[str, ...]] | None = None  # "which one?": until, timer ids

    def answer(self, text: str) -> LocalReply | None:
        """The reply to `text` if it is a local command, else None. Changes nothing by itself."""
        intent = i.match(text)
        if self._asked is not None and (intent is not None or self._monotonic() >= self._asked[0]):
            self._asked = None  # moved on, or too late for an answer
        if intent is None:
            # Kept until it times out: a speculative transcript may be dropped and asked again.
            return None if self._asked is None else self._which_answered(text, self._asked[1])
        if isinstance(intent, i.SetTimer):
            return self._set(intent)
        if isinstance(intent, i.TimerLeft):
            return self._left(intent)
        if isinstance(intent, i.ListTimers):
            return LocalReply("list_timers", self._listing())
        if isinstance(intent, i.CancelTimer):
            return self._cancel(intent)
        if isinstance(intent, i.TellTime):
            now = self.local_now()
            return LocalReply("tell_time", f"It's {spoken.say_clock(now)}.")
        if isinstance(intent, i.TellDate):
            now = self.local_now()
            if intent.weekday_only:
                return LocalReply("tell_date", f"It's {spoken.say_date(now.date(), year=False)}.")
            return LocalReply("tell_date", f"Today is {spoken.say_date(now.date(), year=True)}.")
        if isinstance(intent, i.Stop):
            return LocalReply("stop", "", act=self._stop_ringing, store=False)
        if isinstance(intent, i.Calculate | i.Convert | i.WhichDay | i.DaysUntil):
            return self.computed(intent)
        return None

    def computed(self, intent: i.Calculate | i.Convert | i.WhichDay | i.DaysUntil) -> LocalReply:
        """A computed answer; the calendar's from today in the local zone."""
        if isinstance(intent, i.Calculate):
            return LocalReply("calculate", arithmetic.answer(intent))
        if isinstance(intent, i.Convert):
            return LocalReply("convert", conversions.answer(intent))
        name = "days_until" if isinstance(intent, i.DaysUntil) else "which_day"
        return LocalReply(name, dates.answer(intent, self.local_now().date()))

    # -- timers ---------------------------------------------------------------------------------

    def _set(self, intent: i.SetTimer) -> LocalReply:
        if intent.seconds <= 0:
            return LocalReply("set_timer", "A timer needs at least one second. How long should it run?")
        if intent.seconds > self.max_seconds:
            limit = spoken.say_duration(int(self.max_seconds))
            return LocalReply("set_timer", f"I can set timers for up to {limit}.")
        what = f"{intent.name.capitalize()} timer" if intent.name else "Timer"
        reply = f"{what} set for {spoken.say_duration(intent.seconds)}."

        async def start() -> None:
            await asyncio.to_thread(self.book.start, intent.seconds, intent.name, self.room)
            self.changed()

        return LocalReply("set_timer", reply, act=start)

    def _left(self, intent: i.TimerLeft) -> LocalReply:
        timers = self._named(intent.name)
        if not timers:
            return LocalReply("timer_left", self._none(intent.name))
        now = self._clock()
        parts = [self._left_of(t, now) for t in timers]
        # One short sentence per timer: the first is spoken while the next is synthesized.
        return LocalReply("timer_left", " ".join(_sentence(part) for part in parts))

    def _left_of(self, timer: Timer, now: datetime) -> str:
        if timer.state == RINGING or timer.remaining(now) <= 0:
            return f"your {timer_label(timer)} is ringing"
        return f"your {timer_label(timer)} has {spoken.say_remaining(timer.remaining(now))} left"

    def _listing(self) -> str:
        timers = self.book.active()
        if not timers:
            return "You have no timers."
        now = self._clock()
        count = "one timer" if len(timers) == 1 else f"{spoken.number_words(len(timers))} timers"
        return " ".join([f"You have {count}.", *(_sentence(self._left_of(t, now)) for t in timers)])

    def _cancel(self, intent: i.CancelTimer) -> LocalReply:
        active = self.book.active()
        if intent.everything:
            if not active:
                return LocalReply("cancel_timer", "You have no timers.")
            count = "Your timer is" if len(active) == 1 else \
                f"All {spoken.number_words(len(active))} timers are"
            return LocalReply("cancel_timer", f"{count} cancelled.", act=self.cancelling(active))
        timers = self._named(intent.name)
        if not timers:
            return LocalReply("cancel_timer", self._none(intent.name))
        ringing = [t for t in timers if t.state == RINGING or t.remaining(self._clock()) <= 0]
        if intent.name is None and ringing:
            # "Stop the timer" while one rings means that one, however many others count down.
            return LocalReply("stop", "", act=self.cancelling(ringing), store=False)
        if len(timers) > 1:
            self._asked = (self._monotonic() + ASK_BACK_SECONDS, tuple(t.id for t in timers))
            names = spoken.say_list([_short(t) for t in timers])
            return LocalReply("cancel_timer", f"You have {spoken.number_words(len(timers))} timers: "
                              f"{names}. Which one?", expects_answer=True)
        return LocalReply("cancel_timer", f"{_capital(timer_label(timers[0]))} cancelled.",
                          act=self.cancelling(timers))

    def _which_answered(self, text: str, ids: tuple[str, ...]) -> LocalReply | None:
        timers = [t for t in self.book.active() if t.id in ids]
        if not timers:
            return None
        if _ALL.search(text.lower()):
            return self._cancel(i.CancelTimer(None, everything=True))
        named = {t.name: t for t in timers if t.name}
        chosen = i.names_timer(text, list(named))
        timer = named.get(chosen) if chosen is not None else None
        if timer is None:
            # "the ten minute one": an unnamed timer is known by its length
            seconds = i.parse_duration(_FILLER.sub(" ", text.lower()))
            by_length = [t for t in timers if t.seconds == seconds]
            timer = by_length[0] if len(by_length) == 1 else None
        if timer is None:
            return None  # not an answer after all: the model has it
        return LocalReply("cancel_timer", f"{_capital(timer_label(timer))} cancelled.",
                          act=self.cancelling([timer]))

    def cancelling(self, timers: list[Timer]) -> Callable[[], Awaitable[None]]:
        """What cancelling these timers takes (their ring stops too)."""
        async def cancel() -> None:
            for timer in timers:
                await asyncio.to_thread(self.book.set_state, timer.id, CANCELLED)
                if self.announcer is not None:
                    self.announcer.stop(timer.id)
            self.changed()

        return cancel

    async def _stop_ringing(self) -> None:
        if self.announcer is not None:
            self.announcer.stop()

    def _named(self, name: str | None) -> list[Timer]:
        active = self.book.active()
        if name is None:
            return active
        wanted = name.lower()
        return [t for t in active if (t.name or "").lower() == wanted]

    def _none(self, name: str | None) -> str:
        return f"You have no {name} timer." if name else "You have no timers."

    def changed(self) -> None:
        """Tell whoever watches that a timer changed in this process."""
        if self.notify is not None:
            self.notify()

    def local_now(self) -> datetime:
        """Now in the local zone."""
        now = self._clock()
        return now.astimezone(self._zone) if self._zone is not None else now.astimezone()


class Alarms:
    """A due timer rings through the announcer; an announcement heard is stored; a timer's record
    follows what became of its ring. The writes run in worker threads, in the order asked for."""

    def __init__(self, book: TimerBook, announcer: Announcer, store: MessageStore,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.book = book
        self.announcer = announcer
        self.store = store
        self._clock = clock
        self._writes: asyncio.Task[None] | None = None
        announcer.on_heard = self.heard
        announcer.on_over = self.over
        self.rooms: dict[str, Announcer] = {}  # a satellite's room → what is announced there

    def add_room(self, name: str, announcer: Announcer) -> None:
        """Timers set in this satellite's room ring there, through `announcer`."""
        announcer.on_heard = self.heard
        announcer.on_over = self.over
        self.rooms[name] = announcer

    def _announcer(self, timer: Timer) -> Announcer:
        """Where a timer rings: the room it was set in, or Elara's own speaker."""
        return self.rooms.get(timer.room, self.announcer) if timer.room else self.announcer

    def due(self, due: DueTimer) -> None:
        """The timekeeper's callback: ring (or, missed while down, say so once)."""
        timer = due.timer
        if due.missed:
            log.info("timer %s came due while Elara was not running", timer.id)
            self._announcer(timer).post(Announcement(missed_text(timer, self._clock()), TIMER_MISSED,
                                                     timer_id=timer.id))
        else:
            log.info("timer %s is due", timer.id)
            self._announcer(timer).post(Announcement(done_text(timer), TIMER_DONE, rings=True,
                                                     timer_id=timer.id))

    def heard(self, announcement: Announcement) -> None:
        """The announcer's `on_heard`: store the announcement; a ringing timer's record says so."""
        if not announcement.stored:
            return
        record = announcement_record(announcement, self._clock())
        self._chain(self._append(record))
        if announcement.timer_id is not None and announcement.rings:
            self._chain(self._set_state(announcement.timer_id, RINGING))

    def over(self, announcement: Announcement, reason: str) -> None:
        """The announcer's `on_over`: the timer is done (unless cancelled meanwhile)."""
        if announcement.timer_id is not None:
            self._chain(self._set_state(announcement.timer_id, DONE))

    async def settle(self) -> None:
        """Wait for the record writes asked for so far."""
        if self._writes is not None:
            await asyncio.gather(self._writes, return_exceptions=True)

    def _chain(self, work: Coroutine[Any, Any, None]) -> None:
        previous = self._writes

        async def write() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            await work

        self._writes = asyncio.get_running_loop().create_task(write(), name="announcement-record")

    async def _append(self, record: ChatMessage) -> None:
        try:
            await asyncio.to_thread(self.store.append, record)
        except (StoreError, OSError) as exc:
            log.error("could not store an announcement: %s", exc)

    async def _set_state(self, timer_id: str, state: str) -> None:
        timer = self.book.get(timer_id)
        if timer is None or not timer.active:
            return  # cancelled meanwhile: that is its last word
        try:
            await asyncio.to_thread(self.book.set_state, timer_id, state)
        except StoreError as exc:
            log.error("could not record timer %s as %s: %s", timer_id, state, exc)


def _short(timer: Timer) -> str:
    return timer.reminder or timer.name or spoken.say_duration(timer.seconds)


def _imperative(text: str) -> bool:
    """Whether a reminder's text reads after "to" ("call mum"), not as a note ("the bins")."""
    first = text.split(maxsplit=1)[0].lower() if text.split() else ""
    return first not in ("the", "a", "an", "my", "your", "that", "about")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _sentence(text: str) -> str:
    return _capital(text) + "."
