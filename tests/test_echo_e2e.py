"""Elara hearing herself, as in a room: on the virtual sound card the speaker is routed back into
the microphone (module-loopback, 60 ms late, at half volume). Her long replies say "Hey Jarvis"
themselves: she must not wake to them, hear them as a question, or send anything for them."""

import json
import subprocess
import sys

import pytest
import voice_clips
from daemon_process import DaemonProcess, daemon_env

LONG = ("Hey Jarvis, you might say, and I would answer. Jarvis is a name from the stories. "
        "Hey Jarvis, what is the weather? People ask me that every day.")


def responder(endpoint, body):
    last = next(m["content"] for m in reversed(body.get("messages", [])) if m["role"] == "user")
    return "Berlin is the capital of Germany." if "germany" in last.lower() else LONG


@pytest.fixture
def echo_daemon(sound_card, ollama_server, tmp_path):
    ollama_server.responder = responder
    module = sound_card.add_echo(latency_ms=60, volume=0.5)
    env = daemon_env(sound_card.env, ollama_server.url, tmp_path, Listening__Mode="wake_word")
    daemon = DaemonProcess(env)
    try:
        daemon.wait_for("waiting for the wake word", timeout=90)
        yield daemon, env
    finally:
        daemon.kill()
        sound_card.remove_echo(module)
        (tmp_path / "daemon.log").write_text(daemon.log())


def clip(tmp_path, name, text, lead=0.5):
    return voice_clips.write_wav(tmp_path / f"{name}.wav", voice_clips.concat(
        voice_clips.silence(lead), voice_clips.piper_speech("Hey Jarvis."), voice_clips.silence(0.5),
        voice_clips.piper_speech(text), voice_clips.silence(1.0)))


def test_she_never_wakes_to_her_own_voice(echo_daemon, sound_card, ollama_server, tmp_path):
    daemon, env = echo_daemon
    for turn, question in enumerate(("Tell me something long.", "Tell me something else."), start=1):
        sound_card.play_into_mic(clip(tmp_path, f"q{turn}", question))
        daemon.wait_for(r"turn timings", count=turn, timeout=60)  # her whole reply, heard by the mic
        daemon.wait_for(r"waiting for the wake word", count=turn + 1, timeout=30)
    # Two replies saying "Hey Jarvis" and "Jarvis" six times in all, each heard back: no wake, no
    # phantom turn, nothing sent for them.
    assert daemon.count(r"wake word hey_jarvis \(score") == 2, daemon.log()
    assert len(ollama_server.turns()) == 2
    assert daemon.count("dropped an utterance") == 0
    echo = json.loads(subprocess.run([sys.executable, "-m", "elara", "status", "--json"],
                                     env=env, capture_output=True, text=True, timeout=30).stdout)["echo"]
    assert echo["erle_db"] > 10 and 20 <= echo["delay_ms"] <= 250, echo
    status, _ = daemon.terminate()
    assert status == 0
