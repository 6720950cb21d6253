"""The stop listener: "stop" heard without the wake word while she speaks or a timer rings.

The loop hands it every frame and says whether "stop" is listened for now. Short utterances over
her voice (`StopSpotter`) are read one at a time; she falls silent while one is read, as a person
interrupted does. A "stop" silences her; the wake phrase read alone wakes her; anything else, and
she goes on where she paused. What the listener decides goes back to the loop through
`on_stop` and `on_wake`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from elara.audio.frames import FRAME_SECONDS, AudioFrame
from elara.voice import dialogue as d
from elara.voice.barge_in import PLAYED_WORDS_SECONDS, WAKE_WINDOW_FRAMES
from elara.voice.echo import SPEECH_OVER_PLAYBACK_MARGIN_DB, is_barge_in
from elara.voice.parts import LoopCounters, VoiceParts
from elara.voice.stop import StopCandidate, StopSpotter, heard_stop
from elara.voice.wake_phrase import said_wake_phrase, strip_wake_phrase

log = logging.getLogger(__name__)

#: the audio kept while listening: the longest candidate, its joined gaps and a lead
KEPT_FRAMES = 40
#: frames before a candidate's first speech given to Whisper with it
LEAD_FRAMES = 3


@dataclass(frozen=True)
class OverPlayback:
    """A candidate's audio and what was playing as it was said."""

    samples: np.ndarray
    near: float  # the cleaned microphone's level over the candidate
    far: float  # what she played meanwhile
    played_words: str  # what she was heard saying just before
    at: float  # when the candidate ended
    began: float  # when the audio read began (a little before the candidate's first speech)
    could_be_her: bool  # whether the microphone may have heard her voice over it at all


class StopListener:
    """Finds short utterances over her voice and reads them for "stop", one check at a time."""

    def __init__(self, *, counters: LoopCounters, parts: Callable[[], VoiceParts], state: Callable[[], str],
                 ringing: Callable[[], bool], explained: Callable[[str, float, float, str, float], bool],
                 on_stop: Callable[[], None], on_wake: Callable[[str, float, str, float | None], None]) -> None:
        self._counters = counters
        self._parts = parts  # the parts in use now (a reload may swap them while a check runs)
        self._state = state
        self._ringing = ringing
        self._explained = explained  # could her own voice explain the wake word heard over it?
        self._on_stop = on_stop
        self._on_wake = on_wake
        self._spotter = StopSpotter()
        self._spotting = False
        self._frames: collections.deque[AudioFrame] = collections.deque(maxlen=KEPT_FRAMES)
        self._fed = 0  # frames fed to the spotter since it was reset
        self._epoch = 0  # bumped whenever listening starts or ends: older checks are moot
        self.check: asyncio.Task[None] | None = None
        self._next: tuple[StopCandidate, int] | None = None  # a candidate waiting its turn

    @property
    def settled(self) -> bool:
        """True when no check is under way."""
        return self.check is None or self.check.done()

    def forget(self) -> None:
        """What is being read, or waits to be, no longer matters (she was silenced)."""
        self._epoch += 1
        self._next = None

    async def feed(self, frame: AudioFrame, parts: VoiceParts, wanted: bool) -> None:
        """One frame; `wanted`: "stop" is listened for now."""
        if not wanted:
            if self._spotting:
                self._spotting, self._next = False, None
                self._epoch += 1
            return
        if not self._spotting:
            self._spotting = True
            self._epoch += 1
            self._spotter.reset()
            parts.vad.reset()
            self._frames.clear()
            self._fed = 0
        probability = await asyncio.to_thread(parts.vad.speech_probability, frame)
        self._frames.append(frame)
        self._fed += 1
        is_speech = probability >= parts.vad_threshold
        if is_speech and parts.echo is not None:
            # Speech over her voice is speech louder than what cancelling leaves of her voice, or
            # speech in a microphone that can't have heard her voice (a headset).
            near, far = parts.echo.recent_levels(1)
            is_speech = (is_barge_in(near, far, parts.echo.trusted_erle_db, SPEECH_OVER_PLAYBACK_MARGIN_DB)
                         or not await asyncio.to_thread(parts.echo.could_be_her, WAKE_WINDOW_FRAMES))
        candidate = self._spotter.feed(frame.duration, is_speech)
        if candidate is None:
            return
        if self.check is not None and not self.check.done():
            self._next = (candidate, self._epoch)  # checked when this one is done
            return
        self._check_soon(candidate, parts)

    async def stop(self) -> None:
        """Cancel the check in flight (shutdown)."""
        if self.check is not None:
            self.check.cancel()
            await asyncio.gather(self.check, return_exceptions=True)

    def _check_soon(self, candidate: StopCandidate, parts: VoiceParts) -> None:
        heard = self._over_playback(candidate, parts)
        self._counters.stop_checks += 1
        # She falls silent while the words are checked, as a person interrupted does: a "stop"
        # is then obeyed at once, and anything else costs her a pause of a fifth of a second.
        paused = self._state() in (d.SPEAKING, d.ANNOUNCING)
        if paused:
            parts.speech.pause()
        self.check = asyncio.create_task(self._check(heard, self._epoch, parts, paused), name="stop-check")

    def _over_playback(self, candidate: StopCandidate, parts: VoiceParts) -> OverPlayback:
        """The candidate's words, with a little before them (Whisper needs the onset) and the
        silent frame, and what was playing then."""
        first = max(0, int(candidate.start / FRAME_SECONDS) - LEAD_FRAMES)
        last = self._fed
        skipped = self._fed - len(self._frames)
        frames = list(self._frames)[max(0, first - skipped):last - skipped]
        spoken = last - int(candidate.start / FRAME_SECONDS)
        near, far = parts.echo.recent_levels(spoken) if parts.echo is not None else (0.0, 0.0)
        hers = parts.echo is not None and parts.echo.could_be_her(spoken + LEAD_FRAMES)
        return OverPlayback(np.concatenate([f.samples for f in frames]), near, far,
                            parts.speech.recent_text(PLAYED_WORDS_SECONDS), self._frames[-1].captured_at,
                            frames[0].captured_at - frames[0].duration, hers)

    async def _check(self, heard: OverPlayback, epoch: int, parts: VoiceParts, paused: bool) -> None:
        asked: str | None = None
        try:
            asked = await self._read(heard, epoch, parts)
        finally:
            if paused and asked is None:
                parts.speech.resume()
        if asked == _STOP:
            self._on_stop()
            return
        if asked is not None:
            # The wake phrase alone, read as it came: she is silent already, so listen now
            # rather than let her go on until the wake word's own check is done. What was read
            # goes into the pre-roll: the reader may have cut the phrase short of its tail.
            self._on_wake(asked, heard.at, "read alone over her by the \"stop\" reader", heard.began)
            return
        waiting, self._next = self._next, None
        if waiting is not None and waiting[1] == self._epoch:
            self._check_soon(waiting[0], self._parts())

    async def _read(self, heard: OverPlayback, epoch: int, parts: VoiceParts) -> str | None:
        """What the words over her voice ask, still when the check is done: `_STOP`, the name of
        the wake word said alone (while she speaks, with barge-in on), or None."""
        try:
            transcript = await asyncio.to_thread((parts.stop_reader or parts.transcriber).transcribe,
                                                 heard.samples)
        except Exception as exc:  # a failed check must not end anything: she goes on
            log.warning("could not check for \"stop\": %s", exc)
            return None
        if epoch != self._epoch:
            return None  # she fell silent, or a turn began, while Whisper worked
        log.debug("heard over her voice: %r (no speech %.2f)", transcript.text, transcript.no_speech_prob)
        if parts.phantom_reason(transcript) is not None:
            return None
        text = strip_wake_phrase(transcript.text, parts.wake_phrases)
        if heard_stop(text, heard.played_words, ringing=self._ringing()):
            if heard.could_be_her and parts.echo is not None \
                    and not is_barge_in(heard.near, heard.far, parts.echo.trusted_erle_db):
                self._counters.self_stops_suppressed += 1
                log.info("ignored a \"stop\": her own voice could explain it (%.0f vs %.0f RMS)",
                         heard.near, heard.far)
                return None
            return _STOP
        phrase = said_wake_phrase(transcript.text, parts.wake_phrases)
        if phrase is None or not parts.dialogue.barge_in or self._state() not in (d.SPEAKING, d.ANNOUNCING):
            return None
        name = phrase.replace(" ", "_")
        if heard.could_be_her and self._explained(name, heard.near, heard.far, heard.played_words, heard.at):
            return None
        return name


#: what `_read` returns for "stop" (a wake word's name has no spaces)
_STOP = "stop said"
