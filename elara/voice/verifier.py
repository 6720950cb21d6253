"""A per-user wake-word verifier: is this the enrolled person saying the wake word?

openWakeWord's own recipe (`custom_verifier_model.py`): a logistic regression with strong L2
(C = 0.01), over standardised, flattened openWakeWord features (the 16 × 96 embeddings the
wake-word model itself reads), trained on the frames where the user's wake phrase scored and on
every frame of other speech. It runs only on frames the wake-word model already scored
≥ `VERIFY_FROM`, and its probability replaces that score, so the detector's threshold and
trigger level apply to it unchanged. Here it is a few lines of numpy, stored as a plain `.npz`
(never a pickle: a verifier file is data, and loading it runs no code).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elara.errors import ModelLoadError, ModelNotFoundError
from elara.service.files import replace_file
from elara.voice.models import WAKE_WORD_KEY

#: The wake-word score from which a frame is handed to the verifier (openWakeWord's default).
VERIFY_FROM = 0.1
#: openWakeWord's C for its verifier: strong regularisation, since a user gives a few clips.
_C = 0.01
_STEPS = 25  # Newton iterations; it converges in a handful
_FORMAT = 1


@dataclass(frozen=True, eq=False)
class WakeVerifier:
    """A trained verifier for one wake word: standardisation and logistic-regression weights."""

    wake_word: str  # the friendly name of the wake word it verifies ("hey_jarvis")
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    positives: int  # how many feature windows of the wake phrase it was trained on
    negatives: int  # how many of other speech

    def probability(self, features: np.ndarray) -> float:
        """How likely the enrolled person said the wake word, from features shaped like training."""
        x = (np.asarray(features, dtype=np.float64).reshape(-1) - self.mean) / self.scale
        return float(_sigmoid(x @ self.weights + self.bias))

    def save(self, path: Path) -> None:
        """Write the verifier atomically (a crash leaves the old file or the new one, never half)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.savez(
            buffer, format=np.array(_FORMAT), wake_word=np.array(self.wake_word), mean=self.mean,
            scale=self.scale, weights=self.weights, bias=np.array(self.bias),
            counts=np.array([self.positives, self.negatives]),
        )
        replace_file(path, buffer.getvalue())

    @classmethod
    def load(cls, path: Path) -> WakeVerifier:
        """Read a verifier `save` wrote; a missing or foreign file is a config error naming it."""
        path = Path(path)
        if not path.is_file():
            raise ModelNotFoundError(
                f"{WAKE_WORD_KEY}: the verifier {path} does not exist; run `elara wake enroll` "
                "or remove it from WakeWord.Verifiers"
            )
        try:
            with np.load(path, allow_pickle=False) as data:
                if int(data["format"]) != _FORMAT:
                    raise ValueError(f"format {int(data['format'])}, expected {_FORMAT}")
                verifier = cls(
                    wake_word=str(data["wake_word"]), mean=data["mean"].astype(np.float64),
                    scale=data["scale"].astype(np.float64), weights=data["weights"].astype(np.float64),
                    bias=float(data["bias"]), positives=int(data["counts"][0]), negatives=int(data["counts"][1]),
                )
        except Exception as exc:
            raise ModelLoadError(
                f"{WAKE_WORD_KEY}: the verifier {path} does not load ({type(exc).__name__}: {exc}); "
                "run `elara wake enroll` again"
            ) from exc
        sizes = {verifier.mean.shape, verifier.scale.shape, verifier.weights.shape}
        if len(sizes) != 1 or len(verifier.mean.shape) != 1 or not np.all(verifier.scale > 0):
            raise ModelLoadError(f"{WAKE_WORD_KEY}: the verifier {path} is damaged; run `elara wake enroll` again")
        return verifier


def train(wake_word: str, positive: np.ndarray, negative: np.ndarray) -> WakeVerifier:
    """Fit a verifier on feature windows of the wake phrase (`positive`) and of other speech."""
    if len(positive) == 0:
        raise ValueError("no feature windows of the wake phrase to train on")
    if len(negative) == 0:
        raise ValueError("no feature windows of other speech to train on")
    pos = np.asarray(positive, dtype=np.float64).reshape(len(positive), -1)
    neg = np.asarray(negative, dtype=np.float64).reshape(len(negative), -1)
    if pos.shape[1] != neg.shape[1]:
        raise ValueError(f"feature sizes differ: {pos.shape[1]} and {neg.shape[1]}")
    x = np.vstack([pos, neg])
    y = np.concatenate([np.ones(len(pos)), np.zeros(len(neg))])
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-8] = 1.0  # a constant feature carries nothing; keep it harmless
    z = (x - mean) / scale
    # Both classes weigh the same however few wake clips there are (sklearn's "balanced").
    sample_weight = np.where(y == 1, len(y) / (2 * len(pos)), len(y) / (2 * len(neg)))
    weights, bias = _fit(z, y, sample_weight)
    return WakeVerifier(wake_word, mean, scale, weights, bias, len(pos), len(neg))


def _fit(z: np.ndarray, y: np.ndarray, sample_weight: np.ndarray) -> tuple[np.ndarray, float]:
    """L2 logistic regression, sklearn's objective ½‖w‖² + C·Σ weightᵢ·lossᵢ (bias unpenalised),
    by Newton's method: a few solves of a features × features system, exact to the last digit."""
    n, d = z.shape
    x = np.hstack([z, np.ones((n, 1))])
    penalty = np.ones(d + 1)
    penalty[-1] = 1e-8  # the bias is not regularised; a whisker keeps the system invertible
    theta = np.zeros(d + 1)
    for _ in range(_STEPS):
        p = _sigmoid(x @ theta)
        gradient = penalty * theta + _C * (x.T @ ((p - y) * sample_weight))
        curvature = _C * sample_weight * p * (1 - p)
        hessian = (x.T * curvature) @ x
        hessian[np.diag_indices_from(hessian)] += penalty
        update = np.linalg.solve(hessian, gradient)
        theta -= update
        if float(np.max(np.abs(update))) < 1e-4:
            break
    return theta[:-1], float(theta[-1])


def _sigmoid(x: np.ndarray | float) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x)))
