"""Enrolling a voice for the wake-word verifier: a synthetic "user" (an espeak-ng voice) enrolls
through the real detector and the real training; then the configured daemon's detector uses it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from elara import cli
from elara.config import load_settings
from elara.errors import ConfigError, EnrollmentError
from elara.service.engines import load_wake_word
from elara.service.slices import WakeWordSlice
from elara.voice.enroll import OTHER_PROMPTS, add_verifier_to_config, enroll
from elara.voice.verifier import WakeVerifier
from tests.rig.voice_clips import concat, espeak_speech, frames, silence, write_wav

USER = "en-gb"  # the enrolled "person"
OTHER_SPEECH = ("I left my umbrella at the office again, so I got soaked on the way home.",
                "The garden needs weeding before the weekend, and the fence wants painting too.")


def wake_take(speed: int) -> np.ndarray:
    return concat(silence(0.5), espeak_speech("Hey Jarvis.", voice=USER, speed=speed), silence(0.8))


class ScriptedRecorder:
    """Answers each recording with the next clip, as a person at the microphone would."""

    def __init__(self, clips: list[np.ndarray]) -> None:
        self.clips = list(clips)
        self.said: list[str] = []

    async def say(self, text: str) -> None:
        self.said.append(text)

    async def record(self, seconds: float) -> np.ndarray:
        return self.clips.pop(0)


def woke(detector, clip: np.ndarray) -> bool:
    detector.reset()
    return any(detector.process(frame) for frame in frames(concat(clip, silence(1.0))))


@pytest.fixture(scope="module")
def detector():
    return load_wake_word(WakeWordSlice.of(load_settings(env={})).without_verifiers())


@pytest.fixture(scope="module")
def enrolled(detector):
    import asyncio

    # A recording without the wake word is asked for again; then three takes and the other speech.
    clips = [silence(3.0), *(wake_take(s) for s in (135, 155, 175)),
             *(espeak_speech(t, voice=USER, speed=160) for t in OTHER_SPEECH)]
    recorder = ScriptedRecorder(clips)
    enrollment = asyncio.run(enroll(detector, recorder, "hey_jarvis", takes=3))
    return enrollment, recorder


def test_enrollment_asks_again_when_the_wake_word_was_not_heard(enrolled):
    enrollment, recorder = enrolled
    assert (enrollment.takes, enrollment.retakes) == (3, 1)
    assert recorder.clips == []
    assert "I didn't catch that. Let's try again." in recorder.said
    assert recorder.said.count("Say 'Hey Jarvis' now.") == 4
    assert all(prompt in recorder.said for prompt in OTHER_PROMPTS)
    assert enrollment.verifier.positives >= 3 and enrollment.verifier.negatives > 50


def test_the_verified_detector_still_wakes_for_the_user_and_not_on_their_other_speech(enrolled, tmp_path):
    enrollment, _ = enrolled
    path = tmp_path / "hey_jarvis.npz"
    enrollment.verifier.save(path)
    verified = load_wake_word(WakeWordSlice.of(load_settings(env={"ELARA__WakeWord__Verifiers": json.dumps([str(path)])})))
    # Speeds and a sentence the enrollment never heard.
    assert woke(verified, wake_take(150)) and woke(verified, wake_take(170))
    assert woke(verified, concat(silence(0.5), espeak_speech("Hey Jarvis, what time is it?", voice=USER)))
    assert not woke(verified, espeak_speech("My brother drove to the coast last Sunday morning.", voice=USER))


def test_enrollment_gives_up_when_the_wake_word_is_never_heard(detector):
    import asyncio

    recorder = ScriptedRecorder([silence(2.0)] * 2)
    with pytest.raises(EnrollmentError, match="was not heard.*microphone"):
        asyncio.run(enroll(detector, recorder, "hey_jarvis", takes=2))


def test_the_config_file_gains_the_verifier_and_keeps_everything_else(tmp_path):
    config = tmp_path / "appsettings.json"
    add_verifier_to_config(config, tmp_path / "v.npz")  # created when missing
    assert json.loads(config.read_text()) == {"WakeWord": {"Verifiers": [str(tmp_path / "v.npz")]}}
    config.write_text(json.dumps({"wakeword": {"Threshold": 0.4, "verifiers": ["/old.npz"]}, "Context": {"LastN": 2}}))
    config.chmod(0o640)
    add_verifier_to_config(config, tmp_path / "v.npz")
    add_verifier_to_config(config, tmp_path / "v.npz")  # listed once however often one enrolls
    assert json.loads(config.read_text()) == {
        "wakeword": {"Threshold": 0.4, "verifiers": ["/old.npz", str(tmp_path / "v.npz")]},
        "Context": {"LastN": 2}}
    assert config.stat().st_mode & 0o777 == 0o640
    config.write_text("{ not json")
    with pytest.raises(ConfigError, match="appsettings.json.*fix the file"):
        add_verifier_to_config(config, tmp_path / "v.npz")


def test_elara_wake_enroll_from_recordings_configures_the_daemon(tmp_path, monkeypatch, capsys):
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.delenv("ELARA_CONFIG", raising=False)
    recordings = tmp_path / "recordings"
    recordings.mkdir()
    for i, speed in enumerate((140, 170)):
        write_wav(recordings / f"wake-{i}.wav", wake_take(speed))
    write_wav(recordings / "other-0.wav", espeak_speech(OTHER_SPEECH[0], voice=USER))
    write_wav(recordings / "other-1.wav", espeak_speech(OTHER_SPEECH[1], voice=USER))
    assert cli.main(["wake", "enroll", "--from-dir", str(recordings)]) == 0
    out = capsys.readouterr().out
    verifier_file = home / "elara" / "verifiers" / "hey_jarvis.npz"
    assert f"saved the verifier for hey_jarvis to {verifier_file}" in out and "2 takes" in out
    settings = load_settings(env={"XDG_CONFIG_HOME": str(home)})
    assert settings.wake_word.verifiers == (str(verifier_file),)
    assert WakeVerifier.load(verifier_file).wake_word == "hey_jarvis"
    assert load_wake_word(WakeWordSlice.of(settings)).verified == ["hey_jarvis"]
    assert cli.main(["wake", "enroll", "--takes", "0"]) == 2
    assert cli.main(["wake", "enroll", "--wake-word", "alexa", "--from-dir", str(recordings)]) == 2
    err = capsys.readouterr().err
    assert "--takes must be at least 1" in err and "'alexa' is not one of WakeWord.Models (hey_jarvis)" in err
    # Without the wake-word files the command says what it needs.
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["wake", "enroll", "--from-dir", str(empty)]) == 1
    assert "wake-*.wav" in capsys.readouterr().err
