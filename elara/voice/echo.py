"""Echo cancellation: Elara's own voice taken out of the microphone, with what she played as the
far-end reference.

The speaker records every block it plays by when it is heard (`PlaybackHistory`); for each
80 ms microphone frame, `EchoFilter` reads back what was playing while that frame was captured
and hands both to WebRTC's AEC3 (pywebrtc-audio), which aligns the two itself within a few
hundred milliseconds; a GCC-PHAT estimate of the delay (`estimate_delay`) is measured as she
speaks and given to it as a hint, and shown in `elara status`. Frames captured while nothing has
played for `tail_seconds` pass through untouched (no CPU spent).

`is_barge_in` is the pure decision whether a wake word heard while Elara speaks is the user: the
cleaned microphone must be louder than what could be left of her own voice.
"""

from __future__ import annotations

import collections
import logging
import math
import threading
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from elara.audio.frames import SAMPLE_RATE, AudioFrame
from elara.audio.reference import PlaybackHistory, estimate_delay

log = logging.getLogger(__name__)

#: far-end level (RMS of int16) below which a frame counts as Elara being silent
FAR_ACTIVE_RMS = 100.0
#: how far the cleaned microphone must rise above the echo left after cancellation, in dB, for a
#: wake word heard while she speaks to count as the user's
BARGE_IN_MARGIN_DB = 6.0


class Canceller(Protocol):
    """An acoustic echo canceller on 16 kHz mono int16 audio."""

    stream_delay_ms: int

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        """The microphone audio `near` without the echo of `far` (same length)."""

    def reset(self) -> None:
        """Forget the room (a new device)."""


def webrtc_canceller(stream_delay_ms: int = 0) -> Canceller:
    """WebRTC's AEC3 (with its high-pass filter), from pywebrtc-audio."""
    from pywebrtc_audio import AudioProcessor

    return AudioProcessor(sample_rate=SAMPLE_RATE, num_channels=1, echo_cancellation=True,
                          stream_delay_ms=stream_delay_ms)


def is_barge_in(near_rms: float, far_rms: float, erle_db: float,
                margin_db: float = BARGE_IN_MARGIN_DB) -> bool:
    """Is a wake word heard while Elara spoke the user's? Yes when the cleaned microphone level
    `near_rms` stands `margin_db` above the echo cancellation can leave of the far end
    (`far_rms` lowered by the measured ERLE); always when she was silent."""
    if far_rms < FAR_ACTIVE_RMS:
        return True
    residual = far_rms * 10 ** (-max(erle_db, 0.0) / 20)
    return near_rms > residual * 10 ** (margin_db / 20)


@dataclass
class EchoCounters:
    """What the echo filter has done (for `elara status`)."""

    processed: int = 0  # frames that went through the canceller
    passed: int = 0  # frames passed through (nothing played lately)


class EchoFilter:
    """Takes Elara's own voice out of each microphone frame (one instance per microphone)."""

    def __init__(self, canceller: Canceller, history: PlaybackHistory, *,
                 input_latency: float = 0.0, tail_seconds: float = 1.0,
                 delay_window_seconds: float = 2.0, max_delay_seconds: float = 0.4) -> None:
        self.canceller = canceller
        self.history = history
        self.input_latency = input_latency
        self.tail_seconds = tail_seconds
        self.counters = EchoCounters()
        #: echo return loss enhancement: how much quieter the echo got, in dB (smoothed)
        self.erle_db = 0.0
        #: the echo's delay behind the reference, measured (ms), or None before any echo
        self.delay_ms: float | None = None
        self._lock = threading.Lock()  # the canceller is not thread-safe
        self._max_lag = round(max_delay_seconds * SAMPLE_RATE)
        self._window = round(delay_window_seconds * SAMPLE_RATE)
        self._far: collections.deque[np.ndarray] = collections.deque()
        self._near: collections.deque[np.ndarray] = collections.deque()
        self._collected = 0
        #: per recent frame: cleaned level and far-end level (RMS), for `recent_levels`
        self._levels: collections.deque[tuple[float, float]] = collections.deque(maxlen=25)

    def clean(self, frame: AudioFrame) -> AudioFrame:
        """The frame without Elara's echo (the same frame when nothing played lately)."""
        near = frame.samples
        count = len(near)
        start = frame.captured_at - count / SAMPLE_RATE - self.input_latency
        if not self.history.playing_between(start - self.tail_seconds, start + count / SAMPLE_RATE):
            self.counters.passed += 1
            self._levels.append((_rms(near), 0.0))
            return frame
        far = self.history.read(start, count)
        with self._lock:
            cleaned = self.canceller.process(near, far)
        self.counters.processed += 1
        far_rms, near_rms, out_rms = _rms(far), _rms(near), _rms(cleaned)
        self._levels.append((out_rms, far_rms))
        if far_rms >= FAR_ACTIVE_RMS and near_rms > 0:
            erle = 10 * math.log10((near_rms ** 2 + 1) / (out_rms ** 2 + 1))
            self.erle_db += 0.05 * (erle - self.erle_db)  # about a second and a half of frames
        self._measure_delay(far, near, far_rms)
        return AudioFrame(np.asarray(cleaned, dtype=np.int16), frame.captured_at)

    def recent_levels(self, frames: int) -> tuple[float, float]:
        """The loudest cleaned level and the loudest far-end level over the last `frames` frames."""
        recent = list(self._levels)[-frames:]
        if not recent:
            return 0.0, 0.0
        return max(n for n, _ in recent), max(f for _, f in recent)

    def reset(self) -> None:
        """Start over (a new microphone or speaker)."""
        with self._lock:
            self.canceller.reset()
        self.erle_db, self.delay_ms = 0.0, None
        self._far.clear()
        self._near.clear()
        self._collected = 0

    def status(self) -> dict[str, object]:
        """The echo filter's part of `elara status`."""
        return {"erle_db": round(self.erle_db, 1),
                "delay_ms": None if self.delay_ms is None else round(self.delay_ms),
                "frames_cancelled": self.counters.processed}

    def _measure_delay(self, far: np.ndarray, near: np.ndarray, far_rms: float) -> None:
        if far_rms < FAR_ACTIVE_RMS:
            return
        self._far.append(far)
        self._near.append(near)
        self._collected += len(far)
        if self._collected < self._window:
            return
        far_all, near_all = np.concatenate(self._far), np.concatenate(self._near)
        self._far.clear()
        self._near.clear()
        self._collected = 0
        lag, clarity = estimate_delay(far_all, near_all, self._max_lag)
        if clarity < 5:
            return  # no clear echo in this stretch (the user talking over her, or a quiet room)
        delay = lag * 1000 / SAMPLE_RATE
        if self.delay_ms is None or abs(delay - self.delay_ms) > 5:
            log.info("echo delay %.0f ms (clarity %.1f)", delay, clarity)
        self.delay_ms = delay
        self.canceller.stream_delay_ms = int(delay)


def _rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples.astype(np.float64))))) if len(samples) else 0.0
