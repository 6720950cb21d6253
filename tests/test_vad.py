"""Voice activity on generated clips: speech vs silence vs noise, for both adapters."""

from __future__ import annotations

import numpy as np
import pytest

from elara.audio.frames import AudioFrame
from elara.errors import ModelNotFoundError
from elara.voice.vad import EnergyVad, SileroVad, VoiceActivity, create_vad
from tests.rig.voice_clips import concat, espeak_speech, frames, noise, piper_speech, silence, with_noise

QUESTION = "What is the weather like in Paris tomorrow?"


@pytest.fixture(scope="module")
def silero() -> SileroVad:
    return SileroVad()


def probabilities(vad: VoiceActivity, clip: np.ndarray) -> np.ndarray:
    vad.reset()
    return np.array([vad.speech_probability(f) for f in frames(clip)])


def speech_fraction(vad: VoiceActivity, clip: np.ndarray) -> float:
    return float(np.mean(probabilities(vad, clip) > 0.5))


@pytest.fixture(params=["silero", "energy"])
def vad(request, silero) -> VoiceActivity:
    return silero if request.param == "silero" else EnergyVad()


def test_speech_after_silence_is_found_where_it_is(vad):
    speech = piper_speech(QUESTION)
    probs = probabilities(vad, concat(silence(1.0), speech, silence(1.5)))
    assert np.all((probs >= 0.0) & (probs <= 1.0))
    lead, body = 12, len(speech) // 1280  # frames of silence, frames of speech
    assert np.all(probs[:lead] < 0.5)  # the first second is silent
    assert np.mean(probs[lead + 1 : lead + body - 1] > 0.5) > 0.7
    assert np.all(probs[lead + body + 6 :] < 0.5)  # silent again 0.5 s after the speech


@pytest.mark.parametrize(
    "clip",
    [
        pytest.param(lambda: silence(3), id="silence"),
        pytest.param(lambda: noise(3, dbfs=-30), id="white"),
        pytest.param(lambda: noise(3, dbfs=-25, color="pink", seed=1), id="pink"),
        pytest.param(lambda: noise(3, dbfs=-20, color="brown", seed=2), id="brown"),
    ],
)
def test_silence_and_steady_noise_are_not_speech(vad, clip):
    assert speech_fraction(vad, clip()) <= 0.05


def test_silero_hears_both_voices_and_speech_in_noise(silero):
    assert speech_fraction(silero, piper_speech(QUESTION)) > 0.8
    assert speech_fraction(silero, espeak_speech("Can you tell me a joke about computers?")) > 0.7
    noisy = with_noise(concat(silence(1.5), piper_speech(QUESTION), silence(1.5)), 5, color="white")
    probs = probabilities(silero, noisy)
    assert np.mean(probs[:15] > 0.5) == 0  # noise alone
    assert np.mean(probs[20:40] > 0.5) > 0.7  # speech within the noise


def test_energy_vad_tracks_a_noise_floor():
    vad = EnergyVad()
    clip = with_noise(concat(silence(2.0), piper_speech(QUESTION), silence(1.5)), 25, color="white")
    probs = probabilities(vad, clip)
    assert np.all(probs[:24] < 0.5)  # 2 s of hiss alone: below the floor's margin
    assert np.mean(probs[26:48] > 0.5) > 0.5  # most of the question
    assert vad.floor_dbfs is not None and vad.floor_dbfs < -30
    vad.reset()
    assert vad.floor_dbfs is None


def test_reset_and_odd_frame_sizes(silero):
    speech = piper_speech(QUESTION)
    first = probabilities(silero, speech)
    again = probabilities(silero, speech)  # probabilities() resets first
    assert np.allclose(first, again)
    # Frames need not be 80 ms: samples carry over between calls.
    silero.reset()
    sizes = [1000, 1500, 300, 2000, 1280]
    pos, probs = 0, []
    for i in range(40):
        n = sizes[i % len(sizes)]
        probs.append(silero.speech_probability(AudioFrame(speech[pos : pos + n], float(i))))
        pos += n
    assert max(probs) > 0.5
    silero.reset()
    assert silero.speech_probability(AudioFrame(silence(0.08), 0.0)) < 0.5


def test_create_vad_and_protocol():
    assert isinstance(create_vad("energy"), EnergyVad)
    silero = create_vad("silero")
    assert isinstance(silero, SileroVad)
    for vad in (silero, EnergyVad()):
        assert callable(vad.speech_probability) and callable(vad.reset)
    with pytest.raises(ValueError, match="Listening.Vad"):
        create_vad("webrtc")


def test_a_missing_silero_model_is_a_config_error(tmp_path):
    with pytest.raises(ModelNotFoundError, match="Listening.Vad"):
        SileroVad(tmp_path / "missing.onnx")
