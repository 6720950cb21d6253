"""Faults inside the running daemon, end to end: `elara run` on the virtual sound card against the
Ollama-protocol server, one daemon for the whole story. What the person meets: the model's stream
cut mid-reply (she says what came, then a short apology; the history keeps what she said, marked
interrupted), and the store's folder gone while she runs (the question still answered aloud, the
journal naming the folder and the fix).
The other faults are tested in their parts, in test_faults.py."""

import re

import pytest

from elara.conversation.messages import ChatRole
from elara.conversation.store import ConversationStore
from tests.rig.daemon_process import daemon_env, listening_daemon, spoken_question
from tests.rig.ollama_server import last_user_text

STORY = "Once upon a time there was a fox. It lived in a wood. It ran far away."


def responder(endpoint, body):
    if "story" in last_user_text(endpoint, body).lower():
        return STORY
    return "Yes, I can hear you."


def words(text: str) -> str:
    return " ".join(re.findall(r"[a-z]+", text.lower()))


@pytest.fixture
def daemon(sound_card, ollama_server, tmp_path):
    ollama_server.responder = responder
    env = daemon_env(sound_card.env, ollama_server.url, tmp_path, Listening__Mode="wake_word")
    with listening_daemon(env, tmp_path / "daemon.log", timeout=90) as process:
        yield process


def ask(daemon, sound_card, tmp_path, text, turn):
    sound_card.play_into_mic(spoken_question(tmp_path / f"question{turn}.wav", text))
    daemon.wait_for(r"turn timings", count=turn, timeout=60)
    daemon.wait_for("waiting for the wake word", count=turn + 1, timeout=30)


def test_a_cut_stream_and_a_missing_store_folder_in_the_running_daemon(
        daemon, sound_card, ollama_server, tmp_path, transcriber):
    root = tmp_path / "store"

    def stored():
        return [(m.role, m.content, m.metadata.get("interrupted"))
                for m in ConversationStore(root, "end-to-end key").read_tail(20)]

    # 1. The model's stream breaks after the first sentence.
    ollama_server.fault, ollama_server.fault_after = "error_mid_stream", 9
    recording = sound_card.record_speaker()
    ask(daemon, sound_card, tmp_path, "Tell me a story.", 1)
    heard = words(transcriber.transcribe(recording.samples()).text)
    assert "fox" in heard and "problem" in heard and "far away" not in heard, heard
    assert stored()[1:] == [(ChatRole.ASSISTANT, "Once upon a time there was a fox.", "true")]
    ollama_server.fault = "none"

    # 2. The store's folder is moved away while she runs: the question is still answered aloud.
    moved = tmp_path / "store.moved"
    root.rename(moved)
    recording = sound_card.record_speaker()
    ask(daemon, sound_card, tmp_path, "Are you there?", 2)
    assert "hear you" in words(transcriber.transcribe(recording.samples()).text)
    assert daemon.count(f"could not store the user turn: conversation folder {root} is missing .*"
                        "fix: put it back, or restart Elara") == 1, daemon.log()

    # (Put back, it stores again: test_faults.py::test_the_store_folder_removed_while_running.)
    moved.rename(root)
    assert [(role, interrupted) for role, _, interrupted in stored()] == [
        (ChatRole.USER, None), (ChatRole.ASSISTANT, "true")]

    status, _ = daemon.terminate()
    assert status == 0, daemon.log()
