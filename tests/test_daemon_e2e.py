"""End to end: `elara run` on the virtual sound card against the Ollama-protocol server.

"Hey Jarvis. <question>" is played into the fake microphone; the question must reach the model as
the user's turn, the reply must come out of the fake speaker (transcribed back), both turns must
be stored encrypted, a follow-up question must carry the first turn as context, a clip without the
wake word must send nothing, and SIGTERM must exit 0 with nothing lost.
"""

import re
import signal

import pytest

from elara.conversation.messages import ChatRole
from elara.conversation.store import NAME_PATTERN, ConversationStore, decode_message
from tests.rig import voice_clips
from tests.rig.daemon_process import DaemonProcess, daemon_env, listening_daemon
from tests.rig.ollama_server import closed_port
from tests.spec_reader import independent_open

REPLIES = {
    "germany": "Berlin is the capital of Germany.",
    "france": "Paris is the capital of France. It is a lovely city on the Seine.",
}


def responder(endpoint, body):
    last = next(m["content"] for m in reversed(body.get("messages", [])) if m["role"] == "user")
    for key, reply in REPLIES.items():
        if key in last.lower():
            return reply
    return "I am not sure."


def words(text: str) -> str:
    return " ".join(re.findall(r"[a-z]+", text.lower()))


def chats(server):
    return server.turns()


@pytest.fixture
def daemon(sound_card, ollama_server, tmp_path):
    ollama_server.responder = responder
    env = daemon_env(sound_card.env, ollama_server.url, tmp_path,
                     Listening__Mode="continued", Listening__FollowUpSeconds="4")
    # The log is kept for a failing run: pytest truncates long assertion messages.
    with listening_daemon(env, tmp_path / "daemon.log", timeout=90) as process:
        yield process


def clip_file(tmp_path, name, *parts):
    return voice_clips.write_wav(tmp_path / f"{name}.wav", voice_clips.concat(*parts))


def test_a_spoken_conversation(daemon, sound_card, ollama_server, tmp_path, transcriber):
    silence = voice_clips.silence
    question = clip_file(tmp_path, "question", silence(0.5), voice_clips.piper_speech("Hey Jarvis."),
                         silence(0.6), voice_clips.piper_speech("What is the capital of France?"),
                         silence(1.5))
    recording = sound_card.record_speaker().wait_started()

    sound_card.play_into_mic(question)
    daemon.wait_for(r"wake word hey_jarvis \(")
    daemon.wait_for(r"turn timings", timeout=60)
    first = chats(ollama_server)
    assert len(first) == 1
    assert "capital of france" in words(first[0]["messages"][-1]["content"])
    assert "jarvis" not in words(first[0]["messages"][-1]["content"])

    # Continued conversation: the follow-up needs no wake word and carries the first turn.
    follow_up = clip_file(tmp_path, "follow_up", voice_clips.piper_speech("And what about Germany?"),
                          silence(1.5))
    sound_card.play_into_mic(follow_up)
    daemon.wait_for(r"turn timings", count=2, timeout=60)
    second = chats(ollama_server)[-1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"] == REPLIES["france"]
    assert "germany" in words(second[-1]["content"])

    # The follow-up window closes; then speech without the wake word must send nothing.
    daemon.wait_for("waiting for the wake word", count=2, timeout=30)
    stray = clip_file(tmp_path, "stray", voice_clips.piper_speech("What time is it in Tokyo?"),
                      silence(2.0))
    sound_card.play_into_mic(stray)
    assert len(chats(ollama_server)) == 2
    assert daemon.count(r"wake word hey_jarvis \(") == 1, daemon.log()

    # Both replies came out of the speaker. Checked on phrases, not on "Paris": Piper's voice is
    # randomized and tiny.en hears its "Paris" as "Caris" about one time in fifteen.
    heard = words(transcriber.transcribe(recording.samples()).text)
    assert "capital of france" in heard and "capital of germany" in heard

    status, seconds = daemon.terminate()
    assert status == 0, daemon.log()
    assert seconds < 5
    stored = ConversationStore(tmp_path / "store", "end-to-end key").read_tail(10)
    assert [m.role for m in stored] == [ChatRole.USER, ChatRole.ASSISTANT] * 2
    assert stored[1].content == REPLIES["france"] and stored[3].content == REPLIES["germany"]
    assert "capital" not in daemon.log() and "Paris" not in daemon.log()  # no text at INFO


def test_a_spoken_turn_answered_by_the_built_in_model(sound_card, tmp_path, transcriber):
    """No Ollama at all: `auto` falls back to the real embedded model, which answers aloud."""
    env = daemon_env(sound_card.env, f"http://127.0.0.1:{closed_port()}", tmp_path, Listening__Mode="wake_word",
                     LanguageModel__Options='{"num_ctx": 2048, "temperature": 0, "num_predict": 48}')
    daemon = DaemonProcess(env)
    try:
        daemon.wait_for("waiting for the wake word", timeout=90)
        daemon.wait_for("small built-in model", timeout=30)
        question = clip_file(tmp_path, "question", voice_clips.silence(0.5),
                             voice_clips.piper_speech("Hey Jarvis."), voice_clips.silence(0.6),
                             voice_clips.piper_speech("What is the capital of France?"),
                             voice_clips.silence(1.5))
        recording = sound_card.record_speaker().wait_started()
        sound_card.play_into_mic(question)
        daemon.wait_for(r"turn timings", timeout=60)
        status, _ = daemon.terminate()
        assert status == 0, daemon.log()
    finally:
        daemon.kill()
        (tmp_path / "daemon.log").write_text(daemon.log())
    stored = ConversationStore(tmp_path / "store", "end-to-end key").read_tail(10)
    assert [m.role for m in stored] == [ChatRole.USER, ChatRole.ASSISTANT]
    assert "capital of france" in words(stored[0].content)
    reply = stored[1]
    assert reply.metadata["model"] == "SmolLM2-135M-Instruct.Q4_1" and "paris" in words(reply.content)
    # What came out of the speaker is the stored reply.
    heard = set(words(transcriber.transcribe(recording.samples()).text).split())
    said = {w for w in words(reply.content).split() if len(w) > 3}
    assert len(heard & said) >= min(2, len(said)), (heard, said)


def test_a_kill_just_after_the_question_ends_loses_no_word(daemon, sound_card, ollama_server, tmp_path):
    """kill -9 right after the turn was judged over, while the person may still go on and the
    reply streams: the question is on disk, whole and readable by anyone with the passphrase."""
    ollama_server.fault, ollama_server.slow_delay = "slow", 0.3
    silence = voice_clips.silence
    question = clip_file(tmp_path, "question", silence(0.5), voice_clips.piper_speech("Hey Jarvis."),
                         silence(0.6), voice_clips.piper_speech("What is the capital of France?"),
                         silence(1.5))
    sound_card.play_into_mic(question, wait=False)
    daemon.wait_for("stored the person's question", timeout=60)
    daemon.process.send_signal(signal.SIGKILL)
    daemon.process.wait(10)
    root = tmp_path / "store"
    files = sorted(p for p in root.iterdir() if NAME_PATTERN.fullmatch(p.name))
    stored = [decode_message(independent_open("end-to-end key", p.read_bytes())) for p in files]
    assert [m.role for m in stored] == [ChatRole.USER], daemon.log()
    assert "capital of france" in words(stored[0].content)
