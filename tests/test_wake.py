"""Wake-word detection with the real openWakeWord models on generated speech."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from elara.audio.frames import FRAME_SECONDS
from elara.errors import ModelNotFoundError
from elara.voice.models import resolve_wake_word
from elara.voice.wake import WakeDetection, WakeWordDetector
from tests.rig.voice_clips import (
    ESPEAK_VOICES,
    concat,
    espeak_speech,
    frames,
    noise,
    piper_speech,
    silence,
    with_noise,
)

LEAD = 1.0  # seconds of silence before the speech in every clip


def run(detector: WakeWordDetector, clip: np.ndarray, *, start: float = 0.0):
    """Feed a clip frame by frame: (detections, highest score per wake word)."""
    detections: list[WakeDetection] = []
    best: dict[str, float] = {}
    for frame in frames(clip, start=start):
        found = detector.process(frame)
        for name, score in detector.last_scores.items():
            best[name] = max(best.get(name, 0.0), score)
        if found:
            detections.append(found)
    return detections, best


def padded(speech: np.ndarray) -> np.ndarray:
    return concat(silence(LEAD), speech, silence(1.5))


@pytest.fixture
def detector(hey_jarvis_path) -> WakeWordDetector:
    return WakeWordDetector([hey_jarvis_path])


@pytest.mark.parametrize("length_scale", [0.85, 1.0, 1.2])
def test_hey_jarvis_from_piper_is_detected(detector, length_scale):
    speech = piper_speech("Hey Jarvis", length_scale=length_scale)
    detections, _ = run(detector, padded(speech))
    assert len(detections) == 1
    found = detections[0]
    assert found.name == "hey_jarvis"
    assert 0.5 <= found.score <= 1.0
    # Stamped with the deciding frame's time: within the phrase or shortly after it.
    assert LEAD < found.at <= LEAD + len(speech) / 16_000 + 1.0


@pytest.mark.parametrize(("voice", "speed"), ESPEAK_VOICES)
def test_hey_jarvis_from_espeak_is_detected(detector, voice, speed):
    detections, _ = run(detector, padded(espeak_speech("Hey Jarvis", voice=voice, speed=speed)))
    assert [d.name for d in detections] == ["hey_jarvis"]


def test_hey_jarvis_in_noise_and_at_the_start_of_a_question(detector):
    noisy = with_noise(padded(piper_speech("Hey Jarvis")), 10, color="pink")
    assert len(run(detector, noisy)[0]) == 1
    detector.reset()
    assert len(run(detector, padded(piper_speech("Hey Jarvis, what time is it?")))[0]) == 1


@pytest.mark.parametrize(
    "clip",
    [
        pytest.param(lambda: piper_speech("What is the weather like in Paris tomorrow?"), id="piper-question"),
        pytest.param(lambda: espeak_speech("Can you tell me a joke about computers?"), id="espeak-question"),
        pytest.param(lambda: piper_speech("Jar of jam, hey there, service please."), id="near-miss"),
        pytest.param(lambda: silence(4), id="silence"),
        pytest.param(lambda: noise(5, dbfs=-25), id="white-noise"),
        pytest.param(lambda: noise(5, dbfs=-20, color="pink", seed=1), id="pink-noise"),
        pytest.param(lambda: noise(5, dbfs=-20, color="brown", seed=2), id="brown-noise"),
    ],
)
def test_other_sounds_are_not_detected(detector, clip):
    detections, best = run(detector, padded(clip()))
    assert detections == []
    assert best["hey_jarvis"] < 0.3


def test_trigger_level_needs_consecutive_frames(hey_jarvis_path):
    clip = padded(piper_speech("Hey Jarvis"))
    at = {}
    for level in (1, 3):
        found, _ = run(WakeWordDetector([hey_jarvis_path], trigger_level=level), clip)
        assert len(found) == 1
        at[level] = found[0].at
    # Two more frames above the threshold are needed, so it fires exactly two frames later.
    assert at[3] == pytest.approx(at[1] + 2 * FRAME_SECONDS)
    # The phrase never scores high for 25 frames (2 s) in a row.
    assert run(WakeWordDetector([hey_jarvis_path], trigger_level=25), clip)[0] == []


def test_threshold_above_every_score_never_fires(hey_jarvis_path):
    found, best = run(WakeWordDetector([hey_jarvis_path], threshold=1.01), padded(piper_speech("Hey Jarvis")))
    assert found == []
    assert best["hey_jarvis"] > 0.5  # the scores are still reported


def test_refractory_period_is_measured_by_frame_time(hey_jarvis_path):
    phrase = piper_speech("Hey Jarvis")
    twice = concat(silence(LEAD), phrase, silence(1.0), phrase, silence(1.5))
    # The two phrases are ≈1.9 s apart: a 5 s refractory period swallows the second …
    assert len(run(WakeWordDetector([hey_jarvis_path], refractory_seconds=5.0), twice)[0]) == 1
    # … a 1 s one does not, and neither repeats on the tail of a phrase.
    found, _ = run(WakeWordDetector([hey_jarvis_path], refractory_seconds=1.0), twice)
    assert len(found) == 2
    assert found[1].at - found[0].at > 1.0

    # Time comes from the frames' stamps, not the clock: 10 s later the period is over.
    detector = WakeWordDetector([hey_jarvis_path], refractory_seconds=5.0)
    first, _ = run(detector, padded(phrase), start=100.0)
    second, _ = run(detector, padded(phrase), start=110.0)
    assert len(first) == 1 and len(second) == 1
    third, _ = run(detector, padded(phrase), start=112.0)  # 2 s after the second one
    assert third == []


def test_reset_forgets_a_half_heard_phrase_and_the_refractory_period(detector, hey_jarvis_path):
    clip = padded(piper_speech("Hey Jarvis"))
    cut = int((LEAD + 0.45) / FRAME_SECONDS)  # about half-way through the phrase
    all_frames = list(frames(clip))
    assert not any(detector.process(f) for f in all_frames[:cut])
    detector.reset()
    assert detector.last_scores == {}
    assert not any(detector.process(f) for f in all_frames[cut:])

    # A detection starts a 60 s quiet period; reset() ends it.
    quiet = WakeWordDetector([hey_jarvis_path], refractory_seconds=60.0)
    assert len(run(quiet, clip)[0]) == 1
    assert run(quiet, clip, start=10.0)[0] == []
    quiet.reset()
    assert len(run(quiet, clip, start=20.0)[0]) == 1


def test_several_wake_words_report_friendly_names(hey_jarvis_path):
    alexa = resolve_wake_word("alexa").path
    detector = WakeWordDetector([hey_jarvis_path, alexa])
    assert detector.names == ["hey_jarvis", "alexa"]
    found, _ = run(detector, padded(piper_speech("Alexa")))
    assert [d.name for d in found] == ["alexa"]
    detector.reset()
    found, best = run(detector, padded(piper_speech("Hey Jarvis")))
    assert [d.name for d in found] == ["hey_jarvis"]
    assert set(best) == {"hey_jarvis", "alexa"}


def test_detection_is_frozen_and_construction_keeps_stdout_clean(hey_jarvis_path, capsys):
    WakeWordDetector([hey_jarvis_path])
    assert capsys.readouterr().out == ""
    detection = WakeDetection(name="hey_jarvis", score=0.9, at=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        detection.score = 0.1  # type: ignore[misc]


def test_a_missing_model_file_is_a_config_error(tmp_path):
    with pytest.raises(ModelNotFoundError, match="WakeWord.Models"):
        WakeWordDetector([tmp_path / "nope.onnx"])
