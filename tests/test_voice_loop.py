"""The voice loop on synthetic frames, faster than real time, with every real part: the wake-word,
VAD and Whisper models, the store, the ollama client against the protocol server, Piper and the
speaker on the virtual sound card."""

import asyncio
import time
from dataclasses import replace

import pytest

from elara.audio.capture import Microphone
from elara.audio.playback import Speaker
from elara.config import load_settings
from elara.conversation.messages import ChatRole
from elara.conversation.store import ConversationStore
from elara.service.answering import load_language_model, make_orchestrator
from elara.service.slices import LanguageModelSlice
from elara.voice import dialogue as d
from elara.voice.endpoint import Segmenter
from elara.voice.loop import VoiceLoop
from elara.voice.parts import VoiceParts
from elara.voice.speech import SpeechSink, first_chunk
from elara.voice.stt import phantom_reason
from elara.voice.turn import TurnJudge, TurnThresholds
from elara.voice.vad import SileroVad
from elara.voice.wake import WakeWordDetector
from tests.rig import voice_clips

FOLLOW_UP = 2.0


@pytest.fixture
def loop_parts(sound_card, ollama_server, tmp_path, hey_jarvis_path, transcriber, synthesizer):
    """Builds a VoiceLoop like the daemon does, one event loop per test."""

    settings = load_settings(env={"ELARA__Context__StorageRoot": str(tmp_path / "store"),
                                  "ELARA__Context__EncryptionKey": "loop key",
                                  "ELARA__LanguageModel__Host": ollama_server.url,
                                  "ELARA__LanguageModel__Model": "test-model"})
    runner = asyncio.Runner()

    def build(*, barge_in=False, mode="continued", judge=False):
        async def make():
            store = ConversationStore(tmp_path / "store", "loop key")
            speaker = Speaker(None)
            clock = FrameClock()
            speech = SpeechSink(synthesizer, speaker, first_chunk_words=6, monotonic=clock)
            orchestrator = make_orchestrator(settings, store, load_language_model(LanguageModelSlice.of(settings)), speech)
            parts = VoiceParts(
                dialogue=d.Dialogue(mode, FOLLOW_UP, barge_in=barge_in),
                wake=WakeWordDetector([hey_jarvis_path]), vad=SileroVad(), vad_threshold=0.5,
                segmenter=Segmenter.from_settings(
                    settings.listening if judge else replace(settings.listening, turn_judgment="off"),
                    settings.speech_to_text),
                transcriber=transcriber, phantom_reason=phantom_reason, orchestrator=orchestrator,
                speech=speech, microphone=Microphone(None), pre_roll_ms=300, speaker_tail_ms=400,
                wake_phrases=("hey jarvis",),
                judge=TurnJudge(TurnThresholds.from_settings(settings.listening, ("hey jarvis",),
                                                             going_on_heard=False))
                if judge else None, speculative_reply=judge,
                go_on_ms=settings.listening.go_on_ms if judge else 0)
            return VoiceLoop(parts, clock=clock), speaker, store
        return runner.run(make())

    yield runner, build
    runner.close()


class FrameClock:
    """The test's one clock: the capture time of the last frame fed, running on in real time
    until the next one (frames come faster than real time, so they set it)."""

    def __init__(self) -> None:
        self.frame_at = 0.0
        self.fed_at = time.monotonic()

    def frame(self, at: float) -> None:
        """A frame captured at `at` was just fed."""
        self.frame_at, self.fed_at = at, time.monotonic()

    def __call__(self) -> float:
        return self.frame_at + (time.monotonic() - self.fed_at)


async def feed(loop: VoiceLoop, samples, start: float) -> float:
    """Feed a clip as frames; returns the capture time of the last one."""
    at = start
    for frame in voice_clips.frames(samples, start=start):
        loop.clock.frame(frame.captured_at)
        await loop.on_frame(frame)
        at = frame.captured_at
    return at


async def settle(loop: VoiceLoop, start: float, until, limit_seconds: float = 30.0) -> float:
    """Feed silence, a frame at a time with a short real pause, until `until()` or a wall bound."""
    deadline = time.monotonic() + limit_seconds
    at = start
    frame_samples = voice_clips.silence(0.08)
    while not until():
        assert time.monotonic() < deadline, f"stuck in {loop.state}"
        at = await feed(loop, frame_samples, at)
        await asyncio.sleep(0.005)
    return at


def chats(server):
    return [body for path, body in server.requests if path == "/api/chat"]


def question_clip():
    return voice_clips.concat(voice_clips.silence(0.5), voice_clips.piper_speech("Hey Jarvis."),
                              voice_clips.silence(0.6),
                              voice_clips.piper_speech("What is the capital of France?"))


def test_wake_question_reply_and_follow_up_window(loop_parts, ollama_server):
    runner, build = loop_parts
    loop, speaker, store = build()

    async def scenario():
        t = await feed(loop, question_clip(), start=1000.0)
        t = await settle(loop, t, lambda: loop.state == d.FOLLOW_UP)
        assert loop.counters.wakes == 1 and loop.counters.turns == 1
        t = await settle(loop, t, lambda: loop.state == d.IDLE)
        await speaker.close()

    runner.run(scenario())
    question = chats(ollama_server)[0]["messages"][-1]["content"].lower()
    assert "capital of france" in question and "jarvis" not in question
    assert [m.role for m in store.read_tail(5)] == [ChatRole.USER, ChatRole.ASSISTANT]
    assert set(loop.turns.last_finished.timings()) >= {"speech_end_to_transcript", "speech_end_to_first_audio"}
    assert loop.turns.last_finished.timings()["speech_end_to_first_audio"] > 0


def test_speech_without_the_wake_word_and_noise_after_it_send_nothing(loop_parts, ollama_server):
    runner, build = loop_parts
    loop, speaker, _ = build()

    async def scenario():
        t = await feed(loop, voice_clips.piper_speech("What is the capital of France?"), 2000.0)
        assert loop.state == d.IDLE and loop.counters.wakes == 0
        # The wake word followed by nothing but noise: dropped, back to idle, nothing sent.
        t = await feed(loop, voice_clips.concat(voice_clips.piper_speech("Hey Jarvis."),
                                                voice_clips.noise(1.5, dbfs=-45)), t)
        await settle(loop, t, lambda: loop.state == d.IDLE and not loop.busy)
        await speaker.close()

    runner.run(scenario())
    assert loop.counters.wakes == 1
    assert loop.counters.no_speech + loop.counters.rejected_utterances == 1
    assert chats(ollama_server) == []


def test_the_wake_word_is_deaf_while_elara_speaks_unless_barge_in(loop_parts, ollama_server):
    ollama_server.responder = lambda endpoint, body: "This reply is long enough to still be playing. " * 4
    runner, build = loop_parts
    for barge_in in (False, True):
        loop, speaker, _ = build(barge_in=barge_in)

        async def scenario(loop=loop, speaker=speaker):
            t = await feed(loop, question_clip(), start=3000.0)
            t = await settle(loop, t, lambda: loop.state == d.SPEAKING)
            t = await feed(loop, voice_clips.concat(voice_clips.piper_speech("Hey Jarvis."),
                                                    voice_clips.silence(0.3)), t)
            state = loop.state
            await loop.shutdown(grace=0.1)
            await speaker.close()
            return state

        state = runner.run(scenario())
        if barge_in:
            assert loop.counters.wakes == 2 and state == d.LISTENING
        else:
            assert loop.counters.wakes == 1 and state == d.SPEAKING


async def feed_in_time(loop: VoiceLoop, samples, start: float) -> float:
    """Feed a clip as frames at the pace a microphone delivers them (80 ms apart), so the work
    done in a pause (Whisper, the judgment, the reply started ahead) takes its real time."""
    at, began = start, time.monotonic()
    for frame in voice_clips.frames(samples, start=start):
        await asyncio.sleep(max(0.0, began + (frame.captured_at - start) - time.monotonic()))
        loop.clock.frame(frame.captured_at)
        await loop.on_frame(frame)
        at = frame.captured_at
    return at


@pytest.mark.parametrize("first, rest, voice", [
    ("What is the capital of", "Germany?", "en-us"),
    ("Can you tell me the", "weather for tomorrow?", "en-gb"),
])
def test_a_question_with_a_thinking_pause_reaches_the_model_whole(loop_parts, ollama_server,
                                                                   first, rest, voice):
    """One breath, a 1.1 s pause inside (which EndSilenceMs = 600 alone would cut): sent whole,
    stored user → assistant."""
    ollama_server.responder = lambda endpoint, body: "Here you are."
    runner, build = loop_parts
    loop, speaker, store = build(mode="wake_word", judge=True)
    clip = voice_clips.concat(voice_clips.silence(0.3), voice_clips.piper_speech("Hey Jarvis."),
                              voice_clips.silence(0.6), voice_clips.espeak_ssml(
                                  f'<speak>{first} <break time="1100ms"/> {rest}</speak>', voice))

    async def scenario():
        t = await feed_in_time(loop, clip, start=1000.0)
        await settle(loop, t, lambda: loop.state == d.IDLE and not loop.busy)
        await speaker.close()

    runner.run(scenario())
    asked = [body["messages"][-1]["content"].lower() for body in chats(ollama_server)]
    last_word = rest.split()[-1].strip("?").lower()
    assert asked and last_word in asked[-1], asked
    assert loop.counters.turns == 1
    stored = store.read_tail(5)
    assert [m.role for m in stored] == [ChatRole.USER, ChatRole.ASSISTANT]
    assert last_word in stored[0].content.lower()


def test_speech_resumed_after_the_reply_was_started_ahead_leaves_no_trace(loop_parts, ollama_server):
    """A finished sentence, a pause, then more: the reply started on the first sentence (the
    model is slow, so none of it is ready) is cancelled and dropped; only the whole turn is
    stored and answered."""
    ollama_server.responder = lambda endpoint, body: "Sure."
    ollama_server.fault, ollama_server.slow_delay = "slow", 1.5
    runner, build = loop_parts
    loop, speaker, store = build(mode="wake_word", judge=True)
    clip = voice_clips.concat(voice_clips.silence(0.3), voice_clips.piper_speech("Hey Jarvis."),
                              voice_clips.silence(0.6),
                              voice_clips.piper_speech("What is the capital of France?"),
                              voice_clips.silence(1.0),
                              voice_clips.piper_speech("And what is the capital of Spain?"))

    async def scenario():
        t = await feed_in_time(loop, clip, start=1000.0)
        await settle(loop, t, lambda: loop.state == d.IDLE and not loop.busy, limit_seconds=60)
        await speaker.close()

    runner.run(scenario())
    asked = [body["messages"][-1]["content"].lower() for body in chats(ollama_server)]
    assert loop.counters.speculations_discarded >= 1, asked
    assert "spain" not in asked[0] and "spain" in asked[-1]
    stored = store.read_tail(5)
    assert [m.role for m in stored] == [ChatRole.USER, ChatRole.ASSISTANT]
    assert "france" in stored[0].content.lower() and "spain" in stored[0].content.lower()
    assert stored[1].content == "Sure."
    assert loop.counters.turns == 1



def test_first_chunk_cuts_a_long_first_sentence_at_a_clause():
    long = "Well, the capital of France is Paris, which sits on the river Seine in the north."
    head, rest = first_chunk(long, 6)
    assert head == "Well, the capital of France is Paris,"
    assert rest == "which sits on the river Seine in the north."
    assert first_chunk("Paris is the capital.", 6) == ("Paris is the capital.", "")
    assert first_chunk(long, 0) == (long, "")
