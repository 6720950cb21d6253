"""The voice commands as real processes: say, transcribe, fsm, models, ask --speak."""

import os
import subprocess
import sys

import pytest


@pytest.fixture
def env(tmp_path):
    base = {k: v for k, v in os.environ.items() if not k.startswith("ELARA")}
    base.update({"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
                 "XDG_CACHE_HOME": str(tmp_path / "cache"),
                 "ELARA__Context__EncryptionKey": "voice cli key",
                 "ELARA__LanguageModel__Model": "test-model"})
    return base


def elara(env, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "elara", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_say_to_a_file_then_transcribe_it(env, tmp_path):
    wav = tmp_path / "hello.wav"
    said = elara(env, "say", "Hello there, this is a test of the speaker.", "--out", str(wav))
    assert said.returncode == 0, said.stderr
    assert said.stdout.startswith("wrote ") and wav.stat().st_size > 20_000
    heard = elara(env, "transcribe", str(wav))
    assert heard.returncode == 0, heard.stderr
    assert "test of the speaker" in heard.stdout.lower()


def test_transcribe_rejects_silence_and_bad_files(env, tmp_path):
    from tests.rig import voice_clips

    silent = voice_clips.write_wav(tmp_path / "silence.wav", voice_clips.silence(2.0))
    done = elara(env, "transcribe", str(silent))
    assert done.returncode == 1 and "no speech heard" in done.stderr
    (tmp_path / "not.wav").write_text("plain text")
    bad = elara(env, "transcribe", str(tmp_path / "not.wav"))
    assert bad.returncode == 1 and "is not a PCM WAV file" in bad.stderr


def test_transcribe_reads_doubtful_words_again_as_the_daemon_does(env, tmp_path):
    """en-029's "Set a timer for ten minutes." in pink noise: tiny.en alone reads "So to tighten my
    bottom, be leaders."; judged as at the end of a turn the words are doubtful, so Whisper base
    (`WakeWord.ConfirmSecondModel`, `SpeechToText.ReadAgainBySecondModel`) reads them again, as the
    daemon would, and its reading stands."""
    from tests.rig import voice_clips

    said = voice_clips.espeak_speech("Set a timer for ten minutes.", voice="en-029", speed=140)
    clip = voice_clips.with_noise(voice_clips.concat(voice_clips.silence(0.3), said, voice_clips.silence(0.6)),
                                  10, color="pink", seed=0)
    wav = voice_clips.write_wav(tmp_path / "noisy.wav", clip)
    heard = elara(env, "-v", "transcribe", str(wav))
    assert heard.returncode == 0, heard.stderr
    assert "read the doubted words again: changed" in heard.stderr
    assert heard.stdout.count("\n") == 1 and {"timer", "minutes"} <= set(heard.stdout.lower().strip(".\n").split())
    alone = elara({**env, "ELARA__SpeechToText__ReadAgainBySecondModel": "false"}, "transcribe", str(wav))
    assert alone.returncode == 0 and "timer" not in alone.stdout.lower()  # tiny.en, even at a wider beam


def test_fsm_text_and_dot(env):
    text = elara(env, "fsm")
    assert text.returncode == 0
    for state in ("idle", "listening", "transcribing", "thinking", "speaking", "follow_up"):
        assert state in text.stdout
    dot = elara(env, "fsm", "--dot")
    assert dot.stdout.startswith("digraph") and "wake_detected" in dot.stdout


def test_models_lists_and_loads_every_model(env):
    done = elara(env, "models")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "* WakeWord.Models      hey_jarvis" in done.stdout
    assert "SpeechToText.Model   tiny.en" in done.stdout and "✗" not in done.stdout


def test_a_missing_voice_model_is_a_config_error(env):
    env["ELARA__TextToSpeech__Voice"] = "en_GB-nobody-low"
    done = elara(env, "say", "hi", "--out", "/dev/null")
    assert done.returncode == 78 and "TextToSpeech.Voice" in done.stderr


def test_ask_speak_plays_the_reply(env, sound_card, ollama_server):
    ollama_server.responder = lambda endpoint, body: "The answer is spoken aloud."
    env.update(sound_card.env, ELARA__LanguageModel__Host=ollama_server.url)
    recording = sound_card.record_speaker().wait_started()
    done = elara(env, "ask", "--speak", "Say something")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The answer is spoken aloud.\n"
    samples = recording.samples()
    assert abs(samples.astype(int)).max() > 1000  # the speaker played it
