"""The wake-word verifier: training, scoring, and its file, with numbers (no audio)."""

from __future__ import annotations

import numpy as np
import pytest

from elara.errors import ModelLoadError, ModelNotFoundError
from elara.voice.verifier import WakeVerifier, train

SHAPE = (16, 96)  # openWakeWord's feature window for hey_jarvis


def windows(rng: np.random.Generator, centre: float, count: int) -> np.ndarray:
    return rng.normal(centre, 1.0, (count, *SHAPE))


@pytest.fixture(scope="module")
def verifier() -> WakeVerifier:
    rng = np.random.default_rng(7)
    return train("hey_jarvis", windows(rng, 0.4, 30), windows(rng, 0.0, 600))


def test_it_separates_the_enrolled_voice_from_other_speech(verifier):
    rng = np.random.default_rng(8)
    wake = [verifier.probability(f) for f in windows(rng, 0.4, 20)]
    other = [verifier.probability(f) for f in windows(rng, 0.0, 200)]
    assert min(wake) > 0.5 and np.median(wake) > 0.9
    assert max(other) < 0.1
    assert (verifier.positives, verifier.negatives, verifier.wake_word) == (30, 600, "hey_jarvis")


def test_few_wake_clips_still_weigh_as_much_as_much_other_speech():
    # 25 windows (five clips) against 800: unbalanced, everything would come out "other speech".
    rng = np.random.default_rng(9)
    verifier = train("hey_jarvis", windows(rng, 0.4, 25), windows(rng, 0.0, 800))
    assert np.mean([verifier.probability(f) > 0.5 for f in windows(rng, 0.4, 50)]) >= 0.9


def test_it_round_trips_through_its_file(verifier, tmp_path):
    path = tmp_path / "verifiers" / "hey_jarvis.npz"
    verifier.save(path)
    loaded = WakeVerifier.load(path)
    features = np.random.default_rng(1).normal(0.2, 1.0, SHAPE)
    assert loaded.probability(features) == pytest.approx(verifier.probability(features))
    assert loaded.wake_word == "hey_jarvis" and loaded.positives == 30
    assert [p.name for p in path.parent.iterdir()] == ["hey_jarvis.npz"]  # no temporary left


def test_missing_and_foreign_files_are_config_errors_naming_the_file(tmp_path):
    missing = tmp_path / "nope.npz"
    with pytest.raises(ModelNotFoundError, match="nope.npz.*elara wake enroll") as error:
        WakeVerifier.load(missing)
    assert error.value.exit_status == 78
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a verifier")
    with pytest.raises(ModelLoadError, match="garbage.npz"):
        WakeVerifier.load(garbage)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, format=np.array(1), wake_word=np.array([object()], dtype=object))
    with pytest.raises(ModelLoadError, match="pickled.npz"):  # never unpickled
        WakeVerifier.load(pickled)


def test_training_needs_both_kinds_of_windows():
    rng = np.random.default_rng(2)
    with pytest.raises(ValueError, match="wake phrase"):
        train("hey_jarvis", np.empty((0, *SHAPE)), windows(rng, 0, 5))
    with pytest.raises(ValueError, match="other speech"):
        train("hey_jarvis", windows(rng, 0, 5), np.empty((0, *SHAPE)))
