"""What a recording of the room shows: where sound begins and ends, and how soon after the words
said over her she fell silent."""

from __future__ import annotations

import numpy as np

from elara.audio.frames import SAMPLE_RATE
from tests.rig.pulse import best_offset


def voiced_start(samples: np.ndarray, threshold: int = 300) -> int:
    """Index of the first sample louder than `threshold` (0 when none is)."""
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > threshold)
    return int(loud[0]) if len(loud) else 0


def voiced_end(samples: np.ndarray, threshold: int = 300) -> int:
    """Index just after the last sample louder than `threshold` (0 when none is)."""
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > threshold)
    return int(loud[-1]) + 1 if len(loud) else 0


def first_sound(samples: np.ndarray, start: int, threshold: int = 400) -> int | None:
    """Index of the first sample from `start` on louder than `threshold`, or None."""
    loud = np.flatnonzero(np.abs(samples[start:].astype(np.int32)) > threshold)
    return start + int(loud[0]) if len(loud) else None


def silent_after(echo: np.ndarray, start: int, window: int = 320, rms: float = 150.0) -> float:
    """Seconds from `start` (a sample index) until the echo stays below `rms` for good."""
    levels = [np.sqrt(np.mean(echo[i:i + window].astype(np.float64) ** 2))
              for i in range(start, len(echo) - window, window)]
    loud = [n for n, level in enumerate(levels) if level > rms]
    return (loud[-1] + 1) * window / SAMPLE_RATE if loud else 0.0


def reaction(recording: np.ndarray, played: np.ndarray, said_end: int) -> float:
    """Seconds from the end of what was said (`said_end`, an index into `played`, which is silent
    from there on) until the microphone no longer hears her. The clip is found by its words alone:
    over its silences the microphone hears only her."""
    said_start = voiced_start(played)
    offset, score = best_offset(recording, played[said_start:said_end])
    assert score > 0.25, f"the clip is not in the recording (score {score:.2f})"
    start = offset - said_start
    return silent_after(recording[:start + len(played)], start + said_end)
