"""Computed answers end to end: `elara run` on the virtual sound card, spoken questions, no model.

"Hey Jarvis. What is seventeen times three?", "… How many minutes are in three hours?" and "… How
many days until Christmas?" are answered by Elara herself: the Ollama-protocol server gets no chat
or generate request, the answer comes out of the speaker, and each turn is stored with its intent.
"""

import re

from tests.rig import voice_clips
from tests.rig.daemon_process import DaemonProcess, daemon_env
from tests.spec_reader import read_all

KEY = "end-to-end key"
QUESTIONS = (
    ("sum", "What is seventeen times three?", "calculate"),
    ("units", "How many minutes are in three hours?", "convert"),
    ("calendar", "How many days until Christmas?", "days_until"),
)


def question(tmp_path, name, text):
    return voice_clips.write_wav(tmp_path / f"{name}.wav", voice_clips.concat(
        voice_clips.silence(0.5), voice_clips.piper_speech("Hey Jarvis."), voice_clips.silence(0.5),
        voice_clips.piper_speech(text), voice_clips.silence(1.5)))


def asking(requests):
    """The requests that ask the model for words: a chat, or a generate with a prompt (the warm-up's
    is empty: it only loads the model)."""
    return [(path, body) for path, body in requests
            if path == "/api/chat" or (path == "/api/generate" and body.get("prompt"))]


def test_computed_questions_are_answered_aloud_without_the_model(sound_card, ollama_server, tmp_path,
                                                                  transcriber):
    ollama_server.responder = lambda endpoint, body: "The model should not have been asked."
    env = daemon_env(sound_card.env, ollama_server.url, tmp_path, Listening__Mode="wake_word")
    daemon = DaemonProcess(env)
    try:
        daemon.wait_for("waiting for the wake word", timeout=90)
        recording = sound_card.record_speaker().wait_started()
        daemon.wait_for("is loaded in Ollama", timeout=30)  # the model was there to be asked
        for turn, (name, text, intent) in enumerate(QUESTIONS, 1):
            before = len(ollama_server.requests)
            sound_card.play_into_mic(question(tmp_path, name, text))
            daemon.wait_for(rf"local command: {intent}", timeout=30)
            daemon.wait_for("waiting for the wake word", count=turn + 1, timeout=30)
            assert asking(ollama_server.requests[before:]) == [], daemon.log()  # none for this turn
        heard = transcriber.transcribe(recording.samples()).text.lower()
        status, _ = daemon.terminate()
        assert status == 0
        assert asking(ollama_server.requests) == [] and ollama_server.turns() == []
    finally:
        (tmp_path / "daemon.log").write_text(daemon.log())
        daemon.kill()

    records = [r for r in read_all(tmp_path / "store", KEY) if r["role"] in ("User", "Assistant")]
    assert [(r["role"], r["metadata"].get("intent")) for r in records] == [
        (role, intent) for _, _, intent in QUESTIONS for role in ("User", "Assistant")]
    answers = [r["content"] for r in records if r["role"] == "Assistant"]
    assert answers[:2] == ["17 times 3 is 51.", "There are 180 minutes in 3 hours."]
    assert re.fullmatch(r"Christmas is (today|tomorrow|in [a-z -]+ days)\.", answers[2]), answers[2]
    # The answers came out of the speaker (tiny.en writes the numbers it hears in digits).
    assert "51" in heard and "180" in heard, heard
