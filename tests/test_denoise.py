"""WebRTC noise suppression (elara.voice.denoise) on real speech and noise."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from elara.errors import ModelLoadError
from elara.voice.denoise import NoiseSuppressor, WebRtcCleaner
from tests.rig.voice_clips import concat, noise, piper_speech, rms_dbfs, silence


def test_an_utterance_comes_back_as_long_with_the_noise_lowered_and_the_speech_kept():
    speech = piper_speech("Set a timer for ten minutes.")
    clean = concat(silence(0.3), speech, silence(0.5))
    hiss = noise(len(clean) / 16_000, dbfs=rms_dbfs(speech) - 10, seed=3)[: len(clean)]
    noisy = np.clip(clean.astype(np.float64) + hiss, -32768, 32767).astype(np.int16)
    out = NoiseSuppressor(2)(noisy)
    assert out.dtype == np.int16 and len(out) == len(noisy)
    tail = slice(len(noisy) - 6400, len(noisy))  # the 0.4 s after the words: noise alone
    words = slice(4800, 4800 + len(speech))
    assert rms_dbfs(out[tail]) < rms_dbfs(noisy[tail]) - 10
    assert rms_dbfs(out[words]) > rms_dbfs(speech) - 3


def test_every_utterance_starts_from_a_fresh_noise_estimate():
    audio = noise(1.0, dbfs=-30, seed=1)
    suppress = NoiseSuppressor(2)
    assert np.array_equal(suppress(audio), suppress(audio))


def test_float_input_and_a_length_that_is_not_whole_10_ms_chunks():
    audio = noise(0.2537, dbfs=-30, seed=2).astype(np.float32) / 32768
    out = NoiseSuppressor(1)(audio)
    assert out.dtype == np.int16 and len(out) == len(audio)


def test_a_stream_keeps_a_remainder_short_of_10_ms_for_the_next_call():
    cleaner = WebRtcCleaner(noise_suppression=2)
    assert len(cleaner.clean(np.zeros(100, np.int16))) == 0
    assert len(cleaner.clean(np.zeros(220, np.int16))) == 320
    cleaner.reset()
    assert len(cleaner.clean(np.zeros(100, np.int16))) == 0


@pytest.mark.parametrize("level", [0, 5])
def test_levels_outside_1_to_4_are_a_programming_error(level):
    with pytest.raises(ValueError, match="1..4"):
        NoiseSuppressor(level)


def test_a_missing_library_names_the_setting_and_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "webrtc_noise_gain", None)  # import fails as if not installed
    with pytest.raises(ModelLoadError) as caught:
        NoiseSuppressor(2)
    assert "SpeechToText.NoiseSuppression" in caught.value.message
    assert "scripts/setup" in caught.value.message and "to 0" in caught.value.message
