"""Announcements: what Elara says without being asked (a timer ringing, the model being back).

An announcement waits for a quiet moment: the voice loop takes the next one only while the
dialogue is idle, so it never talks over the user or a reply. A ringing timer's announcement
repeats every few seconds from the end of the last time it was heard, until it is stopped or has
rung for `Timers.RingSeconds`. One that could not be played (the speaker is missing) is tried
again every few seconds until it is heard: a ringing timer can't be lost.

Each announcement is stored once, when first heard, as a System-role record of kind
`announcement` whose content is the text and whose metadata says why (`why`) and, for a timer,
which one (`timer`). The `Announcer` itself is pure bookkeeping on a monotonic clock; what to do
when an announcement is first heard or is over is handed in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from elara.audio.frames import AudioClip
from elara.conversation.messages import ChatMessage
from elara.conversation.records import memory_record

log = logging.getLogger(__name__)

ANNOUNCEMENT = "announcement"
#: why an announcement is made (its record's `why`)
TIMER_DONE, TIMER_MISSED, MODEL_BACK, STARTUP = "timer", "timer_missed", "model_back", "startup"
#: a spoken apology for a turn that failed before it reached the orchestrator (never stored)
APOLOGY = "apology"
#: seconds from the end of one ring to the next
RING_GAP_SECONDS = 3.0
#: seconds before an announcement the speaker could not play is tried again
RETRY_SECONDS = 5.0


@dataclass(frozen=True)
class Announcement:
    """Something to say unasked, and whether it rings (repeats until stopped)."""

    text: str
    why: str
    chime: bool = True
    rings: bool = False
    timer_id: str | None = None
    stored: bool = True  # False: said, but kept out of the history (an apology)


@dataclass
class _Queued:
    announcement: Announcement
    not_before: float = 0.0
    first_heard: float | None = None
    failures: int = 0


@dataclass
class AnnouncerCounters:
    """What the announcer has done since start (for `elara status`)."""

    announced: int = 0
    stopped: int = 0
    rang_out: int = 0
    playback_failures: int = 0


class Announcer:
    """The announcements waiting to be heard, in order; a ringing one stays until it is over.

    `on_heard(a)` is called the first time `a` was heard; `on_over(a, reason)` when a ringing
    announcement ends ("stopped", "rang out", "dropped") or a plain one has been said ("said")."""

    def __init__(self, *, on_heard: Callable[[Announcement], None] | None = None,
                 on_over: Callable[[Announcement, str], None] | None = None,
                 ring_gap: float = RING_GAP_SECONDS, retry_after: float = RETRY_SECONDS) -> None:
        self.on_heard = on_heard or (lambda a: None)
        self.on_over = on_over or (lambda a, reason: None)
        self.ring_gap = ring_gap
        self.retry_after = retry_after
        self.counters = AnnouncerCounters()
        self._queue: list[_Queued] = []

    def post(self, announcement: Announcement) -> None:
        """Queue an announcement for the next quiet moment."""
        log.info("announcement queued (%s)", announcement.why)
        self._queue.append(_Queued(announcement))

    def next(self, now: float) -> Announcement | None:
        """The announcement to play now, if one is waiting and its time has come."""
        for queued in self._queue:
            if queued.not_before <= now:
                return queued.announcement
        return None

    @property
    def pending(self) -> bool:
        """True while anything waits to be said (now or later)."""
        return bool(self._queue)

    @property
    def ringing(self) -> list[Announcement]:
        """The ringing announcements still going."""
        return [q.announcement for q in self._queue if q.announcement.rings]

    def played(self, announcement: Announcement, now: float, ring_seconds: float) -> None:
        """`announcement` was heard to its end at `now`: schedule its next ring, or let it go."""
        queued = self._find(announcement)
        if queued is None:
            return  # stopped while it played
        if queued.first_heard is None:
            queued.first_heard = now
            self.counters.announced += 1
            self.on_heard(announcement)
        if announcement.rings and now + self.ring_gap - queued.first_heard < ring_seconds:
            queued.not_before = now + self.ring_gap
            return
        self._queue.remove(queued)
        if announcement.rings:
            self.counters.rang_out += 1
            log.info("the %s announcement rang for %.0f s and stopped", announcement.why,
                     now - queued.first_heard)
        self.on_over(announcement, "rang out" if announcement.rings else "said")

    def failed(self, announcement: Announcement, now: float, error: object) -> None:
        """`announcement` could not be played: try again in `retry_after` seconds."""
        queued = self._find(announcement)
        if queued is None:
            return
        self.counters.playback_failures += 1
        queued.failures += 1
        if queued.failures == 1:
            log.error("could not play the %s announcement (tried again every %.0f s until the "
                      "speaker works): %s", announcement.why, self.retry_after, error)
        queued.not_before = now + self.retry_after

    def stop(self, timer_id: str | None = None) -> list[Announcement]:
        """End every ringing announcement (or only `timer_id`'s); returns those ended."""
        ended = [q for q in self._queue if q.announcement.rings
                 and (timer_id is None or q.announcement.timer_id == timer_id)]
        for queued in ended:
            self._queue.remove(queued)
            self.counters.stopped += 1
            self.on_over(queued.announcement, "stopped")
        if ended:
            log.info("stopped %d ringing announcement%s", len(ended), "" if len(ended) == 1 else "s")
        return [q.announcement for q in ended]

    def drop(self, keep: Callable[[Announcement], bool]) -> None:
        """Forget the announcements `keep` rejects (their timer was cancelled elsewhere)."""
        for queued in [q for q in self._queue if not keep(q.announcement)]:
            self._queue.remove(queued)
            self.on_over(queued.announcement, "dropped")

    def status(self) -> dict[str, object]:
        """The announcer's part of `elara status`."""
        return {"waiting": len(self._queue), "ringing": len(self.ringing),
                "announced": self.counters.announced, "stopped": self.counters.stopped,
                "rang_out": self.counters.rang_out,
                "playback_failures": self.counters.playback_failures}

    def _find(self, announcement: Announcement) -> _Queued | None:
        return next((q for q in self._queue if q.announcement is announcement), None)


def announcement_record(announcement: Announcement, when: datetime) -> ChatMessage:
    """The store record of an announcement heard at `when`."""
    extra = {"timer": announcement.timer_id} if announcement.timer_id else {}
    return memory_record(ANNOUNCEMENT, announcement.text, when, why=announcement.why, **extra)


def chime(sample_rate: int, volume: float = 0.35) -> AudioClip:
    """A short two-note chime (E6 then A6, each ringing out), generated: no file to ship."""
    notes = ((1318.5, 0.0), (1760.0, 0.16))
    length = 0.75
    t = np.arange(int(length * sample_rate)) / sample_rate
    wave = np.zeros_like(t)
    for frequency, start in notes:
        local = t - start
        on = local >= 0
        envelope = np.where(on, np.exp(-np.clip(local, 0, None) * 6.0), 0.0)
        # A few milliseconds of attack: a note that starts at full volume clicks.
        envelope *= np.clip(local / 0.005, 0.0, 1.0)
        # The octave above, quieter, makes it a bell rather than a beep.
        wave += envelope * (np.sin(2 * np.pi * frequency * local) + 0.3 * np.sin(4 * np.pi * frequency * local))
    wave *= volume / max(float(np.abs(wave).max()), 1e-9)
    return AudioClip(np.rint(wave * 32767).astype(np.int16), sample_rate)


class ModelWatch:
    """Tells the user when the language model answers again after a turn it failed.

    A turn observer (it sees which turns failed) with a loop that, while the model is down, checks
    it every `interval` seconds; a later turn that succeeds clears it without a word (the user
    heard the answer)."""

    def __init__(self, announcer: Announcer, check: Callable[[], Awaitable[object]], *,
                 interval: float = 15.0) -> None:
        self.announcer = announcer
        #: asks the model in use whether it answers (replaced when a reload changes the model)
        self.check = check
        self.interval = interval
        self.down = False
        self._changed = asyncio.Event()

    def turn_started(self) -> None:
        """Nothing to do when a turn starts."""

    def turn_finished(self, user: ChatMessage, reply: ChatMessage | None) -> None:
        """A failed turn (no reply) means the model is down; an answered one, that it is up."""
        self.down = reply is None
        self._changed.set()

    def turn_abandoned(self) -> None:
        """A cut-off turn says nothing about the model."""

    async def run(self) -> None:
        """Check the model while it is down (runs until cancelled)."""
        while True:
            if not self.down:
                self._changed.clear()
                await self._changed.wait()
                continue
            await asyncio.sleep(self.interval)
            if not self.down:
                continue
            try:
                await self.check()
            except Exception as exc:  # still down: LanguageModelError, a timeout, a refused connection
                log.debug("the language model is still down: %s", exc)
                continue
            if self.down:
                self.down = False
                log.info("the language model answers again")
                self.announcer.post(Announcement("I can reach my language model again.", MODEL_BACK))
