"""Wake-word detection with openWakeWord (ONNX Runtime), one 80 ms frame at a time."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elara.audio.frames import AudioFrame
from elara.errors import ModelLoadError, ModelNotFoundError
from elara.voice.models import WAKE_WORD_KEY, friendly_wake_name


@dataclass(frozen=True)
class WakeDetection:
    """A wake word was heard: which one, how sure, and the `captured_at` of the deciding frame."""

    name: str
    score: float
    at: float


class WakeWordDetector:
    """Scores every frame with each wake-word model and decides when one has been said.

    A model fires when its score is ≥ `threshold` for `trigger_level` consecutive frames. After a
    detection the models and their audio buffers are reset, and nothing fires again until
    `refractory_seconds` of frame time (by `captured_at`) have passed. Not thread-safe: feed it
    from one task.
    """

    def __init__(
        self,
        model_paths: Sequence[Path],
        *,
        threshold: float = 0.5,
        trigger_level: int = 1,
        refractory_seconds: float = 2.0,
    ) -> None:
        paths = [Path(p) for p in model_paths]
        if not paths:
            raise ValueError("WakeWordDetector needs at least one model")
        for path in paths:
            if not path.is_file():
                raise ModelNotFoundError(f"{WAKE_WORD_KEY}: the wake-word model {path} does not exist")
        if trigger_level < 1:
            raise ValueError("trigger_level must be at least 1")
        self.threshold = float(threshold)
        self.trigger_level = int(trigger_level)
        self.refractory_seconds = float(refractory_seconds)

        import openwakeword
        from openwakeword.model import Model

        # openWakeWord prints its pretrained model list on stdout when a Model is built.
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                self._model = Model(wakeword_models=[str(p) for p in paths], inference_framework="onnx")
        except Exception as exc:  # a damaged or foreign .onnx file
            raise ModelLoadError(
                f"{WAKE_WORD_KEY}: {', '.join(map(str, paths))} does not load: {type(exc).__name__}: {exc}"
            ) from exc
        # Multi-class models (the built-in "timer") name their classes ("5_minute_timer"), but
        # openWakeWord only finds the names when the file is called exactly "timer".
        for key in self._model.class_mapping:
            known = openwakeword.model_class_mappings.get(friendly_wake_name(key))
            if known and self._model.model_outputs[key] > 1:
                self._model.class_mapping[key] = dict(known)
        # openWakeWord keys a score by the file's stem ("hey_jarvis_v0.1"), or by the class
        # label for a multi-class model. Detections use friendly names ("hey_jarvis").
        self._names: dict[str, str] = {}
        for key, mapping in self._model.class_mapping.items():
            if self._model.model_outputs[key] == 1:
                self._names[key] = friendly_wake_name(key)
            else:
                self._names.update({label: label for label in mapping.values()})
        self._initial_features = self._model.preprocessor.feature_buffer.copy()
        self._run: dict[str, int] = {}
        self._quiet_until = float("-inf")
        #: The latest score of every wake word (friendly name → 0..1), for benchmarks and logs.
        self.last_scores: dict[str, float] = {}
        #: CPU-side seconds the last `process` call took.
        self.last_seconds = 0.0

    @property
    def names(self) -> list[str]:
        """The friendly names of the loaded wake words ("hey_jarvis", …)."""
        return list(dict.fromkeys(self._names.values()))

    def process(self, frame: AudioFrame) -> WakeDetection | None:
        """Score one frame; a WakeDetection when a wake word has just been said, else None."""
        started = time.perf_counter()
        samples = np.asarray(frame.samples)
        if samples.dtype != np.int16:
            samples = samples.astype(np.int16)
        raw = self._model.predict(samples.reshape(-1))
        scores = {self._names.get(k, k): float(v) for k, v in raw.items()}
        detection: WakeDetection | None = None
        if frame.captured_at >= self._quiet_until:
            best: tuple[float, str] | None = None
            for name, score in scores.items():
                if score >= self.threshold:
                    self._run[name] = self._run.get(name, 0) + 1
                    if self._run[name] >= self.trigger_level and (best is None or score > best[0]):
                        best = (score, name)
                else:
                    self._run[name] = 0
            if best is not None:
                detection = WakeDetection(name=best[1], score=best[0], at=frame.captured_at)
                self.reset()
                self._quiet_until = frame.captured_at + self.refractory_seconds
        self.last_scores = scores
        self.last_seconds = time.perf_counter() - started
        return detection

    def reset(self) -> None:
        """Forget all audio and scores (between activations); also ends a refractory period."""
        self._model.reset()
        features = self._model.preprocessor
        if hasattr(features, "reset"):  # openWakeWord ≥ 0.6
            features.reset()
        else:
            features.raw_data_buffer.clear()
            features.melspectrogram_buffer = np.ones((76, 32))
            features.accumulated_samples = 0
            features.raw_data_remainder = np.empty(0)
            features.feature_buffer = self._initial_features.copy()
        self._run.clear()
        self._quiet_until = float("-inf")
        self.last_scores = {}
