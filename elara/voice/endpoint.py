"""Endpointing: find where an utterance starts and ends in a stream of speech / no-speech frames.

The `Segmenter` is pure: it sees only frame durations and the voice-activity verdict for each frame,
never audio, and its clock is the sum of the durations it was fed. Every time it reports is an
offset in seconds from the moment it was started (or last `reset()`), so the daemon can slice the
frame buffer it keeps for the same stretch of audio.

Rules (all lengths are audio time, summed from the frames):

- **Onset.** A run of speech begins at the start of its first speech frame. It only counts as an
  utterance once it holds `min_speech_ms` of speech frames in total (not necessarily contiguous:
  short voice-activity drop-outs inside a word don't reset the count). Then `SpeechStarted` is
  reported, with `at` = where the run began. A run that meets `end_silence_ms` of silence before
  reaching `min_speech_ms` (a cough, a click, one noisy frame) is dropped without any event, and the
  segmenter goes on waiting. With `min_speech_ms=0` the first speech frame counts.
- **Early end.** Once speech has started, when silence has lasted `early_start_ms` (and is still
  shorter than `end_silence_ms`), `EarlyEnd` is reported with the span the utterance would have if
  it ended now: the daemon may start transcribing it speculatively. If speech comes back before the
  end, `SpeechResumed` cancels that speculation (and a later silence reports a new `EarlyEnd`).
- **End.** `end_silence_ms` of silence after speech ends the utterance: `UtteranceEnded(reason=
  "silence")`. `max_utterance_seconds` after the start of speech it ends regardless:
  `UtteranceEnded(reason="max_length")`.
- **Span.** An utterance's span runs from `pre_roll_ms` before the start of speech (never before 0)
  to `tail` after the end of the last speech frame (never past the audio fed so far), where
  `tail = min(early_start_ms, end_silence_ms)`. So the span `EarlyEnd` reports is exactly the span
  `UtteranceEnded` reports when no speech came back in between: a speculative transcript of the
  early span *is* the final transcript.
- **No speech.** If no utterance has started `no_speech_timeout_seconds` after the segmenter
  started, `NoSpeech` is reported — unless a run of speech is still being weighed then; the
  segmenter then waits for that run to count (it becomes the utterance) or be dropped (`NoSpeech`
  at that moment).
- **Judged pauses.** With `max_pause_ms` set, a pause after speech lasts up to `max_pause_ms`
  unless `end_pause_after(ms)` shortens it; `end_pause_after(ms)` sets how much silence ends *this* pause (an
  end-of-turn judgment: short when the words so far are finished, long when they are not); it
  ends the utterance at once when the silence already reached it. Speech resuming restores
  the default. The span is unchanged by it, so a speculative transcript stays the final one.
- After `UtteranceEnded` or `NoSpeech` the segmenter is done: `feed()` returns no events (and its
  clock stops) until `reset()`.

Internally time is counted in whole microseconds, so 80 ms frames add up exactly (12 frames are
0.96 s, not 0.9600000000000001 s) and every threshold is met on the frame a person counting frames
would expect.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elara.settings import ListeningSettings, SpeechToTextSettings

log = logging.getLogger(__name__)

_US_PER_SECOND = 1_000_000
_US_PER_MS = 1_000

EndReason = Literal["silence", "max_length"]
#: `UtteranceEnded.reason` when `end_silence_ms` of silence followed the speech.
SILENCE: EndReason = "silence"
#: `UtteranceEnded.reason` when the utterance reached `max_utterance_seconds`.
MAX_LENGTH: EndReason = "max_length"


def _seconds(us: int) -> float:
    return us / _US_PER_SECOND


@dataclass(frozen=True)
class SegmentEvent:
    """Base of everything `Segmenter.feed` reports. Times are seconds since the segmenter started."""


@dataclass(frozen=True)
class SpeechStarted(SegmentEvent):
    """An utterance has begun: `min_speech_ms` of speech has been heard.

    `at` is where the speech began (the start of its first speech frame); `confirmed_at` is when
    it started to count (the end of the frame that reached `min_speech_ms`), i.e. now.
    """

    at: float
    confirmed_at: float


@dataclass(frozen=True)
class EarlyEnd(SegmentEvent):
    """Silence has lasted `early_start_ms` after speech: the utterance is probably over.

    `start`/`end` is the span the utterance will have if no more speech comes — the daemon may
    transcribe it speculatively now. `at` is now.
    """

    at: float
    start: float
    end: float


@dataclass(frozen=True)
class SpeechResumed(SegmentEvent):
    """Speech came back after an `EarlyEnd`: drop the speculative transcription. `at`: where."""

    at: float


@dataclass(frozen=True)
class UtteranceEnded(SegmentEvent):
    """The utterance is over. Slice `[start, end)` from the buffered audio and transcribe it.

    `reason` is "silence" or "max_length"; `at` is when the end was decided (now).
    """

    start: float
    end: float
    reason: EndReason
    at: float


@dataclass(frozen=True)
class NoSpeech(SegmentEvent):
    """Nobody spoke within `no_speech_timeout_seconds`: give up. `at` is now."""

    at: float


def _non_negative(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


class Segmenter:
    """Turns per-frame voice-activity verdicts into utterance boundaries (see the module docstring)."""

    def __init__(
        self,
        *,
        pre_roll_ms: float,
        end_silence_ms: float,
        min_speech_ms: float,
        max_utterance_seconds: float,
        no_speech_timeout_seconds: float,
        early_start_ms: float,
        max_pause_ms: float | None = None,
    ) -> None:
        for name, value in (
            ("pre_roll_ms", pre_roll_ms),
            ("end_silence_ms", end_silence_ms),
            ("min_speech_ms", min_speech_ms),
            ("max_utterance_seconds", max_utterance_seconds),
            ("no_speech_timeout_seconds", no_speech_timeout_seconds),
            ("early_start_ms", early_start_ms),
        ):
            _non_negative(name, value)
        if max_pause_ms is not None and max_pause_ms < end_silence_ms:
            raise ValueError(f"max_pause_ms {max_pause_ms!r} must be >= end_silence_ms {end_silence_ms!r}")
        for name, value in (
            ("end_silence_ms", end_silence_ms),
            ("max_utterance_seconds", max_utterance_seconds),
            ("no_speech_timeout_seconds", no_speech_timeout_seconds),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        self.pre_roll_ms = pre_roll_ms
        self.end_silence_ms = end_silence_ms
        self.min_speech_ms = min_speech_ms
        self.max_utterance_seconds = max_utterance_seconds
        self.no_speech_timeout_seconds = no_speech_timeout_seconds
        self.early_start_ms = early_start_ms
        self.max_pause_ms = max_pause_ms

        self._pre_roll = round(pre_roll_ms * _US_PER_MS)
        self._end_silence = round(end_silence_ms * _US_PER_MS)
        self._min_speech = round(min_speech_ms * _US_PER_MS)
        self._max_utterance = round(max_utterance_seconds * _US_PER_SECOND)
        self._no_speech_timeout = round(no_speech_timeout_seconds * _US_PER_SECOND)
        self._early_start = round(early_start_ms * _US_PER_MS)
        # Judged pauses wait for their judgment up to max_pause_ms; unjudged ones end_silence_ms.
        self._pause_wait = self._end_silence if max_pause_ms is None else round(max_pause_ms * _US_PER_MS)
        self._tail = min(self._early_start, self._end_silence)
        self.reset()

    @classmethod
    def from_settings(cls, listening: ListeningSettings, speech_to_text: SpeechToTextSettings) -> Segmenter:
        """A segmenter configured from the `Listening` and `SpeechToText` settings sections."""
        return cls(
            pre_roll_ms=listening.pre_roll_ms,
            end_silence_ms=listening.end_silence_ms,
            min_speech_ms=listening.min_speech_ms,
            max_utterance_seconds=listening.max_utterance_seconds,
            no_speech_timeout_seconds=listening.no_speech_timeout_seconds,
            early_start_ms=speech_to_text.early_start_ms,
            max_pause_ms=listening.max_pause_ms if listening.turn_judgment != "off" else None,
        )

    def reset(self) -> None:
        """Start over: clock at 0, no speech, not done."""
        self._elapsed = 0
        self._run_start: int | None = None  # start of the current run of speech (counted or not)
        self._run_speech = 0  # speech frames in that run
        self._last_speech_end = 0
        self._silence = 0  # silence since the last speech frame of the run
        self._started = False  # the run counts: SpeechStarted was reported
        self._early = False  # EarlyEnd reported and not yet resumed
        self._pause_limit: int | None = None  # this pause's judged end silence (None: the default)
        self._result: UtteranceEnded | NoSpeech | None = None

    # -- what the daemon may ask -------------------------------------------------------------

    @property
    def elapsed(self) -> float:
        """Seconds of audio fed since the start (or the last `reset()`)."""
        return _seconds(self._elapsed)

    @property
    def speech_started(self) -> bool:
        """True once an utterance has started (`SpeechStarted` was reported)."""
        return self._started

    @property
    def speech_start(self) -> float | None:
        """Where the current utterance's speech began, once it has started; else None."""
        return _seconds(self._run_start) if self._started and self._run_start is not None else None

    @property
    def awaiting_end(self) -> bool:
        """True between an `EarlyEnd` and the next `SpeechResumed` / `UtteranceEnded`."""
        return self._early and self._result is None

    @property
    def silence_ms(self) -> float:
        """Milliseconds of silence since the last speech frame (0 while speech goes on)."""
        return self._silence / _US_PER_MS

    def end_pause_after(self, ms: float) -> list[SegmentEvent]:
        """End the current pause after `ms` of silence instead of `end_silence_ms` (a judgment);
        returns `UtteranceEnded` when the silence already reached it. Ignored while not paused."""
        _non_negative("ms", ms)
        if not self._started or self._result is not None or self._silence == 0:
            return []
        self._pause_limit = round(ms * _US_PER_MS)
        if self._silence >= self._pause_limit:
            return [self._finish(SILENCE)]
        return []

    @property
    def done(self) -> bool:
        """True after `UtteranceEnded` or `NoSpeech`, until `reset()`."""
        return self._result is not None

    @property
    def result(self) -> UtteranceEnded | NoSpeech | None:
        """The event that finished the segmenter, or None while it is still running."""
        return self._result

    # -- feeding -----------------------------------------------------------------------------

    def feed(self, duration_s: float, is_speech: bool) -> list[SegmentEvent]:
        """Account for one frame of `duration_s` seconds, speech or not; return what it caused."""
        if not isinstance(duration_s, (int, float)) or not math.isfinite(duration_s) or duration_s <= 0:
            raise ValueError(f"duration_s must be a finite number > 0, got {duration_s!r}")
        if self._result is not None:
            return []
        duration = round(duration_s * _US_PER_SECOND)
        frame_start = self._elapsed
        self._elapsed += duration
        events: list[SegmentEvent] = []

        if is_speech:
            if self._run_start is None:
                self._run_start = frame_start
                self._run_speech = 0
            self._run_speech += duration
            self._last_speech_end = self._elapsed
            self._silence = 0
            self._pause_limit = None
            if self._early:
                self._early = False
                events.append(SpeechResumed(at=_seconds(frame_start)))
            if not self._started and self._run_speech >= self._min_speech:
                self._started = True
                events.append(SpeechStarted(at=_seconds(self._run_start), confirmed_at=_seconds(self._elapsed)))
        elif self._run_start is not None:
            self._silence += duration
            if self._started:
                limit = self._pause_wait if self._pause_limit is None else self._pause_limit
                if self._silence >= limit:
                    events.append(self._finish(SILENCE))
                elif not self._early and self._silence >= self._early_start:
                    self._early = True
                    start, end = self._span()
                    events.append(EarlyEnd(at=_seconds(self._elapsed), start=start, end=end))
            elif self._silence >= self._end_silence:
                log.debug("segmenter: dropped %.0f ms of speech at %.2f s (less than %s ms)",
                          self._run_speech / _US_PER_MS, _seconds(self._run_start), self.min_speech_ms)
                self._run_start = None
                self._run_speech = 0
                self._silence = 0

        if self._result is None:
            if self._started:
                assert self._run_start is not None
                if self._elapsed - self._run_start >= self._max_utterance:
                    events.append(self._finish(MAX_LENGTH))
            elif self._run_start is None and self._elapsed >= self._no_speech_timeout:
                self._result = NoSpeech(at=_seconds(self._elapsed))
                events.append(self._result)
        return events

    def _span(self) -> tuple[float, float]:
        assert self._run_start is not None
        start = max(0, self._run_start - self._pre_roll)
        end = min(self._last_speech_end + self._tail, self._elapsed)
        return _seconds(start), _seconds(end)

    def _finish(self, reason: EndReason) -> UtteranceEnded:
        start, end = self._span()
        self._result = UtteranceEnded(start=start, end=end, reason=reason, at=_seconds(self._elapsed))
        return self._result
