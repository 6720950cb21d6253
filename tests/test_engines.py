"""Engine loading: resolved models and settings → loaded engines, and the load check."""

from __future__ import annotations

import dataclasses
import os

import pytest

from elara.config import load_settings
from elara.errors import ConfigError, ModelLoadError, ModelNotFoundError
from elara.service.engines import check_loads, load_wake_word, synthesizer
from elara.service.slices import WakeWordSlice
from elara.voice.models import JOE_VOICE, available_models, resolve_voice, resolve_wake_word


def test_check_loads_loads_each_kind():
    kinds = {}
    for record in available_models():
        if record.kind not in kinds and record.name in ("hey_jarvis", "tiny.en", "en_US-joe-medium", "silero"):
            kinds[record.kind] = check_loads(record)
    assert set(kinds) == {"wake_word", "speech_to_text", "text_to_speech", "vad"}
    assert all(seconds > 0 for seconds in kinds.values())


def test_check_loads_reports_a_broken_model(tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(os.urandom(256))
    with pytest.raises(ModelLoadError) as caught:
        check_loads(resolve_wake_word(str(broken)))
    assert isinstance(caught.value, ConfigError)
    assert str(caught.value).startswith("WakeWord.Models:") and "broken.onnx" in str(caught.value)


def test_load_wake_is_tuned_by_the_settings(tmp_path):
    settings = load_settings(env={
        "XDG_CONFIG_HOME": str(tmp_path), "ELARA__WakeWord__Threshold": "0.7",
        "ELARA__WakeWord__TriggerLevel": "2", "ELARA__WakeWord__RefractorySeconds": "1.5"})
    detector = load_wake_word(WakeWordSlice.of(settings))
    assert detector.names == ["hey_jarvis"]
    assert (detector.threshold, detector.trigger_level, detector.refractory_seconds) == (0.7, 2, 1.5)
    assert detector.shortens_pauses  # as shipped


def test_without_the_vad_gate_no_pause_is_shortened(tmp_path):
    # The gate is what hears the pauses: a config that turns it off loads, with nothing to shorten.
    settings = load_settings(env={"XDG_CONFIG_HOME": str(tmp_path), "ELARA__WakeWord__VadThreshold": "0"})
    assert settings.wake_word.shorten_pauses
    assert not load_wake_word(WakeWordSlice.of(settings)).shortens_pauses


def test_a_piper_voice_without_its_config_is_not_found():
    record = resolve_voice(JOE_VOICE)
    orphan = dataclasses.replace(record, config_path=None)
    with pytest.raises(ModelNotFoundError, match=r"TextToSpeech.Voice: .*\.onnx\.json"):
        synthesizer(orphan)
