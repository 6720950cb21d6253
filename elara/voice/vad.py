"""Voice activity: a speech probability for every 80 ms frame, cheap enough to run on each one.

Two adapters behind one protocol: `SileroVad` (the Silero v6 network that faster-whisper ships)
and `EnergyVad` (signal level over an adaptive noise floor; no model at all).
"""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path
from typing import Protocol

import numpy as np

from elara.audio.frames import SAMPLE_RATE, AudioFrame
from elara.errors import ModelLoadError, ModelNotFoundError
from elara.voice.models import VAD_KEY, silero_vad_path


class VoiceActivity(Protocol):
    """What the listener needs from a voice-activity detector."""

    def speech_probability(self, frame: AudioFrame) -> float:
        """How likely the frame holds speech, 0..1. Frames must come in order, without gaps."""
        ...

    def reset(self) -> None:
        """Forget the stream so far (call before a new, unrelated stretch of audio)."""
        ...


def create_vad(kind: str = "silero") -> VoiceActivity:
    """`Listening.Vad` → an adapter: "silero" or "energy"."""
    if kind == "silero":
        return SileroVad()
    if kind == "energy":
        return EnergyVad()
    raise ValueError(f"{VAD_KEY}: unknown voice-activity detector {kind!r} (silero or energy)")


class SileroVad:
    """Silero VAD v6 (ONNX, one thread), streamed in 32 ms chunks with its LSTM state kept.

    An 80 ms frame holds two or three complete 512-sample chunks (the rest waits for the next
    frame); the frame's probability is the highest of its chunks. ≈0.3 ms per frame.
    """

    CHUNK = 512  # samples per network step at 16 kHz
    CONTEXT = 64  # samples of the previous chunk the network sees with each chunk

    def __init__(self, model_path: Path | None = None) -> None:
        path = Path(model_path) if model_path is not None else silero_vad_path()
        if path is None or not path.is_file():
            raise ModelNotFoundError(
                f"{VAD_KEY}: the Silero VAD model is missing ({path or 'faster_whisper/assets/silero_vad_v6.onnx'}); "
                "pip install faster-whisper==1.2.1, or set Listening.Vad to \"energy\""
            )
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = 1
        options.log_severity_level = 4
        try:
            self._session = onnxruntime.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ModelLoadError(f"{VAD_KEY}: {path} does not load: {type(exc).__name__}: {exc}") from exc
        self.model_path = path
        self.reset()

    def reset(self) -> None:
        """Forget the audio heard so far (a new utterance starts)."""
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(self.CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._last = 0.0

    def speech_probability(self, frame: AudioFrame) -> float:
        """Silero's speech probability for the frame's last 512-sample chunk."""
        audio = np.asarray(frame.samples, dtype=np.float32).reshape(-1) / 32768.0
        pending = np.concatenate([self._pending, audio])
        count = len(pending) // self.CHUNK
        if count == 0:
            self._pending = pending
            return self._last
        chunks = pending[: count * self.CHUNK].reshape(count, self.CHUNK)
        self._pending = pending[count * self.CHUNK :]
        contexts = np.vstack([self._context[None, :], chunks[:-1, -self.CONTEXT :]])
        batch = np.concatenate([contexts, chunks], axis=1)
        probs, self._h, self._c = self._session.run(None, {"input": batch, "h": self._h, "c": self._c})
        self._context = chunks[-1, -self.CONTEXT :].copy()
        self._last = float(np.max(probs))
        return self._last


class EnergyVad:
    """Speech probability from the frame's speech-band level over a tracked noise floor (a fallback).

    The floor is the quietest frame of the last `window_seconds` (minimum statistics): steady noise
    (a fan, hum) sets it, while speech, which always has pauses, does not. The probability is a
    logistic curve of the frame's margin above the floor, 0.5 at `margin_db`. Frames quieter than
    `min_speech_dbfs` are never speech.
    """

    def __init__(
        self,
        *,
        margin_db: float = 10.0,
        slope_db: float = 1.5,
        window_seconds: float = 3.0,
        min_speech_dbfs: float = -55.0,
        min_floor_dbfs: float = -70.0,
    ) -> None:
        self.margin_db = margin_db
        self.slope_db = slope_db
        self.window_seconds = window_seconds
        self.min_speech_dbfs = min_speech_dbfs
        self.min_floor_dbfs = min_floor_dbfs
        self.reset()

    def reset(self) -> None:
        """Forget the noise floor learned so far."""
        self._levels: deque[float] = deque()
        self._seconds = 0.0
        #: The current noise floor estimate in dBFS (None before the first frame).
        self.floor_dbfs: float | None = None

    BAND_HZ = (200.0, 4000.0)  # where speech has its energy; hum and rumble below, hiss above

    @classmethod
    def level_dbfs(cls, samples: np.ndarray) -> float:
        """RMS level of the speech band (200 Hz – 4 kHz) relative to full scale; -120 for silence."""
        x = np.asarray(samples, dtype=np.float64).reshape(-1)
        if len(x) == 0:
            return -120.0
        spectrum = np.fft.rfft(x)
        freqs = np.fft.rfftfreq(len(x), 1.0 / SAMPLE_RATE)
        band = (freqs >= cls.BAND_HZ[0]) & (freqs <= cls.BAND_HZ[1])
        # Parseval: the band's share of the mean square.
        power = 2.0 * float(np.sum(np.abs(spectrum[band]) ** 2)) / (len(x) ** 2)
        rms = math.sqrt(power)
        return 20 * math.log10(rms / 32768.0) if rms > 1e-3 else -120.0

    def speech_probability(self, frame: AudioFrame) -> float:
        """How far the frame's speech-band level stands above the noise floor, as 0 to 1."""
        level = self.level_dbfs(frame.samples)
        self._levels.append(level)
        window = max(1, round(self.window_seconds * SAMPLE_RATE / max(1, len(frame.samples))))
        while len(self._levels) > window:
            self._levels.popleft()
        floor = max(min(self._levels), self.min_floor_dbfs)
        self.floor_dbfs = floor
        if level < self.min_speech_dbfs:
            return 0.0
        z = (level - floor - self.margin_db) / self.slope_db
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))
