"""The wake listener: frames to the wake word while she is idle, or over her voice with barge-in;
a wake heard over her voice counts only if her own voice could not explain it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from elara.audio.frames import AudioFrame
from elara.voice import dialogue as d
from elara.voice.barge_in import (
    HEARD_TOGETHER_SECONDS,
    PLAYED_WORDS_SECONDS,
    SHE_SAID_IT,
    WAKE_WINDOW_FRAMES,
    playback_explains,
)
from elara.voice.echo import EchoFilter
from elara.voice.parts import LoopCounters, VoiceParts

log = logging.getLogger(__name__)

#: the states a wake word counts in: idle, or over her voice (a barge-in)
WAKEABLE = (d.IDLE, d.SPEAKING, d.ANNOUNCING)
#: the two ears that hear the wake phrase over her (`barge_in`)
ENGINE, READER = "the wake word's engine", "the \"stop\" reader"


class WakeListener:
    """Scores frames for the wake word and tells the loop when the person called her."""

    def __init__(self, *, counters: LoopCounters, state: Callable[[], str],
                 on_wake: Callable[[str, float, str], None]) -> None:
        self._counters = counters
        self._state = state
        self._on_wake = on_wake
        # Set by a wake: the wake word's engine forgets what it heard before the next frame it
        # scores (here, not at the wake: it may be scoring a frame in its thread right then).
        self._woke = False
        #: per ear, the wake word it last heard over her voice and when (captured)
        self._heard: dict[str, tuple[str, float]] = {}

    def wake_counted(self) -> None:
        """A wake counted (heard here or read by the stop listener): start afresh next frame."""
        self._woke = True

    def rearm(self) -> None:
        """The dialogue waits for the wake word anew: start afresh next frame."""
        self._woke = True

    async def feed(self, frame: AudioFrame, parts: VoiceParts, speaking_until: float) -> None:
        """Score one frame; a wake that counts goes to `on_wake`."""
        echo, state = parts.echo, self._state()
        if state == d.IDLE and echo is None and frame.captured_at < speaking_until:
            return  # Elara's own voice (and its echo) must never wake her
        if self._woke:
            self._woke = False
            parts.wake.reset()  # else the phrase, still in its window, would wake her again
        parts.wake.during_playback = state != d.IDLE
        detection = await asyncio.to_thread(parts.wake.process, frame)
        if detection is None:
            return
        state = self._state()
        if state not in WAKEABLE:
            # Woken while the model scored this frame: the "stop" reader heard the phrase over her.
            parts.wake.reset()
            return
        how = f"score {detection.score:.2f}"
        if state != d.IDLE and echo is not None:
            near, far = echo.recent_levels(WAKE_WINDOW_FRAMES)
            played = parts.speech.recent_text(PLAYED_WORDS_SECONDS)
            counted = self._counters.wakes
            hers = await asyncio.to_thread(echo.could_be_her, WAKE_WINDOW_FRAMES)
            if self._counters.wakes != counted or self._state() not in WAKEABLE:
                # Counted meanwhile (the "stop" reader read the same words over her as the wake
                # phrase: a second count would begin a second turn over the first), or the person
                # is listened to already (they went on over her reply).
                return
            if self.explained(detection.name, near, far, played, echo, hers, at=detection.at, ear=ENGINE):
                parts.wake.reset()
                return
            how += (f", over her voice: {near:.0f} vs {far:.0f} RMS, ERLE {echo.trusted_erle_db:.1f} dB" if hers
                    else ", over her voice: the microphone can't have heard her")
        self._on_wake(detection.name, detection.at, how)

    def explained(self, name: str, near: float, far: float, played_words: str, echo: EchoFilter | None,
                  could_be_her: bool = True, *, at: float, ear: str) -> bool:
        """Could her own voice explain wake word `name` heard over her by `ear` (`ENGINE` or
        `READER`) at `at` (counted and logged if so)? `could_be_her`: whether the microphone may
        have heard her voice then at all. Not if the other ear heard it too (`barge_in`)."""
        why = playback_explains(name, near, far, played_words, echo, could_be_her)
        other_ear = READER if ear == ENGINE else ENGINE
        other = self._heard.get(other_ear)
        self._heard[ear] = (name, at)
        if why is None:
            return False
        if why != SHE_SAID_IT and other is not None and other[0] == name \
                and abs(other[1] - at) <= HEARD_TOGETHER_SECONDS:
            log.info("a wake word over her voice as loud as hers could be (%s) is the person's: %s heard it "
                     "too, in words she did not say", why, other_ear)
            return False
        self._counters.self_wakes_suppressed += 1
        log.info("ignored a wake word while speaking: her own voice could explain it (%s)", why)
        return True
