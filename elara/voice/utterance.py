"""The audio of the person's words: the pre-roll kept while nobody is listened to, every frame from
listening on, the segmenter fed with it, and the spans Whisper reads cut out of it."""

from __future__ import annotations

import asyncio
import collections

import numpy as np

from elara.audio.frames import FRAME_SAMPLES, FRAME_SECONDS, SAMPLE_RATE, AudioFrame
from elara.voice.endpoint import SegmentEvent, UtteranceEnded
from elara.voice.going_on import shorten_pause
from elara.voice.parts import VoiceParts

#: the most audio from before listening began that a wake read late (by the "stop" reader) keeps:
#: its whole wake phrase, and what was said while it was read
WAKE_READ_KEPT_SECONDS = 4.0


class Utterance:
    """The turn's audio so far, on the segmenter's time line."""

    def __init__(self, pre_roll_ms: int) -> None:
        self._kept: collections.deque[AudioFrame] = collections.deque()
        self.resize(pre_roll_ms)
        self.frames: list[AudioFrame] = []
        self._origin = 0  # pre-roll frames in front of the segmenter's time 0
        #: when the person last spoke (the end of their words, when the turn ends)
        self.last_speech_at: float | None = None
        #: the words the segmenter found, once it found their end
        self.ended: UtteranceEnded | None = None

    def keep(self, frame: AudioFrame) -> None:
        """Keep `frame` for the pre-roll (every frame passes through it)."""
        self._kept.append(frame)

    def resize(self, pre_roll_ms: int) -> None:
        """Keep `pre_roll_ms` of pre-roll from now on (new settings)."""
        self._pre_roll_frames = _frames(pre_roll_ms)
        self._kept = collections.deque(self._kept, maxlen=_kept_frames(pre_roll_ms))

    def begin(self, *, follow_up: bool, said_from: float | None = None) -> None:
        """Listening begins: after a wake word, with the pre-roll (the phrase's tail may hold the
        first words), reaching back to `said_from` for a wake read once the phrase was over (the
        transcript then holds the phrase whole, however the reader cut it, and the words said while
        it was read); for a follow-up, with nothing before it."""
        kept = list(self._kept)
        count = self._pre_roll_frames
        if said_from is not None:
            count = max(count, sum(1 for frame in kept if frame.captured_at > said_from))
        self.frames = [] if follow_up else kept[-count:]
        self._origin = len(self.frames)
        self.ended = None

    def resume(self, resumed: int) -> list[AudioFrame]:
        """The same turn goes on: its words so far, the pause (shortened) and the `resumed` frames
        of speech that went on are one utterance; returns those frames, which the segmenter is to
        hear again."""
        words_so_far, self.ended = self.ended, None
        if words_so_far is not None:
            self.frames = shorten_pause(self.frames, self._origin, words_so_far.end, resumed)
        self._origin = len(self.frames) - resumed
        return self.frames[self._origin:]

    async def hear(self, frame: AudioFrame, parts: VoiceParts, speaking_until: float) -> list[SegmentEvent]:
        """Add one frame while listening; what the segmenter makes of it."""
        probability = await asyncio.to_thread(parts.vad.speech_probability, frame)
        is_speech = probability >= parts.vad_threshold
        if is_speech and frame.captured_at < speaking_until:
            # Her voice or its tail may still be in the microphone: what cancelling leaves of her
            # last words is no follow-up. Speech there is the person's only standing above it.
            is_speech = parts.echo is not None and await asyncio.to_thread(
                parts.echo.person_over_playback, frame.captured_at)
        if is_speech:
            self.last_speech_at = frame.captured_at
        self.frames.append(frame)
        return parts.segmenter.feed(frame.duration, is_speech)

    def slice(self, start: float, end: float) -> np.ndarray:
        """The samples from `start` to `end`, seconds of the segmenter's time line."""
        audio = np.concatenate([f.samples for f in self.frames]) if self.frames else np.zeros(0, np.int16)
        origin = self._origin * FRAME_SAMPLES
        # Speech already going when listening began keeps the pre-roll too.
        first = 0 if start <= 0 else origin + round(start * SAMPLE_RATE)
        return audio[first:origin + round(end * SAMPLE_RATE)]


def _frames(pre_roll_ms: int) -> int:
    return max(1, round(pre_roll_ms / 1000 / FRAME_SECONDS))


def _kept_frames(pre_roll_ms: int) -> int:
    return max(_frames(pre_roll_ms), round(WAKE_READ_KEPT_SECONDS / FRAME_SECONDS))
