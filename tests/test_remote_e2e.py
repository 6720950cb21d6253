"""End to end with both speech engines remote: `elara run` on the virtual sound card hears through
a real wyoming-faster-whisper and speaks through a real wyoming-piper, both on loopback. A spoken
turn is answered; then the speech-to-text service is killed and the next question gets the spoken
apology (no local engine stands by here), the status shows it down, and nothing reaches the model."""

import re

import pytest

from elara.conversation.messages import ChatRole
from elara.conversation.store import ConversationStore
from tests.rig.daemon_process import DaemonProcess, daemon_env, daemon_status, spoken_question
from tests.rig.wyoming_services import both

REPLY = "Paris is the capital of France."


def words(text):
    return " ".join(re.findall(r"[a-z']+", text.lower()))


@pytest.fixture
def services(tmp_path):
    with both(tmp_path) as services:
        yield services


def test_a_spoken_turn_with_both_engines_remote(services, sound_card, ollama_server, tmp_path, transcriber):
    whisper, piper = services
    ollama_server.responder = lambda endpoint, body: REPLY
    env = daemon_env(sound_card.env, ollama_server.url, tmp_path, Listening__Mode="wake_word",
                     SpeechToText__Engine=whisper.uri, SpeechToText__FallbackToLocal="false",
                     TextToSpeech__Engine=piper.uri, TextToSpeech__FallbackToLocal="false",
                     SpeechToText__TimeoutSeconds="5")
    daemon = DaemonProcess(env)
    try:
        daemon.wait_for("waiting for the wake word", timeout=90)
        assert daemon.count(r"speech-to-text at tcp://127\.0\.0\.1:\d+: faster-whisper 3\.8\.1") == 1
        assert daemon.count(r"text-to-speech at tcp://127\.0\.0\.1:\d+: piper 2\.5\.2") == 1
        shown = daemon_status(env)["models"]
        assert shown["speech_to_text"] == whisper.uri and shown["voice"] == piper.uri
        assert shown["remote_engines"]["speech_to_text"]["state"] == "up"
        assert shown["remote_engines"]["text_to_speech"]["fallback"] is None

        recording = sound_card.record_speaker().wait_started()
        sound_card.play_into_mic(spoken_question(tmp_path / "france.wav", "What is the capital of France?"))
        daemon.wait_for(r"turn timings", timeout=60)
        [turn] = ollama_server.turns()
        assert "capital of france" in words(turn["messages"][-1]["content"])
        daemon.wait_for("waiting for the wake word", count=2, timeout=30)
        assert "capital of france" in words(transcriber.transcribe(recording.samples()).text)

        # The speech-to-text service dies: the next question is answered with the apology,
        # spoken by the (still remote) voice, and nothing goes to the model.
        whisper.kill()
        recording = sound_card.record_speaker().wait_started()
        sound_card.play_into_mic(spoken_question(tmp_path / "germany.wav", "What is the capital of Germany?"))
        daemon.wait_for(r"speech-to-text failed: speech-to-text at tcp://127\.0\.0\.1:\d+", timeout=60)
        daemon.wait_for(r"announced \(apology\)", timeout=30)
        heard = words(transcriber.transcribe(recording.samples()).text)
        assert "reach the speech service" in heard, heard
        assert len(ollama_server.turns()) == 1
        remote = daemon_status(env)["models"]["remote_engines"]["speech_to_text"]
        assert remote["state"] == "down" and remote["last_error"] == "unreachable"

        code, _ = daemon.terminate()
        assert code == 0, daemon.log()
        assert "capital" not in daemon.log()  # no conversation text at INFO
        # the apology is said, never stored: the history holds the one turn
        stored = ConversationStore(tmp_path / "store", "end-to-end key").read_tail(10)
        assert [m.role for m in stored] == [ChatRole.USER, ChatRole.ASSISTANT]
    finally:
        daemon.kill()
        (tmp_path / "daemon.log").write_text(daemon.log())
