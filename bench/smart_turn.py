"""Smart Turn v3.2, measured by bench/turn.py beside the transcript's ending, and not shipped.

Daily's Smart Turn v3.2 (BSD-2-Clause) is a Whisper-tiny encoder with a classifier head, run
with ONNX Runtime on the CPU (8.7 MB, int8). It reads the last 8 s of 16 kHz audio — the
utterance so far including the silence after it, zero-padded at the *start* when shorter — as
Whisper log-mel features (80 × 800) computed from the waveform normalised to zero mean and unit
variance, and answers one number: the probability that the turn is complete.

The model ships in the `pipecat-ai` wheel, which Elara does not install; for this experiment:

    .venv/bin/python -m pip install --no-deps pipecat-ai==1.14.0

`smart_turn_path` finds the model without importing pipecat (its ≈25 dependencies are left out).
The features come from faster-whisper's `FeatureExtractor`: on the waveform pipecat normalises,
with no end padding, it gives pipecat's own numpy features (`_whisper_features.py`) to float32
rounding (`bench/turn.py --check-features`).

`verdict_with` is the end-of-turn judgment with the model's probability beside the words.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from elara.audio.frames import SAMPLE_RATE
from elara.service.openmp import prepare_openmp
from elara.service.paths import package_dir
from elara.voice.turn import Ending, PauseSignals, TurnThresholds, Verdict, verdict_of

#: The wheel that carries the model, and how to install it for this experiment.
PACKAGE = "pipecat-ai==1.14.0"
INSTALL = f".venv/bin/python -m pip install --no-deps {PACKAGE}"
# Inside the pipecat-ai wheel: read by path, pipecat is never imported.
_MODEL_FILE = ("audio", "turn", "smart_turn", "data", "smart-turn-v3.2-cpu.onnx")

WINDOW_SECONDS = 8
WINDOW_SAMPLES = WINDOW_SECONDS * SAMPLE_RATE
_NORMALIZE_EPS = 1e-7  # transformers' WhisperFeatureExtractor (do_normalize=True)


def smart_turn_path() -> Path | None:
    """Smart Turn v3.2 (CPU ONNX) as shipped in the pipecat-ai wheel, or None if it is missing."""
    root = package_dir("pipecat")
    path = root.joinpath(*_MODEL_FILE) if root else None
    return path if path is not None and path.is_file() else None


def model_window(samples: np.ndarray) -> np.ndarray:
    """16 kHz audio (int16, or float in -1..1) → float32, the last 8 s, zero-padded at the start."""
    audio = np.asarray(samples).reshape(-1)
    if audio.dtype.kind in "iu":
        audio = audio.astype(np.float32) / 32768.0
    else:
        audio = audio.astype(np.float32)
    if len(audio) >= WINDOW_SAMPLES:
        return audio[-WINDOW_SAMPLES:]
    return np.pad(audio, (WINDOW_SAMPLES - len(audio), 0))


class TurnFeatures:
    """Smart Turn's input features: faster-whisper's log-mel on the normalised 8 s window."""

    def __init__(self) -> None:
        prepare_openmp()  # importing faster-whisper loads CTranslate2 and its libgomp
        from faster_whisper.feature_extractor import FeatureExtractor

        self._extractor = FeatureExtractor(feature_size=80, chunk_length=WINDOW_SECONDS)

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        """(80, 800) float32 features of the last 8 s of `samples`."""
        window = model_window(samples)
        normalized = (window - window.mean()) / np.sqrt(window.var() + _NORMALIZE_EPS)
        # padding=0: the window is already 8 s; faster-whisper's default 160-sample pad would add a frame.
        features = self._extractor(normalized.astype(np.float32), padding=0)
        return np.asarray(features, dtype=np.float32)


class SmartTurn:
    """A loaded Smart Turn v3.2 model. `probability` blocks for ≈45 ms on one core."""

    def __init__(self, model_path: Path, *, threads: int = 1) -> None:
        path = Path(model_path)
        if not path.is_file():
            raise FileNotFoundError(f"the Smart Turn model {path} is missing; {INSTALL}")
        import onnxruntime

        started = time.perf_counter()
        options = onnxruntime.SessionOptions()
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = max(1, int(threads))
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 4
        try:
            self._session: Any = onnxruntime.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ValueError(f"{path} does not load: {type(exc).__name__}: {exc}") from exc
        inputs = self._session.get_inputs()
        if len(inputs) != 1 or list(inputs[0].shape[1:]) != [80, 800]:
            raise ValueError(f"{path} is not a Smart Turn v3 model (it takes "
                             f"{[(i.name, i.shape) for i in inputs]}, not one (batch, 80, 800) input)")
        self._input = inputs[0].name
        self._features = TurnFeatures()
        self.model_path = path
        #: Seconds it took to load the model.
        self.load_seconds = time.perf_counter() - started
        #: Wall seconds the last `probability` call took (features and model).
        self.last_seconds = 0.0

    def probability(self, samples: np.ndarray) -> float:
        """Probability (0..1) that the turn is complete, given the utterance so far and the silence after it."""
        started = time.perf_counter()
        features = self._features(samples)[None, :, :]
        output = self._session.run(None, {self._input: features})[0]
        # The exported graph ends in a sigmoid: the output is already a probability.
        self.last_seconds = time.perf_counter() - started
        return float(np.clip(np.asarray(output).reshape(-1)[0], 0.0, 1.0))


@dataclass(frozen=True)
class TurnProbabilities:
    """How Smart Turn's probability becomes a verdict beside the words."""

    finished: float = 0.9  # at or above: finished, unless the words say not
    confirmed: float = 0.5  # at or above, with a finished transcript: finished
    unfinished: float = 0.1  # below: unfinished

    def __post_init__(self) -> None:
        if not self.unfinished <= self.confirmed <= self.finished:
            raise ValueError("probabilities must satisfy unfinished <= confirmed <= finished")


def verdict_with(p: float | None, signals: PauseSignals, thresholds: TurnThresholds,
                 probabilities: TurnProbabilities | None = None) -> tuple[Verdict, Ending, str]:
    """`elara.voice.turn.verdict_of` with Smart Turn's probability `p` (None: not measured) beside
    the words: the wake phrase alone, a whole command and unfinished words still decide first."""
    probabilities = probabilities or TurnProbabilities()
    verdict, ending, reason = verdict_of(signals, thresholds)
    if p is None or (signals.transcript is not None and (
            verdict is Verdict.UNFINISHED or signals.command)):
        return verdict, ending, reason
    if p >= probabilities.finished:
        return Verdict.FINISHED, ending, f"smart turn {p:.2f} >= {probabilities.finished:g}"
    if ending is Ending.FINISHED and p >= probabilities.confirmed:
        return Verdict.FINISHED, ending, f"a finished sentence and smart turn {p:.2f} >= {probabilities.confirmed:g}"
    if p < probabilities.unfinished:
        return Verdict.UNFINISHED, ending, f"smart turn {p:.2f} < {probabilities.unfinished:g}"
    return Verdict.UNKNOWN, ending, f"smart turn {p:.2f} undecided"
