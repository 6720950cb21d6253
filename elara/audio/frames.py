"""The audio messages passed between stages: fixed 80 ms capture frames and whole clips."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Capture format: 16 kHz mono int16, 80 ms blocks (what openWakeWord and Whisper want).
SAMPLE_RATE = 16_000
FRAME_SAMPLES = 1_280
FRAME_SECONDS = FRAME_SAMPLES / SAMPLE_RATE


@dataclass(frozen=True, eq=False)
class AudioFrame:
    """One 80 ms block from the microphone: int16 mono samples at 16 kHz, and when it ended."""

    samples: np.ndarray
    captured_at: float  # time.monotonic() when the block's last sample arrived

    @property
    def duration(self) -> float:
        """Seconds of audio in the frame."""
        return len(self.samples) / SAMPLE_RATE


@dataclass(frozen=True, eq=False)
class AudioClip:
    """A stretch of mono int16 audio at any sample rate (an utterance, a synthesized sentence)."""

    samples: np.ndarray
    sample_rate: int

    @property
    def duration(self) -> float:
        """Seconds of audio in the clip."""
        return len(self.samples) / self.sample_rate
