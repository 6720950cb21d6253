"""What the speaker played, and when it was heard: the far-end reference for echo cancellation.

The speaker's output callback writes each block it hands to the device, stamped with the
monotonic time its first sample leaves the device (the callback's DAC time). The echo canceller
reads back, for a stretch of microphone audio, what was playing at that time, resampled to the
microphone's 16 kHz: silence where nothing played. Writing is cheap and thread-safe (the output
callback must never wait); resampling happens on read, once per block.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from elara.audio.frames import SAMPLE_RATE


@dataclass
class _Block:
    heard_at: float  # monotonic time of its first sample at the device
    samples: np.ndarray  # int16 at `rate`
    rate: int
    resampled: np.ndarray | None = field(default=None)  # at SAMPLE_RATE, made on first read

    @property
    def end(self) -> float:
        return self.heard_at + len(self.samples) / self.rate


class PlaybackHistory:
    """The last `seconds` of what was played, by the time it was heard."""

    def __init__(self, seconds: float = 5.0) -> None:
        self.seconds = seconds
        self._blocks: collections.deque[_Block] = collections.deque()
        self._lock = threading.Lock()
        #: monotonic time the last written sample ends (0.0 before anything played)
        self.last_end = 0.0
        #: monotonic time the speaker last moved its timeline (a gap heard, or its start settled)
        self.moved_at = float("-inf")

    def write(self, heard_at: float, samples: np.ndarray, rate: int) -> None:
        """Record a block the device plays from `heard_at` on (called from the audio thread)."""
        if len(samples) == 0:
            return
        block = _Block(heard_at, np.array(samples, dtype=np.int16, copy=True), rate)
        with self._lock:
            self._blocks.append(block)
            self.last_end = max(self.last_end, block.end)
            while self._blocks and self._blocks[0].end < block.end - self.seconds:
                self._blocks.popleft()

    def restamp(self, since: float, shift: float) -> None:
        """Move the blocks heard from `since` on by `shift` seconds (the speaker found it had
        stamped them early or late; called from the audio thread)."""
        with self._lock:
            for block in self._blocks:
                if block.heard_at >= since:
                    block.heard_at += shift
            self.last_end = max((b.end for b in self._blocks), default=0.0)
        self.moved_at = time.monotonic()

    def __len__(self) -> int:
        """How many blocks are kept."""
        return len(self._blocks)

    def gap(self) -> None:
        """A gap was heard (the device ran dry): what follows is on a new timeline."""
        self.moved_at = time.monotonic()

    def playing_between(self, start: float, end: float) -> bool:
        """True when anything was played between these times."""
        with self._lock:
            # Asked of every frame heard: the seconds of her last reply kept for the canceller are
            # hundreds of blocks, and while she is silent none of them is late enough.
            if self.last_end <= start:
                return False
            return any(b.heard_at < end and b.end > start for b in reversed(self._blocks))

    def read(self, start: float, count: int) -> np.ndarray:
        """`count` samples at 16 kHz of what was heard from `start` on (zeros where nothing)."""
        out = np.zeros(count, dtype=np.int16)
        end = start + count / SAMPLE_RATE
        with self._lock:
            blocks = [b for b in self._blocks if b.heard_at < end and b.end > start]
        for block in blocks:
            if block.resampled is None:
                block.resampled = _to_16k(block.samples, block.rate)
            offset = round((block.heard_at - start) * SAMPLE_RATE)
            first, last = max(0, offset), min(count, offset + len(block.resampled))
            if first < last:
                out[first:last] = block.resampled[first - offset:last - offset]
        return out


def _to_16k(samples: np.ndarray, rate: int) -> np.ndarray:
    if rate == SAMPLE_RATE:
        return samples
    # Linear interpolation is enough for a reference the canceller only correlates against.
    n = round(len(samples) * SAMPLE_RATE / rate)
    positions = np.arange(n) * (rate / SAMPLE_RATE)
    return np.interp(positions, np.arange(len(samples)), samples.astype(np.float32)).astype(np.int16)


def estimate_delay(far: np.ndarray, near: np.ndarray, max_lag: int, min_lag: int = 0) -> tuple[int, float]:
    """How many samples `near` lags `far` (min_lag … max_lag; a negative lag: `near` leads), by
    GCC-PHAT, and how clearly: the peak's height over the mean of the others (≥ 5 is a clear
    echo; near 1 is none)."""
    n = len(far) + len(near)
    size = 1 << (n - 1).bit_length()
    spectrum = np.fft.rfft(near.astype(np.float64), size) * np.conj(np.fft.rfft(far.astype(np.float64), size))
    magnitude = np.abs(spectrum)
    spectrum /= np.where(magnitude > 1e-9, magnitude, 1.0)
    lags = np.arange(min_lag, max_lag + 1)
    correlation = np.fft.irfft(spectrum, size)[lags % size]  # a negative lag wraps to the end
    best = int(np.argmax(correlation))
    rest = np.delete(np.abs(correlation), best)
    clarity = float(correlation[best] / (rest.mean() + 1e-12)) if len(rest) else 0.0
    return int(lags[best]), clarity
