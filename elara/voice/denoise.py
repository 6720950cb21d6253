"""Noise suppression and gain: WebRTC's audio processing, through webrtc-noise-gain (the Home
Assistant voice team's binding; wyoming-satellite's front end).

Whisper hears the words of a question better through it, above all in steady noise
(`SpeechToText.NoiseSuppression`; docs/listening.md has the figures), and Whisper's check of a
wake hears its window through it. The wake word's own model does worse through it, so its frames
are never cleaned.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from elara.audio.frames import SAMPLE_RATE
from elara.errors import ModelLoadError

#: WebRTC processes 10 ms at a time.
CHUNK_SAMPLES = SAMPLE_RATE // 100
#: `SpeechToText.NoiseSuppression` levels: 0 off, 1 (mild) to 4 (strongest).
LEVELS = range(0, 5)


class WebRtcCleaner:
    """A stream through WebRTC gain and noise suppression, 10 ms at a time; keeps its noise
    estimate between calls until `reset`. Not thread-safe."""

    def __init__(self, *, auto_gain_dbfs: int = 0, noise_suppression: int = 0, setting: str = "") -> None:
        try:
            from webrtc_noise_gain import AudioProcessor  # type: ignore[import-untyped]
        except ImportError as exc:
            where = f"{setting}: " if setting else ""
            raise ModelLoadError(
                f"{where}WebRTC noise suppression does not load ({exc}); run scripts/setup "
                "(it installs webrtc-noise-gain)" + (f", or set {setting} to 0" if setting else "")
            ) from exc
        self._new = lambda: AudioProcessor(int(auto_gain_dbfs), int(noise_suppression))
        self._processor: Any = self._new()
        self._pending = np.zeros(0, dtype=np.int16)

    def clean(self, samples: np.ndarray) -> np.ndarray:
        """The next int16 samples cleaned; a remainder short of 10 ms waits for the next call."""
        data = np.concatenate([self._pending, _as_int16(samples)])
        whole = len(data) - len(data) % CHUNK_SAMPLES
        self._pending = data[whole:]
        cleaned = b"".join(
            self._processor.Process10ms(data[i : i + CHUNK_SAMPLES].tobytes()).audio
            for i in range(0, whole, CHUNK_SAMPLES)
        )
        return np.frombuffer(cleaned, dtype=np.int16)

    def reset(self) -> None:
        """Forget the noise estimate and any pending samples."""
        self._processor = self._new()
        self._pending = np.zeros(0, dtype=np.int16)


class NoiseSuppressor:
    """Cleans one utterance at a time, each from a fresh noise estimate (so calls from several
    threads don't mix): the listener's pre-roll, the background before the first word, is what it
    learns the noise from."""

    def __init__(self, level: int, setting: str = "SpeechToText.NoiseSuppression") -> None:
        if level not in LEVELS or level == 0:
            raise ValueError(f"noise suppression level {level} must be 1..4")
        self.level = level
        self.setting = setting
        WebRtcCleaner(noise_suppression=level, setting=setting)  # fails now, at start-up, if it can't load

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        """`samples` (int16, or float in -1..1) cleaned, as int16 of the same length."""
        audio = _as_int16(samples)
        padded = np.concatenate([audio, np.zeros(-len(audio) % CHUNK_SAMPLES, dtype=np.int16)])
        cleaner = WebRtcCleaner(noise_suppression=self.level, setting=self.setting)
        return cleaner.clean(padded)[: len(audio)]


def _as_int16(samples: np.ndarray) -> np.ndarray:
    audio = np.asarray(samples).reshape(-1)
    if audio.dtype == np.int16:
        return audio
    if audio.dtype.kind == "f":
        return np.clip(np.round(audio * 32768.0), -32768, 32767).astype(np.int16)
    return audio.astype(np.int16)
