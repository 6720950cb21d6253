"""Announcement playback: what the announcer has due (a timer ringing, the model back), said at
an idle moment, through the loop's speech sink, one at a time."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

from elara.audio.frames import AudioClip
from elara.skills.announcements import Announcement, Announcer, chime
from elara.voice import dialogue as d
from elara.voice.parts import VoiceParts

log = logging.getLogger(__name__)


class AnnouncementPlayer:
    """Plays the announcer's next announcement when the loop is idle; owns its task."""

    def __init__(self, announcer: Announcer, *, clock: Callable[[], float],
                 handle: Callable[[d.DialogueEvent], None], playback_ends: Callable[[float], None]) -> None:
        self.announcer = announcer
        self._clock = clock
        self._handle = handle  # tells the dialogue an announcement started or finished
        self._playback_ends = playback_ends  # when her voice (and its tail) ends: the microphone may hear it until then
        self.task: asyncio.Task[None] | None = None

    @property
    def playing(self) -> bool:
        """True while an announcement is being said."""
        return self.task is not None and not self.task.done()

    def start_due(self, parts: VoiceParts) -> None:
        """Start the next announcement due, if any (the loop calls this only when idle)."""
        if self.playing:
            return
        announcement = self.announcer.next(self._clock())
        if announcement is not None:
            self.task = asyncio.create_task(self._say(announcement, parts), name="announcement")

    async def stop(self) -> None:
        """Cut the announcement playing (shutdown)."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def _say(self, announcement: Announcement, parts: VoiceParts) -> None:
        self._handle(d.AnnouncementStarted(at=self._clock()))
        speech = parts.speech
        speech.on_first_audio = None
        log.info("announcing (%s)", announcement.why)
        log.debug("announcement: %s", announcement.text)
        try:
            if announcement.chime:
                await speech.sound(_chime(speech.sample_rate))
            await speech.say(announcement.text)
            await speech.finish()
        except asyncio.CancelledError:
            await speech.stop()
            raise
        finally:
            self._playback_ends(self._clock() + parts.speaker_tail_ms / 1000)
        if speech.failure is not None:
            self.announcer.failed(announcement, self._clock(), speech.failure)
        else:
            log.info("announced (%s)", announcement.why)
            self.announcer.played(announcement, self._clock(), parts.ring_seconds)
        self._handle(d.AnnouncementFinished(at=self._clock()))


@functools.lru_cache(maxsize=4)
def _chime(sample_rate: int) -> AudioClip:
    return chime(sample_rate)
