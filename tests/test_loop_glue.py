"""The voice loop's glue with fake engines against its Protocols: no sound card, no models, a few
milliseconds each. Frames say what they hold (silence, the wake word, the n-th phrase) and the
fakes read it back; the orchestrator, the speech sink and the dialogue are the real ones.

`run_loop(parts, script)` feeds a script of frames the way pipecat's `run_test` feeds frames to a
processor, on an injected clock, and lets the loop's work finish between frames."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from elara.audio.frames import FRAME_SAMPLES, SAMPLE_RATE, AudioClip, AudioFrame
from elara.audio.reference import PlaybackHistory
from elara.brain.orchestrator import Orchestrator
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.render import OllamaChatRenderer
from elara.conversation.store import ConversationStore
from elara.skills import intents
from elara.skills.announcements import RETRY_SECONDS, RING_GAP_SECONDS, Announcement, Announcer
from elara.skills.commands import LocalCommands
from elara.skills.timers import TimerBook
from elara.voice import dialogue as d
from elara.voice import events as ev
from elara.voice.echo import EchoFilter
from elara.voice.endpoint import Segmenter
from elara.voice.loop import VoiceLoop
from elara.voice.parts import VoiceParts
from elara.voice.speech import SpeechSink
from elara.voice.stt import Transcript, phantom_reason
from elara.voice.turn import TurnJudge, TurnThresholds
from elara.voice.wake import WakeDetection

FRAME = FRAME_SAMPLES / SAMPLE_RATE
SILENCE, WAKE, SPEECH = 0, 1, 100  # a speech frame holds SPEECH + the phrase's number
PHRASES = ["what is the capital of france", "and of spain", "how far is the moon", "Hey, Jervis.",
           "What is the capital of", "What is the capital of Germany?", "Tell me a joke.", "Stop."]
WAKE_PHRASE_ONLY = 3  # how Whisper may write the wake phrase said alone
UNFINISHED, WHOLE, FINISHED = 4, 5, 6  # "What is the capital of", the same question whole, another
STOP = 7


# -- fakes for the engines ---------------------------------------------------------------------


class Clock:
    """The one clock of a test: moves only when a frame is captured."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class FakeWake:
    """Fires on a WAKE frame."""

    def __init__(self) -> None:
        self.resets = 0
        self.confirmations = {"asked": 0, "confirmed": 0}
        self.during_playback = False
        self.heard_over_playback: list[bool] = []  # per frame fed
        self.fresh: list[bool] = []  # per frame fed: whether it was reset just before
        self._fresh = True

    def process(self, frame: AudioFrame) -> WakeDetection | None:
        self.heard_over_playback.append(self.during_playback)
        self.fresh.append(self._fresh)
        self._fresh = False
        return WakeDetection("hey_jarvis", 0.9, frame.captured_at) if frame.samples[0] == WAKE else None

    def reset(self) -> None:
        self.resets += 1
        self._fresh = True


class FakeVad:
    """Speech wherever a phrase is."""

    def speech_probability(self, frame: AudioFrame) -> float:
        return 1.0 if frame.samples[0] >= SPEECH else 0.0

    def reset(self) -> None:
        pass


class FakeTranscriber:
    """Reads the last phrase number out of the audio (a later phrase stands for all the words
    so far); `hold` blocks it until set, `fail` raises."""

    def __init__(self) -> None:
        self.hold: threading.Event | None = None
        self.fail = False
        self.calls = 0
        self.logprob = -0.1  # how sure Whisper is of what it heard
        self.phrases: list[list[int]] = []  # the phrases in each call's audio, in order
        self.seconds: list[float] = []  # each call's audio length

    def transcribe(self, samples: np.ndarray) -> Transcript:
        self.calls += 1
        said = [int(k) - SPEECH for k in samples[::FRAME_SAMPLES] if k >= SPEECH]
        self.phrases.append(list(dict.fromkeys(said)))
        self.seconds.append(len(samples) / SAMPLE_RATE)
        if self.hold is not None:
            self.hold.wait(5)
        if self.fail:
            raise RuntimeError("the model file went away")
        spoken = samples[samples >= SPEECH]
        text = PHRASES[int(spoken[-1]) - SPEECH] if len(spoken) else ""
        return Transcript(text=text, no_speech_prob=0.0 if text else 0.9, avg_logprob=self.logprob,
                          audio_seconds=len(samples) / SAMPLE_RATE, seconds=0.0)


class FakeReader:
    """Reads the words again (a wider beam): the last phrase as `heard` has it (else as the
    phrase is written), or fails; `hold` blocks it until set. Its reading stands where its
    `logprob` is at least the first reading's, as if the models found it likelier."""

    def __init__(self, heard: dict[int, str] | None = None) -> None:
        self.heard = heard or {}
        self.fail = False
        self.calls = 0
        self.hold: threading.Event | None = None
        self.logprob = -0.2

    def reread(self, samples: np.ndarray, reading: Transcript) -> Transcript:
        second = self.transcribe(samples)
        return second if second.avg_logprob >= reading.avg_logprob else reading

    def transcribe(self, samples: np.ndarray) -> Transcript:
        self.calls += 1
        if self.hold is not None:
            self.hold.wait(5)
        if self.fail:
            raise RuntimeError("out of memory")
        spoken = samples[samples >= SPEECH]
        phrase = int(spoken[-1]) - SPEECH
        return Transcript(text=self.heard.get(phrase, PHRASES[phrase]), no_speech_prob=0.0,
                          avg_logprob=self.logprob, audio_seconds=len(samples) / SAMPLE_RATE, seconds=0.0)


class FakeSynthesizer:
    """A tenth of a second of audio per sentence; `hold` blocks it until set."""

    sample_rate = 22_050

    def __init__(self, name: str = "voice") -> None:
        self.name = name
        self.said: list[str] = []
        self.hold: threading.Event | None = None

    def synthesize(self, text: str) -> AudioClip:
        if self.hold is not None:
            self.hold.wait(5)
        self.said.append(text)
        return AudioClip(np.ones(2205, dtype=np.int16), self.sample_rate)


class FakePlayer:
    """Plays instantly; can be held mid-clip (`hold`) or fail."""

    def __init__(self) -> None:
        self.played: list[AudioClip] = []
        self.hold: asyncio.Event | None = None
        self.fail = False
        self.stops = 0
        self.paused = False

    async def play(self, clip: AudioClip) -> bool:
        if self.fail:
            raise OSError("the speaker was unplugged")
        self.played.append(clip)
        if self.hold is not None:
            await self.hold.wait()
        return True

    async def stop(self) -> None:
        self.stops += 1

    async def prepare(self, sample_rate: int) -> None:
        pass

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False


class FakeModel:
    """A language model that answers every question with `reply`, or waits on `hold`."""

    model = "fake-model"

    def __init__(self, reply: str = "Paris is the capital. It is lovely.") -> None:
        self.reply = reply
        self.questions: list[str] = []
        self.hold: asyncio.Event | None = None

    async def stream(self, request):  # type: ignore[no-untyped-def]
        # The question's words, without the time they were said ("[Saturday …] what is …").
        self.questions.append(request.messages[-1]["content"].split("] ", 1)[-1])
        if self.hold is not None:
            await self.hold.wait()
        for word in self.reply.split(" "):
            yield word + " "


class ListStore:
    """Keeps messages in a list."""

    def __init__(self) -> None:
        self.messages: list[ChatMessage] = []

    def append(self, message: ChatMessage) -> int:
        self.messages.append(message)
        return len(self.messages) - 1

    def annotate(self, index: int, metadata: dict[str, str]) -> None:
        message = self.messages[index]
        self.messages[index] = dataclasses.replace(message, metadata={**message.metadata, **metadata})


class FakeMicrophone:
    """Yields the frames it is given."""

    def __init__(self, frames: list[AudioFrame] | None = None) -> None:
        self.queue: asyncio.Queue[AudioFrame | None] = asyncio.Queue()
        for frame in frames or []:
            self.queue.put_nowait(frame)

    async def frames(self) -> AsyncGenerator[AudioFrame, None]:
        while (frame := await self.queue.get()) is not None:
            yield frame


@dataclass
class Rig:
    """A loop with its fakes, on one clock."""

    loop: VoiceLoop
    clock: Clock
    wake: FakeWake
    transcriber: FakeTranscriber
    synthesizer: FakeSynthesizer
    player: FakePlayer
    model: FakeModel
    store: ListStore
    microphone: FakeMicrophone
    states: list[str] = field(default_factory=list)

    def frame(self, kind: int) -> AudioFrame:
        """The next frame of the script, captured now."""
        self.clock.now += FRAME
        return AudioFrame(np.full(FRAME_SAMPLES, kind, dtype=np.int16), self.clock.now)


def make_parts(*, mode: str = "continued", barge_in: bool = False, follow_up: float = 2.0,
               synthesizer: FakeSynthesizer | None = None, player: FakePlayer | None = None,
               model: FakeModel | None = None, store: ListStore | None = None,
               microphone: FakeMicrophone | None = None, clock: Clock, judge: bool = False,
               speculate: bool = False, go_on_ms: int = 0, read_again: FakeReader | None = None) -> VoiceParts:
    """Voice parts over fakes, with the defaults' endpointing (and end-of-turn judgment)."""
    synthesizer = synthesizer or FakeSynthesizer()
    player = player or FakePlayer()
    speech = SpeechSink(synthesizer, player, first_chunk_words=6, monotonic=clock)
    orchestrator = Orchestrator(store=store or ListStore(), builder=PromptBuilder(ConfigSystemPrompt("Be brief."), []),
                                renderer=OllamaChatRenderer(), llm=model or FakeModel(), sink=speech,
                                context_size=6, monotonic=clock)
    return VoiceParts(
        dialogue=d.Dialogue(mode, follow_up, barge_in=barge_in), wake=FakeWake(), vad=FakeVad(),
        segmenter=Segmenter(pre_roll_ms=300, end_silence_ms=600, min_speech_ms=200,
                            max_utterance_seconds=15, no_speech_timeout_seconds=5, early_start_ms=200,
                            max_pause_ms=2000 if judge else None),
        transcriber=FakeTranscriber(), phantom_reason=phantom_reason, orchestrator=orchestrator,
        speech=speech, microphone=microphone or FakeMicrophone(), wake_phrases=("hey jarvis",),
        judge=TurnJudge(TurnThresholds(finished_ms=250, max_pause_ms=2000, end_silence_ms=600,
                                       wake_phrases=("hey jarvis",))) if judge else None,
        speculative_reply=speculate, go_on_ms=go_on_ms, read_again=read_again)


def make_rig(start: float = 1000.0, announcer: Announcer | None = None, **options: object) -> Rig:
    """A loop over fake engines whose clock starts at `start` (announcing what `announcer` has due)."""
    clock = Clock(start)
    synthesizer, player, model, store = FakeSynthesizer(), FakePlayer(), FakeModel(), ListStore()
    microphone = FakeMicrophone()
    parts = make_parts(synthesizer=synthesizer, player=player, model=model, store=store,
                       microphone=microphone, clock=clock, **options)  # type: ignore[arg-type]
    states: list[str] = []
    loop = VoiceLoop(parts, clock=clock, on_state=states.append, announcer=announcer)
    assert isinstance(parts.wake, FakeWake) and isinstance(parts.transcriber, FakeTranscriber)
    return Rig(loop, clock, parts.wake, parts.transcriber, synthesizer, player, model, store,
               microphone, states)


def say(phrase: int, seconds: float = 1.2) -> list[int]:
    """Frames of the n-th phrase."""
    return [SPEECH + phrase] * round(seconds / FRAME)


def quiet(seconds: float) -> list[int]:
    """Frames of silence."""
    return [SILENCE] * round(seconds / FRAME)


async def settle(rig: Rig, limit: int = 2000) -> None:
    """Let the loop's work in flight (transcription, the reply) run to its end."""
    for _ in range(limit):
        if rig.loop.settled:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"the loop is still busy in {rig.loop.state}")


async def until(rig: Rig, state: str, limit: int = 2000) -> None:
    """Wait, feeding nothing, until the loop reaches `state`."""
    for _ in range(limit):
        if rig.loop.state == state:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"the loop is in {rig.loop.state}, not {state}")


async def run_loop(rig: Rig, script: list[int], *, wait: bool = True) -> None:
    """Feed frames; with `wait`, each frame's consequences finish before the next frame comes."""
    for kind in script:
        await rig.loop.on_frame(rig.frame(kind))
        if wait:
            await settle(rig)


# -- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("start", [5.0, 1000.0, 2_000_000.0])
def test_wake_question_reply_and_follow_up(start):
    """Whatever the clock reads (a machine up minutes or weeks), a turn's timings are sane."""
    rig = make_rig(start)

    async def scenario():
        await run_loop(rig, quiet(0.4) + [WAKE] + say(0) + quiet(0.8))
        assert rig.loop.state == d.FOLLOW_UP
        timings = dict(rig.loop.turns.last_finished.timings())
        await run_loop(rig, quiet(0.3) + say(1) + quiet(0.8))
        assert rig.loop.state == d.FOLLOW_UP
        await run_loop(rig, quiet(2.5))
        assert rig.loop.state == d.IDLE
        return timings

    timings = asyncio.run(scenario())
    assert rig.model.questions == [PHRASES[0], PHRASES[1]]
    assert [(m.role, m.content) for m in rig.store.messages] == [
        (ChatRole.USER, PHRASES[0]), (ChatRole.ASSISTANT, "Paris is the capital. It is lovely."),
        (ChatRole.USER, PHRASES[1]), (ChatRole.ASSISTANT, "Paris is the capital. It is lovely.")]
    assert rig.synthesizer.said == ["Paris is the capital.", "It is lovely."] * 2
    assert len(rig.player.played) == 4
    assert rig.loop.counters.wakes == 1 and rig.loop.counters.turns == 2
    # Speech ended; the speculative transcript came 200 ms into the silence (the third frame),
    # then 600 ms of silence ended the utterance; with work taking no time on this clock, the
    # first audio comes exactly then.
    assert timings["speech_end_to_transcript"] == pytest.approx(0.24, abs=0.01)
    assert timings["speech_end_to_turn_end"] == pytest.approx(0.64, abs=0.09)
    assert timings["speech_end_to_first_audio"] == pytest.approx(0.64, abs=0.09)
    assert all(v is not None and v >= 0 for v in timings.values()), timings
    assert rig.states[:5] == [d.LISTENING, d.TRANSCRIBING, d.THINKING, d.SPEAKING, d.FOLLOW_UP]


def test_wake_word_mode_goes_back_to_idle_and_needs_the_wake_word_again():
    rig = make_rig(mode="wake_word")

    async def scenario():
        await run_loop(rig, [WAKE] + say(0) + quiet(0.8))
        assert rig.loop.state == d.IDLE
        await run_loop(rig, say(1) + quiet(0.8))  # no wake word: not heard
        assert rig.loop.state == d.IDLE

    asyncio.run(scenario())
    assert rig.model.questions == [PHRASES[0]]


@pytest.mark.parametrize("judge", [False, True])
@pytest.mark.parametrize("mode", ["continued", "wake_word"])
def test_the_wake_phrase_alone_never_ends_a_turn(mode, judge):
    """ "Hey Jarvis", a pause, then the question (after the wake word, or to open a follow-up):
    the question is what reaches the model."""
    rig = make_rig(mode=mode, judge=judge, speculate=judge)

    async def scenario():
        await run_loop(rig, [WAKE] + say(WAKE_PHRASE_ONLY, 0.6) + quiet(0.8))
        assert rig.loop.state == d.LISTENING  # still waiting for the question
        await run_loop(rig, quiet(0.4) + say(0) + quiet(0.8))
        if mode == "continued":  # in the follow-up window, without the detector firing
            assert rig.loop.state == d.FOLLOW_UP
            await run_loop(rig, quiet(0.2) + say(WAKE_PHRASE_ONLY, 0.6) + quiet(0.8))
            await run_loop(rig, quiet(0.4) + say(2) + quiet(0.8))
        else:
            await run_loop(rig, quiet(0.5) + [WAKE] + say(2) + quiet(0.8))

    asyncio.run(scenario())
    assert rig.model.questions == [PHRASES[0], PHRASES[2]]
    assert [m.content for m in rig.store.messages if m.role is ChatRole.USER] == [PHRASES[0], PHRASES[2]]
    assert rig.loop.counters.rejected_utterances == 0


def test_nothing_said_after_the_wake_word_sends_nothing():
    rig = make_rig()
    asyncio.run(run_loop(rig, [WAKE] + quiet(6)))
    assert rig.loop.state == d.IDLE and rig.loop.counters.no_speech == 1
    assert rig.model.questions == [] and rig.store.messages == []


def test_barge_in_cancels_the_reply_and_starts_listening():
    rig = make_rig(barge_in=True)

    async def scenario():
        rig.player.hold = asyncio.Event()  # the first clip is still playing
        await run_loop(rig, [WAKE] + say(0) + quiet(0.7), wait=False)
        await until(rig, d.SPEAKING)
        await run_loop(rig, [WAKE], wait=False)
        assert rig.loop.state == d.LISTENING
        await asyncio.sleep(0.01)
        rig.player.hold.set()
        rig.player.hold = None
        await settle(rig)
        await run_loop(rig, say(2) + quiet(0.8))

    asyncio.run(scenario())
    assert rig.player.stops >= 1
    assert rig.model.questions == [PHRASES[0], PHRASES[2]]
    assert [m.content for m in rig.store.messages if m.role is ChatRole.USER] == [PHRASES[0], PHRASES[2]]
    # the engine was told which frames came over her voice: the second wake, not the first
    during_playback = rig.wake.heard_over_playback
    assert during_playback[0] is False and during_playback[-1] is True


def test_a_late_transcript_of_a_cancelled_turn_is_dropped():
    rig = make_rig()

    async def scenario():
        rig.transcriber.hold = threading.Event()
        await run_loop(rig, [WAKE] + say(0) + quiet(0.8), wait=False)
        assert rig.loop.state == d.TRANSCRIBING
        rig.loop.cancel()  # "stop": the turn is abandoned
        assert rig.loop.state == d.IDLE
        rig.transcriber.hold.set()  # ... and its transcript arrives afterwards
        await asyncio.sleep(0.05)
        rig.transcriber.hold = None
        await run_loop(rig, quiet(0.5) + [WAKE] + say(1) + quiet(0.8))

    asyncio.run(scenario())
    assert rig.model.questions == [PHRASES[1]]
    assert [m.content for m in rig.store.messages if m.role is ChatRole.USER] == [PHRASES[1]]


def test_a_speech_to_text_failure_is_a_failed_turn(caplog):
    rig = make_rig()
    rig.transcriber.fail = True
    asyncio.run(run_loop(rig, [WAKE] + say(0) + quiet(0.8)))
    assert rig.loop.state == d.IDLE and rig.loop.counters.failed_turns == 1
    assert "speech-to-text failed" in caplog.text
    assert rig.model.questions == []


def test_a_playback_failure_is_a_failed_turn_not_a_hang(caplog):
    rig = make_rig()
    rig.player.fail = True

    async def scenario():
        await run_loop(rig, [WAKE] + say(0) + quiet(0.8))
        assert rig.loop.state == d.IDLE
        rig.player.fail = False  # the speaker is back: the next turn works
        await run_loop(rig, quiet(0.5) + [WAKE] + say(1) + quiet(0.8))

    asyncio.run(scenario())
    assert rig.loop.counters.failed_turns == 1
    assert "could not be played" in caplog.text
    assert rig.loop.status()["counters"]["failed_turns"] == 1
    assert rig.model.questions == [PHRASES[0], PHRASES[1]]
    assert len(rig.player.played) == 2


def test_a_swap_waits_for_idle_and_never_changes_a_running_turn():
    rig = make_rig(mode="wake_word")
    new_synth, new_player, new_model = FakeSynthesizer("new"), FakePlayer(), FakeModel("Madrid.")

    async def scenario():
        rig.model.hold = asyncio.Event()
        await run_loop(rig, [WAKE] + say(0) + quiet(0.8), wait=False)
        await until(rig, d.THINKING)
        new_mic = FakeMicrophone()
        new = make_parts(mode="wake_word", synthesizer=new_synth, player=new_player, model=new_model,
                         store=rig.store, microphone=new_mic, clock=rig.clock)
        swapped = rig.loop.swap(new)
        await run_loop(rig, quiet(0.2), wait=False)
        assert not swapped.done() and rig.loop.parts is not new  # mid-turn: nothing changes
        rig.model.hold.set()
        await settle(rig)
        await run_loop(rig, quiet(0.5))
        assert swapped.done() and rig.loop.parts is new
        old = swapped.result()
        assert old.speech is not new.speech
        # The next turn runs entirely on the new parts.
        await run_loop(rig, [WAKE] + say(1) + quiet(0.8))
        return old

    asyncio.run(scenario())
    assert rig.synthesizer.said == ["Paris is the capital.", "It is lovely."]
    assert len(rig.player.played) == 2  # the whole first reply on the old speaker
    assert new_synth.said == ["Madrid."] and len(new_player.played) == 1
    assert rig.model.questions == [PHRASES[0]] and new_model.questions == [PHRASES[1]]


def test_run_reads_the_swapped_in_microphone():
    rig = make_rig()

    async def scenario():
        runner = asyncio.create_task(rig.loop.run())
        second = FakeMicrophone()
        for kind in quiet(0.24):
            rig.microphone.queue.put_nowait(rig.frame(kind))
        await asyncio.sleep(0.05)
        swapped = rig.loop.swap(replace(rig.loop.parts, microphone=second))
        assert swapped.done()  # idle: at once
        rig.microphone.queue.put_nowait(rig.frame(SILENCE))  # the old one's last frame
        for kind in [WAKE, *say(0), *quiet(0.8)]:
            second.queue.put_nowait(rig.frame(kind))
        for _ in range(500):
            if rig.model.questions and not rig.loop.busy:
                break
            await asyncio.sleep(0.002)
        second.queue.put_nowait(None)
        await asyncio.wait_for(runner, 5)

    asyncio.run(scenario())
    assert rig.model.questions == [PHRASES[0]]
    assert rig.loop.counters.frames == 3 + 1 + 1 + 15 + 10


def test_shutdown_lets_the_turn_in_flight_store_its_reply():
    rig = make_rig()

    async def scenario():
        await run_loop(rig, [WAKE] + say(0) + quiet(0.8), wait=False)
        await rig.loop.shutdown(grace=2)

    asyncio.run(scenario())
    assert [m.role for m in rig.store.messages] == [ChatRole.USER, ChatRole.ASSISTANT]
    assert rig.loop.state == d.IDLE


def test_status_reports_state_counters_and_the_last_turn():
    rig = make_rig()
    asyncio.run(run_loop(rig, [WAKE] + say(0) + quiet(0.8)))
    status = rig.loop.status()
    assert status["state"] == d.FOLLOW_UP
    assert status["counters"]["turns"] == 1 and status["counters"]["wakes"] == 1
    assert status["last_turn"]["speech_end_to_first_audio"] is not None


# -- the end of the turn judged, and the reply started ahead ------------------------------------


def stored(rig: Rig) -> list[tuple[ChatRole, str]]:
    """What the store holds, in order."""
    return [(m.role, m.content) for m in rig.store.messages]


def test_a_finished_question_is_answered_after_a_short_pause():
    rig = make_rig(judge=True, speculate=True)
    asyncio.run(run_loop(rig, [WAKE] + say(WHOLE) + quiet(0.8)))
    # judged finished when the transcript came (240 ms in: no time passes for the fakes here),
    # ended at 250 ms: the 4th silent frame, 320 ms
    assert rig.loop.turns.last_finished.judgment()["verdict"] == "finished"
    assert rig.loop.turns.last_finished.timings()["speech_end_to_first_audio"] == pytest.approx(0.32, abs=0.01)
    # the reply started ahead was the reply: the model was asked once
    assert rig.model.questions == [PHRASES[WHOLE]]
    assert stored(rig) == [(ChatRole.USER, PHRASES[WHOLE]),
                           (ChatRole.ASSISTANT, "Paris is the capital. It is lovely.")]
    assert len(rig.player.played) == 2 and rig.loop.counters.speculations_discarded == 0


@pytest.mark.parametrize("pause", [0.64, 0.96, 1.2, 1.6])
def test_a_hesitant_question_is_sent_whole(pause):
    """ "What is the capital of … Germany?": the unfinished words wait for the rest."""
    rig = make_rig(judge=True, speculate=True)
    asyncio.run(run_loop(rig, [WAKE] + say(UNFINISHED, 0.8) + quiet(pause) + say(WHOLE, 0.5)
                         + quiet(0.8)))
    assert rig.model.questions == [PHRASES[WHOLE]]
    assert stored(rig)[0] == (ChatRole.USER, PHRASES[WHOLE]) and len(stored(rig)) == 2
    assert rig.loop.counters.turns == 1


def test_without_the_judgment_the_same_pause_cuts_the_question():
    """What the judgment is for: EndSilenceMs alone ends the turn at the thinking pause."""
    rig = make_rig()
    asyncio.run(run_loop(rig, [WAKE] + say(UNFINISHED, 0.8) + quiet(0.96)))
    assert rig.model.questions == [PHRASES[UNFINISHED]]


def test_an_unfinished_pause_that_goes_on_ends_at_max_pause():
    rig = make_rig(judge=True, speculate=True)

    async def scenario():
        await run_loop(rig, [WAKE] + say(UNFINISHED, 0.8) + quiet(1.9))
        assert rig.loop.state == d.LISTENING and rig.model.questions == []
        await run_loop(rig, quiet(0.3))

    asyncio.run(scenario())
    assert rig.loop.turns.last_finished.judgment()["verdict"] == "unfinished"
    assert rig.model.questions == [PHRASES[UNFINISHED]]  # nothing came: the words are the turn


@pytest.mark.parametrize("held", [False, True])
def test_speech_resumed_after_a_speculation_leaves_no_trace(held):
    """Words that might be the whole question ("what is the capital of france", no full stop:
    undecided) start the reply ahead; the person goes on; it is dropped unheard and unstored."""
    rig = make_rig(judge=True, speculate=True)
    if held:
        rig.model.hold = asyncio.Event()  # the model still thinking when speech resumes

    async def scenario():
        await run_loop(rig, [WAKE] + say(0) + quiet(0.4), wait=False)
        for _ in range(50):  # let the reply started ahead get as far as it can
            await asyncio.sleep(0.001)
        assert rig.model.questions == [PHRASES[0]]  # it was started
        assert rig.player.played == [] and rig.store.messages == []
        if rig.model.hold is not None:
            rig.model.hold.set()
        await run_loop(rig, say(WHOLE, 0.5) + quiet(0.8))

    asyncio.run(scenario())
    assert rig.loop.counters.speculations_discarded == 1
    assert rig.loop.status()["counters"]["speculations_discarded"] == 1
    rig.wake.confirmations.update(asked=3, confirmed=2)
    assert rig.loop.status()["counters"]["wake_checks"] == 3
    assert rig.loop.status()["counters"]["wake_checks_confirmed"] == 2
    assert rig.model.questions == [PHRASES[0], PHRASES[WHOLE]]
    # nothing of the dropped reply was played or stored: one reply, in order user → assistant
    assert stored(rig) == [(ChatRole.USER, PHRASES[WHOLE]),
                           (ChatRole.ASSISTANT, "Paris is the capital. It is lovely.")]
    assert len(rig.player.played) == 2
    assert rig.loop.counters.turns == 1


def test_an_undecided_pause_ends_after_end_silence_with_the_reply_ready():
    rig = make_rig(judge=True, speculate=True)
    asyncio.run(run_loop(rig, [WAKE] + say(0) + quiet(0.8)))
    assert rig.loop.turns.last_finished.judgment()["verdict"] == "unknown"
    assert rig.loop.turns.last_finished.judgment()["end_after_ms"] == 600
    assert rig.model.questions == [PHRASES[0]]  # asked once, ahead, and adopted
    assert rig.loop.turns.last_finished.timings()["speech_end_to_first_audio"] == pytest.approx(0.64, abs=0.01)


def test_doubtful_words_are_read_again_and_the_second_reading_is_the_question():
    """ "what is the capital of france" (no full stop: undecided) is read again; the reply
    started on the first reading is dropped unheard and the second reading is answered."""
    reader = FakeReader({0: "What is the capital of France?"})
    rig = make_rig(judge=True, speculate=True, read_again=reader)
    rig.transcriber.logprob = -1.0  # Whisper unsure of its first reading
    asyncio.run(run_loop(rig, [WAKE] + say(0) + quiet(0.8)))
    assert reader.calls == 1 and rig.loop.turns.last_finished.judgment()["verdict"] == "unknown"
    assert rig.model.questions[-1] == "What is the capital of France?"
    assert stored(rig) == [(ChatRole.USER, "What is the capital of France?"),
                           (ChatRole.ASSISTANT, "Paris is the capital. It is lovely.")]
    assert len(rig.player.played) == 2 and rig.loop.counters.turns == 1
    assert rig.loop.counters.speculations_discarded == 1


def test_a_second_reading_the_models_find_less_likely_leaves_the_first(caplog):
    reader = FakeReader({0: "What is the capital of Prance?"})
    reader.logprob = -1.3
    rig = make_rig(judge=True, speculate=True, read_again=reader)
    rig.transcriber.logprob = -1.0  # unsure of its first reading, but less so than of the second
    with caplog.at_level("INFO"):
        asyncio.run(run_loop(rig, [WAKE] + say(0) + quiet(0.8)))
    assert reader.calls == 1 and rig.model.questions == [PHRASES[0]]  # asked once, ahead, and adopted
    assert rig.loop.counters.speculations_discarded == 0
    assert stored(rig)[0] == (ChatRole.USER, PHRASES[0])
    assert "the first reading stands" in caplog.text


def test_a_second_reading_that_agrees_keeps_the_reply_started_ahead():
    reader = FakeReader()
    rig = make_rig(judge=True, speculate=True, read_again=reader)
    rig.transcriber.logprob = -1.0  # Whisper unsure of its first reading
    asyncio.run(run_loop(rig, [WAKE] + say(0) + quiet(0.8)))
    assert reader.calls == 1
    assert rig.model.questions == [PHRASES[0]]  # asked once, ahead, and adopted
    assert rig.loop.counters.speculations_discarded == 0
    assert rig.loop.turns.last_finished.timings()["speech_end_to_first_audio"] == pytest.approx(0.64, abs=0.01)


def test_doubtful_words_whisper_is_fairly_sure_of_are_not_read_again():
    reader = FakeReader({0: "something else", WHOLE: "something else"})
    rig = make_rig(judge=True, speculate=True, read_again=reader)
    rig.transcriber.logprob = -0.5
    asyncio.run(run_loop(rig, [WAKE] + say(0) + quiet(0.8)))
    assert rig.loop.turns.last_finished.judgment()["verdict"] == "unknown"
    assert reader.calls == 0 and rig.model.questions == [PHRASES[0]]


def test_words_the_judgment_is_sure_of_are_not_read_again():
    reader = FakeReader({0: "something else", WHOLE: "something else"})
    rig = make_rig(judge=True, speculate=True, read_again=reader)
    asyncio.run(run_loop(rig, [WAKE] + say(WHOLE) + quiet(0.8)))
    assert reader.calls == 0 and rig.model.questions == [PHRASES[WHOLE]]


def test_unfinished_words_read_again_still_wait_for_the_rest():
    """ "What is the capital of … Germany?": the second reading of the first part changes
    nothing; the question is sent whole."""
    reader = FakeReader()
    rig = make_rig(judge=True, speculate=True, read_again=reader)
    rig.transcriber.logprob = -1.0  # Whisper unsure of its first reading
    asyncio.run(run_loop(rig, [WAKE] + say(UNFINISHED, 0.8) + quiet(1.2) + say(WHOLE, 0.5) + quiet(0.8)))
    assert reader.calls == 2 and rig.model.questions == [PHRASES[WHOLE]]  # each pause's words
    assert stored(rig)[0] == (ChatRole.USER, PHRASES[WHOLE])


def test_a_second_reading_that_hears_no_question_leaves_the_first():
    reader = FakeReader({0: "you"})  # a phantom, or nothing: not a question
    rig = make_rig(judge=True, speculate=True, read_again=reader)
    rig.transcriber.logprob = -1.0  # Whisper unsure of its first reading
    asyncio.run(run_loop(rig, [WAKE] + say(0) + quiet(0.8)))
    assert reader.calls == 1 and rig.model.questions == [PHRASES[0]]
    assert stored(rig)[0] == (ChatRole.USER, PHRASES[0]) and rig.loop.counters.rejected_utterances == 0


def test_a_failing_second_reading_leaves_the_first(caplog):
    reader = FakeReader({0: "never heard"})
    reader.fail = True
    rig = make_rig(judge=True, speculate=True, read_again=reader)
    rig.transcriber.logprob = -1.0  # Whisper unsure of its first reading
    with caplog.at_level("WARNING"):
        asyncio.run(run_loop(rig, [WAKE] + say(0) + quiet(0.8)))
    assert rig.model.questions == [PHRASES[0]] and rig.loop.counters.failed_turns == 0
    assert "the first reading stands" in caplog.text and "out of memory" in caplog.text


def test_speech_resumed_while_the_words_are_read_again_leaves_no_trace():
    reader = FakeReader({0: "What is the capital of France?"})
    reader.hold = threading.Event()
    rig = make_rig(judge=True, speculate=True, read_again=reader)
    rig.transcriber.logprob = -1.0  # Whisper unsure of its first reading

    async def scenario():
        await run_loop(rig, [WAKE] + say(0) + quiet(0.4), wait=False)
        for _ in range(50):
            await asyncio.sleep(0.001)
        assert reader.calls == 1 and rig.loop.state == d.LISTENING
        await run_loop(rig, say(WHOLE, 0.5), wait=False)  # the person goes on
        reader.hold.set()
        await run_loop(rig, quiet(0.8))

    asyncio.run(scenario())
    assert rig.model.questions[-1] == PHRASES[WHOLE]
    assert stored(rig) == [(ChatRole.USER, PHRASES[WHOLE]),
                           (ChatRole.ASSISTANT, "Paris is the capital. It is lovely.")]
    assert len(rig.player.played) == 2 and rig.loop.counters.turns == 1


def test_a_failed_speculative_transcript_falls_back_to_end_silence(caplog):
    rig = make_rig(judge=True, speculate=True)
    rig.transcriber.fail = True
    asyncio.run(run_loop(rig, [WAKE] + say(WHOLE) + quiet(0.8)))
    assert rig.loop.counters.failed_turns == 1 and rig.loop.state == d.IDLE
    assert rig.model.questions == [] and rig.store.messages == []


def test_a_finished_pause_lasts_until_the_reply_could_be_heard():
    """Judged finished, but the reply's first audio isn't ready yet: the person who goes on
    speaking in that time is not cut off (a pause after a whole clause, "How far is it from
    Paris … to Berlin?")."""
    rig = make_rig(judge=True, speculate=True)
    rig.synthesizer.hold = threading.Event()  # synthesis still busy

    async def scenario():
        await run_loop(rig, [WAKE] + say(FINISHED), wait=False)
        await run_loop(rig, quiet(0.8), wait=False)  # 800 ms: judged finished, audio not ready
        for _ in range(20):
            await asyncio.sleep(0.001)
        assert rig.loop.state == d.LISTENING
        await run_loop(rig, say(WHOLE, 0.5), wait=False)  # the person goes on
        rig.synthesizer.hold.set()
        await settle(rig)
        await run_loop(rig, quiet(0.8))

    asyncio.run(scenario())
    assert rig.loop.counters.speculations_discarded == 1
    assert stored(rig) == [(ChatRole.USER, PHRASES[WHOLE]),
                           (ChatRole.ASSISTANT, "Paris is the capital. It is lovely.")]
    assert len(rig.player.played) == 2


def test_a_held_reply_is_synthesized_but_not_played_until_released():
    async def scenario():
        synthesizer, player = FakeSynthesizer(), FakePlayer()
        sink = SpeechSink(synthesizer, player)
        sink.hold()
        await sink.say("Paris is the capital.")
        await asyncio.wait_for(sink.audio_ready(), 2)  # synthesized …
        await asyncio.sleep(0.01)
        assert synthesizer.said == ["Paris is the capital."] and player.played == []  # … unheard
        sink.release()
        await sink.finish()
        assert len(player.played) == 1 and not sink.held

        sink.hold()
        await sink.say("Dropped unheard.")
        await sink.stop()
        assert len(player.played) == 1 and not sink.held  # stop() drops the held audio
        await asyncio.wait_for(sink.audio_ready(), 1)  # no reply under way: nothing to wait for
        sink.hold()
        waiter = asyncio.create_task(sink.audio_ready())  # a held reply, nothing said yet: waits …
        await asyncio.sleep(0.01)
        assert not waiter.done()
        await sink.stop()  # … until this reply is stopped
        await asyncio.wait_for(waiter, 1)

    asyncio.run(scenario())


# -- announcements -----------------------------------------------------------------------------


def announcing_rig(**options: object) -> tuple[Rig, Announcer, list[tuple[str, str]]]:
    """A rig whose loop announces; the announcer's hooks are recorded."""
    events: list[tuple[str, str]] = []
    announcer = Announcer(on_heard=lambda a: events.append(("heard", a.text)),
                          on_over=lambda a, why: events.append((why, a.text)))
    return make_rig(announcer=announcer, **options), announcer, events


def test_an_announcement_waits_for_the_turn_then_chimes_and_speaks():
    rig, announcer, events = announcing_rig(mode="wake_word")

    async def scenario():
        rig.model.hold = asyncio.Event()
        await run_loop(rig, [WAKE] + say(0) + quiet(0.8), wait=False)
        await until(rig, d.THINKING)
        announcer.post(Announcement("Your pasta timer is done.", "timer"))
        await run_loop(rig, quiet(0.3), wait=False)
        assert rig.loop.state == d.THINKING and rig.synthesizer.said == []  # never over a turn
        rig.model.hold.set()
        await settle(rig)
        await run_loop(rig, quiet(0.3))

    asyncio.run(scenario())
    assert rig.synthesizer.said == ["Paris is the capital.", "It is lovely.", "Your pasta timer is done."]
    chime_clip = rig.player.played[2]
    assert chime_clip.sample_rate == FakeSynthesizer.sample_rate and 0.5 < chime_clip.duration < 1.0
    assert d.ANNOUNCING in rig.states and rig.loop.state == d.IDLE
    assert events == [("heard", "Your pasta timer is done."), ("said", "Your pasta timer is done.")]
    assert not announcer.pending


def test_a_ringing_timer_repeats_until_ring_seconds_and_its_own_voice_never_wakes_her():
    rig, announcer, events = announcing_rig(mode="wake_word")
    rig.loop.parts = replace(rig.loop.parts, ring_seconds=8.0)

    async def scenario():
        announcer.post(Announcement("Your tea timer is done.", "timer", rings=True, timer_id="t1"))
        await run_loop(rig, [SILENCE])
        await run_loop(rig, [WAKE])  # just after it spoke: its own echo, muted
        assert rig.loop.state == d.IDLE and rig.loop.counters.wakes == 0
        await run_loop(rig, quiet(12.0))

    asyncio.run(scenario())
    # heard at once, then RING_GAP_SECONDS after each (to the next frame), none starting after 8 s
    assert RING_GAP_SECONDS == 3.0
    assert rig.synthesizer.said.count("Your tea timer is done.") == 3
    assert events[0] == ("heard", "Your tea timer is done.") and events[-1] == ("rang out", "Your tea timer is done.")
    assert not announcer.pending


def test_the_wake_word_then_stop_ends_the_ringing_without_the_model(tmp_path):
    rig, announcer, events = announcing_rig(mode="wake_word")
    orchestrator = rig.loop.parts.orchestrator
    assert isinstance(orchestrator, Orchestrator)
    orchestrator.commands = LocalCommands(TimerBook(ConversationStore(tmp_path, "k")), max_seconds=86400,
                                          announcer=announcer)

    async def scenario():
        announcer.post(Announcement("Your tea timer is done.", "timer", rings=True, timer_id="t1"))
        await run_loop(rig, quiet(1.0))
        assert announcer.ringing
        await run_loop(rig, [WAKE] + say(STOP, 0.5) + quiet(0.8))
        await run_loop(rig, quiet(8.0))

    asyncio.run(scenario())
    assert rig.model.questions == []
    assert rig.synthesizer.said == ["Your tea timer is done."]
    assert events == [("heard", "Your tea timer is done."), ("stopped", "Your tea timer is done.")]
    assert rig.store.messages == []  # a "stop" is no conversation


def test_an_announcement_the_speaker_cannot_play_is_tried_again_until_heard(caplog):
    rig, announcer, events = announcing_rig(mode="wake_word")
    rig.player.fail = True

    async def scenario():
        announcer.post(Announcement("Your eggs timer is done.", "timer", rings=True, timer_id="t2"))
        await run_loop(rig, quiet(RETRY_SECONDS * 2 + 1))
        assert events == [] and announcer.counters.playback_failures >= 2
        rig.player.fail = False  # the speaker is back
        await run_loop(rig, quiet(RETRY_SECONDS + 1))

    asyncio.run(scenario())
    assert events[0] == ("heard", "Your eggs timer is done.")
    assert caplog.text.count("could not play the timer announcement") == 1


def test_a_reply_cut_by_barge_in_is_stored_as_far_as_it_was_heard():
    rig = make_rig(barge_in=True)

    async def scenario():
        rig.player.hold = asyncio.Event()  # the first sentence is playing …
        await run_loop(rig, [WAKE] + say(0) + quiet(0.7), wait=False)
        await until(rig, d.SPEAKING)
        await run_loop(rig, [WAKE], wait=False)  # … 80 ms into its 100 ms: the wake word cuts it
        rig.player.hold.set()
        rig.player.hold = None
        await settle(rig)

    asyncio.run(scenario())
    stored = [(m.role, m.content, dict(m.metadata)) for m in rig.store.messages]
    assert stored[0][:2] == (ChatRole.USER, PHRASES[0])
    role, content, metadata = stored[1]
    assert role is ChatRole.ASSISTANT and metadata.get("interrupted") == "true"
    assert content == "Paris is the …"  # never the whole reply the user didn't hear
    assert len(stored) == 2


# -- echo cancellation: the barge-in decision in the loop ---------------------------------------


class PassCanceller:
    """Leaves the microphone as it is (the test decides how loud the user is over her)."""

    stream_delay_ms = 0

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        return near

    def reset(self) -> None:
        pass


class LoudSynthesizer(FakeSynthesizer):
    """`seconds` (a second) of her voice per sentence, at RMS 3000."""

    seconds = 1.0

    def synthesize(self, text: str) -> AudioClip:
        self.said.append(text)
        return AudioClip(np.full(round(self.sample_rate * self.seconds), 3000, dtype=np.int16),
                         self.sample_rate)


class RecordingPlayer(FakePlayer):
    """Writes what it plays into the playback history, heard at the rig's clock."""

    def __init__(self, history: PlaybackHistory, clock: Clock) -> None:
        super().__init__()
        self.history, self.clock = history, clock

    async def play(self, clip: AudioClip) -> bool:
        self.history.write(self.clock.now, clip.samples, clip.sample_rate)
        return await super().play(clip)


class HeardEchoFilter(EchoFilter):
    """An echo filter on a microphone that hears her voice: the frames the tests make stand for
    her echo, with whatever is said over it (they are not her voice, so the filter can't tell)."""

    def could_be_her(self, frames: int) -> bool:
        return True


def echo_rig(*, mic_hears_her: bool = True, speaker_tail_ms: int = 400, **options: object) -> Rig:
    clock = Clock(1000.0)
    history = PlaybackHistory()
    synthesizer, player = LoudSynthesizer(), RecordingPlayer(history, clock)
    model, store, microphone = FakeModel(), ListStore(), FakeMicrophone()
    echo = (HeardEchoFilter if mic_hears_her else EchoFilter)(PassCanceller(), history)
    parts = replace(make_parts(synthesizer=synthesizer, player=player, model=model, store=store,
                               microphone=microphone, clock=clock, barge_in=True,
                               **options),  # type: ignore[arg-type]
                    echo=echo, speaker_tail_ms=speaker_tail_ms)
    loop = VoiceLoop(parts, clock=clock)
    return Rig(loop, clock, parts.wake, parts.transcriber, synthesizer, player, model,  # type: ignore[arg-type]
               store, microphone)


def wake_frame(rig: Rig, loudness: int) -> AudioFrame:
    samples = np.full(FRAME_SAMPLES, loudness, dtype=np.int16)
    samples[0] = WAKE
    rig.clock.now += FRAME
    return AudioFrame(samples, rig.clock.now)


async def wake_over_her(rig: Rig, loudness: int) -> str:
    """The wake word `loudness` loud while her first sentence plays; the state right after it."""
    rig.player.hold = asyncio.Event()
    await run_loop(rig, [WAKE] + say(0) + quiet(0.7), wait=False)
    await until(rig, d.SPEAKING)
    await rig.loop.on_frame(wake_frame(rig, loudness))
    state = rig.loop.state
    rig.player.hold.set()
    rig.player.hold = None
    await settle(rig)
    return state


@pytest.mark.parametrize("loudness, barged", [(0, False), (9000, True)])
def test_a_wake_word_over_her_reply_counts_only_when_the_user_is_louder_than_her_echo(loudness, barged):
    rig = echo_rig()

    state = asyncio.run(wake_over_her(rig, loudness))
    counters = rig.loop.status()["counters"]
    assert state == (d.LISTENING if barged else d.SPEAKING)
    assert counters["barge_ins"] == int(barged) and counters["self_wakes_suppressed"] == int(not barged)


class CuttingPlayer(FakePlayer):
    """Like the real speaker: a clip cut by stop() returns False instead of raising."""

    def __init__(self) -> None:
        super().__init__()
        self._cut = asyncio.Event()

    async def play(self, clip: AudioClip) -> bool:
        self.played.append(clip)
        try:
            await asyncio.wait_for(self._cut.wait(), 0.05)
        except TimeoutError:
            return True
        except asyncio.CancelledError:
            if self._cut.is_set():
                return False  # the speaker answers the cut: the caller's cancellation is swallowed
            raise
        return False

    async def stop(self) -> None:
        self.stops += 1
        self._cut.set()


def test_a_stopped_reply_plays_nothing_more_even_when_the_speaker_swallows_the_cancel():
    async def scenario():
        player = CuttingPlayer()
        sink = SpeechSink(FakeSynthesizer(), player)
        for sentence in ("One.", "Two.", "Three.", "Four."):
            await sink.say(sentence)
        await asyncio.sleep(0.07)  # the first clip played; the second is playing
        await asyncio.wait_for(sink.stop(), 1.0)  # returns at once, not after the whole reply
        await asyncio.sleep(0.2)
        return player, sink

    player, sink = asyncio.run(scenario())
    assert len(player.played) == 2
    assert sink.heard_text().startswith("One.")


# -- "stop" without the wake word -------------------------------------------------------------


def phrase_frame(rig: Rig, phrase: int, loudness: int) -> AudioFrame:
    """A frame of the n-th phrase said `loudness` loud (RMS ≈ loudness / √2) over her voice."""
    samples = np.full(FRAME_SAMPLES, SPEECH + phrase, dtype=np.int16)
    samples[1::2] = -loudness
    rig.clock.now += FRAME
    return AudioFrame(samples, rig.clock.now)


#: a person speaking over her: RMS ≈ 14 000, 13 dB above her voice (3000) with nothing cancelled,
#: over the margin speech over her must clear (SPEECH_OVER_PLAYBACK_MARGIN_DB)
OVER_HER = 20_000


def stop_rig(reply: str = "Paris is the capital. It is lovely.") -> Rig:
    rig = echo_rig()
    rig.loop.parts = replace(rig.loop.parts, stop_words=True)
    rig.model.reply = reply
    return rig


async def speak_over_her(rig: Rig, phrase: int, loudness: int, seconds: float = 0.4, after: float = 0.0) -> str:
    """While her first sentence plays (`after` seconds into it, the microphone silent until then):
    the phrase, then a silent frame; the state after the check."""
    rig.player.hold = asyncio.Event()
    await run_loop(rig, [WAKE] + say(0) + quiet(0.7), wait=False)
    await until(rig, d.SPEAKING)
    for _ in range(round(after / FRAME)):
        await rig.loop.on_frame(rig.frame(SILENCE))
    for _ in range(round(seconds / FRAME)):
        await rig.loop.on_frame(phrase_frame(rig, phrase, loudness))
    await rig.loop.on_frame(rig.frame(SILENCE))
    for _ in range(500):
        if rig.loop.stop_listener.check is not None and rig.loop.stop_listener.check.done():
            break
        await asyncio.sleep(0.001)
    state = rig.loop.state
    rig.player.hold.set()
    rig.player.hold = None
    await settle(rig)
    return state


@pytest.mark.parametrize("phrase, state", [(STOP, d.IDLE), (WAKE_PHRASE_ONLY, d.LISTENING)])
def test_over_her_voice_a_microphone_that_does_not_hear_her_hears_only_the_person(phrase, state):
    """A headset: nothing of her voice in the microphone while she speaks, from her first reply
    on (before anything was measured). "Stop." or the wake phrase said over her, not as loud as she
    plays, is the person's (in an acceptance run both were put down to her own voice, and a
    timer rang on)."""
    rig = stop_rig()
    rig.loop.parts = replace(rig.loop.parts, echo=EchoFilter(PassCanceller(), rig.loop.parts.echo.history))
    assert asyncio.run(speak_over_her(rig, phrase, loudness=2000, after=0.64)) == state
    counters = rig.loop.status()["counters"]
    assert (counters["stops"], counters["barge_ins"]) == ((1, 0) if phrase == STOP else (0, 1))
    assert counters["self_stops_suppressed"] == counters["self_wakes_suppressed"] == 0


def test_the_wake_phrase_read_over_her_is_in_the_utterance_whole():
    """The "stop" reader reads the wake phrase once it is over, and may cut it short of its
    tail: the listening that follows begins with all it read (else the tail, alone, was once read
    as "sharps" and asked), not just the pre-roll."""
    rig = stop_rig()
    assert asyncio.run(speak_over_her(rig, WAKE_PHRASE_ONLY, loudness=OVER_HER, seconds=0.8)) == d.LISTENING
    said = [f for f in rig.loop.utterance.frames if int(f.samples[0]) == SPEECH + WAKE_PHRASE_ONLY]
    assert len(said) == round(0.8 / FRAME)


def test_stop_said_over_her_reply_silences_it_without_a_turn():
    rig = stop_rig()
    state = asyncio.run(speak_over_her(rig, STOP, loudness=OVER_HER))
    counters = rig.loop.status()["counters"]
    assert state == d.IDLE  # not listening, not following up: she was told to stop
    assert counters["stops"] == 1 and counters["stop_checks"] == 1 and counters["wakes"] == 1
    assert rig.model.questions == [PHRASES[0]]  # nothing more went to the model
    stored = [(m.role, dict(m.metadata).get("interrupted")) for m in rig.store.messages]
    assert stored == [(ChatRole.USER, None), (ChatRole.ASSISTANT, "true")]
    assert len(rig.player.played) == 1  # the rest was never heard


def test_a_stop_her_own_voice_could_explain_is_ignored():
    rig = stop_rig()
    state = asyncio.run(speak_over_her(rig, STOP, loudness=0))  # as quiet as what is left of her
    counters = rig.loop.status()["counters"]
    # Speech no louder than what cancelling leaves of her voice is not even checked.
    assert state == d.SPEAKING and counters["stops"] == 0 and counters["stop_checks"] == 0
    assert rig.synthesizer.said == ["Paris is the capital.", "It is lovely."]


def test_her_own_stop_heard_back_is_never_taken_for_the_user():
    rig = stop_rig(reply="Stop. Paris is the capital.")
    state = asyncio.run(speak_over_her(rig, STOP, loudness=OVER_HER))
    assert state == d.SPEAKING and rig.loop.counters.stops == 0


def test_other_words_over_her_reply_change_nothing():
    rig = stop_rig()
    state = asyncio.run(speak_over_her(rig, FINISHED, loudness=OVER_HER))  # "Tell me a joke."
    assert state == d.SPEAKING and rig.loop.counters.stops == 0 and rig.loop.counters.stop_checks == 1
    assert rig.model.questions == [PHRASES[0]] and not rig.player.paused  # she went on


def test_she_pauses_while_words_over_her_are_checked():
    rig = stop_rig()
    seen: list[bool] = []

    async def scenario():
        rig.player.hold = asyncio.Event()
        await run_loop(rig, [WAKE] + say(0) + quiet(0.7), wait=False)
        await until(rig, d.SPEAKING)
        rig.transcriber.hold = threading.Event()  # the check over her voice waits
        for _ in range(5):
            await rig.loop.on_frame(phrase_frame(rig, FINISHED, OVER_HER))
        await rig.loop.on_frame(rig.frame(SILENCE))
        seen.append(rig.player.paused)  # silent while the words are checked
        rig.transcriber.hold.set()
        await asyncio.sleep(0.05)
        seen.append(rig.player.paused)  # not "stop": she goes on
        rig.player.hold.set()
        rig.player.hold = None
        await settle(rig)

    asyncio.run(scenario())
    assert seen == [True, False]


def test_a_long_stretch_of_speech_over_her_is_not_checked():
    rig = stop_rig()
    state = asyncio.run(speak_over_her(rig, STOP, loudness=OVER_HER, seconds=2.5))
    assert state == d.SPEAKING and rig.loop.counters.stop_checks == 0


def test_stop_over_her_is_read_by_the_stop_reader_when_there_is_one():
    """The daemon reads "stop" over her without noise suppression (`listening.stop_reader`): the
    question's transcriber never sees that audio."""
    rig = stop_rig()
    reader = FakeTranscriber()
    rig.loop.parts = replace(rig.loop.parts, stop_reader=reader)
    question_calls = rig.loop.parts.transcriber.calls
    state = asyncio.run(speak_over_her(rig, STOP, loudness=OVER_HER))
    assert state == d.IDLE and rig.loop.status()["counters"]["stops"] == 1
    assert reader.calls == 1 and reader.phrases == [[STOP]]
    assert rig.loop.parts.transcriber.calls == question_calls + 1  # the question alone, before her reply


def test_the_wake_phrase_over_her_read_by_the_stop_reader_wakes_her_at_once():
    """She is silent while the words over her are read; read as the wake phrase alone ("Hey,
    Jervis."), they start the turn then, not when the wake word's own check is done."""
    rig = stop_rig()
    state = asyncio.run(speak_over_her(rig, WAKE_PHRASE_ONLY, loudness=OVER_HER))
    counters = rig.loop.status()["counters"]
    assert state == d.LISTENING
    assert counters["wakes"] == 2 and counters["barge_ins"] == 1 and counters["stops"] == 0
    assert len(rig.player.played) == 1  # the rest of her reply was never heard


def test_after_a_wake_over_her_the_wake_word_engine_starts_afresh():
    """The phrase the "stop" reader heard is still in the wake word engine's window: the next
    time it scores (over her next reply), it must not wake her with it again."""
    rig = stop_rig()

    async def scenario():
        assert await speak_over_her(rig, WAKE_PHRASE_ONLY, loudness=OVER_HER) == d.LISTENING
        fed = len(rig.wake.fresh)
        rig.player.hold = asyncio.Event()
        await run_loop(rig, say(1) + quiet(0.7), wait=False)
        await until(rig, d.SPEAKING)
        await rig.loop.on_frame(rig.frame(SILENCE))
        rig.player.hold.set()
        rig.player.hold = None
        await settle(rig)
        return fed

    fed = asyncio.run(scenario())
    assert len(rig.wake.fresh) > fed and rig.wake.fresh[fed] is True


@pytest.mark.parametrize("reply, loudness, barge_in", [
    ("Jarvis is my name. It is lovely.", OVER_HER, True),  # she just said it herself
    ("Paris is the capital. It is lovely.", 0, True),  # no louder than what is left of her
    ("Paris is the capital. It is lovely.", OVER_HER, False),  # the wake word never cuts her
])
def test_the_wake_phrase_over_her_wakes_only_where_the_wake_word_would(reply, loudness, barge_in):
    rig = stop_rig(reply)
    rig.loop.parts = replace(rig.loop.parts, dialogue=d.Dialogue("continued", 2.0, barge_in=barge_in))
    state = asyncio.run(speak_over_her(rig, WAKE_PHRASE_ONLY, loudness=loudness))
    assert state == d.SPEAKING and rig.loop.counters.wakes == 1 and rig.loop.counters.barge_ins == 0


def test_a_wake_the_model_finds_after_the_stop_reader_woke_her_is_not_a_second_turn():
    rig = stop_rig()
    scoring, woken = threading.Event(), threading.Event()
    fired: list[bool] = []

    def process(frame: AudioFrame) -> WakeDetection | None:
        if frame.samples[0] != SILENCE or fired:
            return None
        fired.append(True)
        scoring.set()
        woken.wait(5)  # the model's own check of the phrase is still running
        return WakeDetection("hey_jarvis", 0.5, frame.captured_at)

    async def scenario():
        rig.player.hold = asyncio.Event()
        await run_loop(rig, [WAKE] + say(0) + quiet(0.7), wait=False)
        await until(rig, d.SPEAKING)
        rig.wake.process = process  # type: ignore[method-assign]
        rig.transcriber.hold = threading.Event()  # the stop reader waits
        for _ in range(5):
            await rig.loop.on_frame(phrase_frame(rig, WAKE_PHRASE_ONLY, OVER_HER))
        fired.append(True)  # the first silent frame starts the stop reader; the next one, the check
        await rig.loop.on_frame(rig.frame(SILENCE))
        fired.clear()
        next_frame = asyncio.ensure_future(rig.loop.on_frame(rig.frame(SILENCE)))
        await asyncio.to_thread(scoring.wait, 5)
        rig.transcriber.hold.set()  # the reader hears "Hey, Jervis." first
        await until(rig, d.LISTENING)
        resets = rig.wake.resets
        woken.set()
        await next_frame
        rig.player.hold.set()
        rig.player.hold = None
        return resets

    resets = asyncio.run(scenario())
    assert rig.loop.counters.wakes == 2 and rig.loop.counters.barge_ins == 1
    assert rig.loop.state == d.LISTENING
    assert rig.wake.resets == resets + 1  # its half-done check is forgotten


def test_stop_between_two_rings_ends_the_ringing_without_the_wake_word():
    rig, announcer, events = announcing_rig(mode="wake_word")
    rig.loop.parts = replace(rig.loop.parts, stop_words=True)  # no echo cancellation: between rings

    async def scenario():
        announcer.post(Announcement("Your tea timer is done.", "timer", rings=True, timer_id="t1"))
        await run_loop(rig, quiet(1.0))
        assert announcer.ringing and rig.loop.state == d.IDLE
        await run_loop(rig, say(STOP, 0.5) + quiet(0.3))
        await run_loop(rig, quiet(8.0))

    asyncio.run(scenario())
    assert events == [("heard", "Your tea timer is done."), ("stopped", "Your tea timer is done.")]
    assert rig.synthesizer.said == ["Your tea timer is done."]
    assert rig.loop.counters.stops == 1 and rig.loop.counters.wakes == 0
    assert rig.model.questions == [] and rig.store.messages == []


def test_the_wake_word_then_stop_ends_the_turn_at_once_and_opens_no_follow_up(tmp_path):
    rig = make_rig(judge=True, speculate=True)  # continued mode: a reply would open the window
    orchestrator = rig.loop.parts.orchestrator
    assert isinstance(orchestrator, Orchestrator)
    orchestrator.commands = LocalCommands(TimerBook(ConversationStore(tmp_path, "k")), max_seconds=86400)
    rig.loop.parts = replace(rig.loop.parts, is_command=lambda text: intents.match(text) is not None)

    async def scenario():
        await run_loop(rig, quiet(0.3) + [WAKE] + say(STOP, 0.5) + quiet(2.5))

    asyncio.run(scenario())
    timings = rig.loop.turns.last_finished.timings()
    # Judged finished after 250 ms; a reply with nothing to say has no audio to wait for.
    assert timings["speech_end_to_turn_end"] is not None and timings["speech_end_to_turn_end"] < 0.5, timings
    assert timings["speech_end_to_first_audio"] is None
    assert rig.loop.state == d.IDLE and d.FOLLOW_UP not in rig.states
    assert rig.model.questions == [] and rig.store.messages == []


def test_a_wake_word_just_after_she_said_it_herself_is_her_own():
    rig = echo_rig()
    rig.model.reply = "Jarvis is a name from the stories. It is lovely."

    state = asyncio.run(wake_over_her(rig, 9000))  # her first sentence says "Jarvis"; this is loud
    assert state == d.SPEAKING  # enough to be the user, but she just said the name herself
    assert rig.loop.counters.self_wakes_suppressed == 1 and rig.loop.counters.barge_ins == 0


# -- going on after the pause taken for the end ------------------------------------------------


async def until_settled(rig: Rig, limit: int = 100) -> None:
    """Feed silent frames until the loop's work is done (a turn is stored only as frames pass)."""
    for _ in range(limit):
        await rig.loop.on_frame(rig.frame(SILENCE))
        for _ in range(20):
            if rig.loop.settled:
                return
            await asyncio.sleep(0.001)
    raise AssertionError(f"the loop is still busy in {rig.loop.state}")


async def until_stored(rig: Rig, count: int, limit: int = 2000) -> None:
    """Wait, feeding nothing, until the store holds `count` records."""
    for _ in range(limit):
        if len(rig.store.messages) >= count:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"the store holds {len(rig.store.messages)} records, not {count}")


async def go_on_over_her(rig: Rig, loudness: int) -> str:
    """"Tell me a joke." taken for the whole turn; her reply playing, the person goes on, as loud
    as `loudness`, with "What is the capital of Germany?"; the state right after."""
    rig.player.hold = asyncio.Event()  # her first sentence is playing
    stored_before = len(rig.store.messages)
    await run_loop(rig, [WAKE] + say(FINISHED) + quiet(0.8), wait=False)
    await until(rig, d.SPEAKING)
    # the person may still go on, but the turn was judged over: their words are stored (by a
    # worker thread, so perhaps a moment after her reply began)
    await until_stored(rig, stored_before + 1)
    assert [m.content for m in rig.store.messages[stored_before:]] == [PHRASES[FINISHED]]
    for _ in range(4):
        await rig.loop.on_frame(phrase_frame(rig, WHOLE, loudness))
    state = rig.loop.state
    rig.player.hold.set()
    rig.player.hold = None
    await run_loop(rig, quiet(0.8), wait=False)
    await until_settled(rig)
    return state


def test_going_on_over_her_reply_drops_it_and_sends_the_question_whole():
    rig = echo_rig(judge=True, speculate=True, go_on_ms=1500)
    state = asyncio.run(go_on_over_her(rig, OVER_HER))
    counters = rig.loop.status()["counters"]
    assert state == d.LISTENING
    assert counters["went_on"] == 1 and counters["speculations_discarded"] == 1
    assert rig.model.questions == [PHRASES[FINISHED], PHRASES[WHOLE]]
    # the words before the pause are part of what Whisper heard the second time, and the pause
    # only as far as the words' tail and a frame (not a second of silence or of her echo)
    assert rig.transcriber.phrases[-1] == [FINISHED, WHOLE]
    words = FRAME * (1 + round(1.2 / FRAME) + 4)  # the wake word, the words, the words going on
    assert words < rig.transcriber.seconds[-1] < words + 0.5
    # the dropped reply left nothing stored; the words before the pause stay, marked superseded
    # by the whole question
    assert stored(rig) == [(ChatRole.USER, PHRASES[FINISHED]), (ChatRole.USER, PHRASES[WHOLE]),
                           (ChatRole.ASSISTANT, "Paris is the capital. It is lovely.")]
    assert [m.metadata.get("superseded") for m in rig.store.messages] == ["true", None, None]
    assert counters["turns"] == 1


def test_her_own_voice_in_the_moments_after_a_turn_is_not_the_person_going_on():
    rig = echo_rig(judge=True, speculate=True, go_on_ms=1500)
    state = asyncio.run(go_on_over_her(rig, 0))  # no louder than what cancelling leaves of her
    assert state == d.SPEAKING and rig.loop.counters.went_on == 0
    assert rig.model.questions == [PHRASES[FINISHED]]
    assert stored(rig) == [(ChatRole.USER, PHRASES[FINISHED]),
                           (ChatRole.ASSISTANT, "Paris is the capital. It is lovely.")]


def test_the_words_are_stored_when_the_turn_ends_and_the_reply_once_the_person_can_no_longer_go_on():
    rig = make_rig(judge=True, speculate=True, go_on_ms=1500)

    async def scenario():
        await run_loop(rig, [WAKE] + say(FINISHED) + quiet(0.8), wait=False)
        await until(rig, d.SPEAKING)
        for _ in range(4):  # 1.12 s after the end of speech: it may still be the same turn
            await rig.loop.on_frame(rig.frame(SILENCE))
            await asyncio.sleep(0.005)
        await until_stored(rig, 1)
        assert stored(rig) == [(ChatRole.USER, PHRASES[FINISHED])] and rig.loop.counters.turns == 0
        await until_settled(rig)

    asyncio.run(scenario())
    assert stored(rig) == [(ChatRole.USER, PHRASES[FINISHED]),
                           (ChatRole.ASSISTANT, "Paris is the capital. It is lovely.")]
    assert rig.loop.counters.turns == 1 and rig.loop.counters.went_on == 0


def test_without_echo_cancelling_the_person_goes_on_only_before_she_is_heard():
    rig = make_rig(judge=True, go_on_ms=1500)  # no reply ahead: the model is asked at the end
    rig.model.hold = asyncio.Event()

    async def scenario():
        await run_loop(rig, [WAKE] + say(FINISHED) + quiet(0.4), wait=False)
        await until(rig, d.THINKING)
        for _ in range(3):
            await rig.loop.on_frame(rig.frame(SPEECH + WHOLE))
        assert rig.loop.state == d.LISTENING  # nothing was heard yet: the same turn goes on
        rig.model.hold.set()
        await run_loop(rig, quiet(0.8), wait=False)
        await until(rig, d.SPEAKING)
        for _ in range(3):  # what the microphone hears now may be her own voice
            await rig.loop.on_frame(rig.frame(SPEECH + FINISHED))
        assert rig.loop.state == d.SPEAKING
        await until_settled(rig)

    asyncio.run(scenario())
    assert rig.loop.counters.went_on == 1
    assert stored(rig) == [(ChatRole.USER, PHRASES[FINISHED]), (ChatRole.USER, PHRASES[WHOLE]),
                           (ChatRole.ASSISTANT, "Paris is the capital. It is lovely.")]
    assert [m.metadata.get("superseded") for m in rig.store.messages] == ["true", None, None]


def test_just_after_a_gap_in_her_voice_what_the_microphone_hears_is_not_the_person_going_on():
    """The speaker ran dry and started a new timeline: for a while what cancelling leaves of her
    voice can be as loud as a person, so speech over her is taken as hers. She goes on."""
    rig = echo_rig(judge=True, speculate=True, go_on_ms=1500)
    assert rig.loop.parts.echo is not None
    rig.loop.parts.echo.history.moved_at = rig.clock.now + 1.0  # the gap, just as she starts
    state = asyncio.run(go_on_over_her(rig, OVER_HER))
    assert state == d.SPEAKING and rig.loop.counters.went_on == 0
    assert rig.model.questions == [PHRASES[FINISHED]]


def test_the_wake_word_over_her_in_those_moments_keeps_the_turn_it_cuts():
    rig = echo_rig(judge=True, speculate=True, go_on_ms=1500)

    async def scenario():
        rig.player.hold = asyncio.Event()
        await run_loop(rig, [WAKE] + say(FINISHED) + quiet(0.8), wait=False)
        await until(rig, d.SPEAKING)
        rig.clock.now += 0.5  # she has said a word or two (the frames may all be in before she began)
        await rig.loop.on_frame(wake_frame(rig, 9000))
        assert rig.loop.state == d.LISTENING
        rig.player.hold.set()
        rig.player.hold = None
        await until_settled(rig)

    asyncio.run(scenario())
    messages = [(m.role, m.content, dict(m.metadata).get("interrupted")) for m in rig.store.messages]
    assert messages[0] == (ChatRole.USER, PHRASES[FINISHED], None)
    assert messages[1][0] is ChatRole.ASSISTANT and messages[1][2] == "true"
    assert rig.loop.counters.went_on == 0


def test_her_last_words_still_in_the_microphone_as_the_follow_up_opens_are_no_question():
    """The follow-up opens as her reply ends, but her voice stays in the microphone for the
    speaker's tail: what cancelling leaves of her last words is not the person's. (In the soak
    her "I hope that it helps." was asked back, one turn in two hundred.)"""
    rig = echo_rig(speaker_tail_ms=2000)  # longer than all the frames fed after she began

    async def scenario():
        await run_loop(rig, [WAKE] + say(0) + quiet(0.8), wait=False)
        await until(rig, d.FOLLOW_UP)
        for _ in range(15):  # 0.3 s of her echo, as loud as she plays, inside the speaker's tail
            await rig.loop.on_frame(phrase_frame(rig, 1, 4200))
        await run_loop(rig, quiet(3.0))

    asyncio.run(scenario())
    assert rig.model.questions == [PHRASES[0]]
    assert rig.loop.state == d.IDLE


def test_where_the_microphone_does_not_hear_her_the_person_goes_on_at_any_loudness():
    """Once her voice was heard to leave nothing in the microphone (a headset, a far speaker),
    speech over her is the person's even as quiet as what she plays."""
    rig = echo_rig(judge=True, speculate=True, go_on_ms=1500)

    async def scenario():
        rig.synthesizer.seconds = 3.0  # the history holds one sentence: the fakes play at once
        await run_loop(rig, [WAKE] + say(0) + quiet(0.7), wait=False)
        await until_settled(rig)  # three seconds of her voice, none of it in the microphone
        await run_loop(rig, quiet(3.0), wait=False)
        rig.synthesizer.seconds = 1.0
        await until(rig, d.IDLE)
        assert rig.loop.parts.echo is not None and rig.loop.parts.echo.residual_ratio() == 0.0
        return await go_on_over_her(rig, 0)

    assert asyncio.run(scenario()) == d.LISTENING
    assert rig.loop.counters.went_on == 1
    assert stored(rig)[-2:] == [(ChatRole.USER, PHRASES[WHOLE]),
                                (ChatRole.ASSISTANT, "Paris is the capital. It is lovely.")]


# -- the turn's events -------------------------------------------------------------------------


def watched(rig: Rig) -> list[ev.TurnEvent]:
    """Every turn event the loop records from now on, as it records it."""
    seen: list[ev.TurnEvent] = []
    rig.loop.turns.observers.append(seen.append)
    return seen


def timeline(events: list[ev.TurnEvent], start: float = 1000.0) -> list[str]:
    """The events in the order they happened: kind, what matters of it, seconds from `start`."""
    def detail(event: ev.TurnEvent) -> str:
        if isinstance(event, ev.Dropped):
            return f"({event.why})"
        if isinstance(event, ev.PauseJudged):
            return f"({event.verdict}, ends after {event.end_after_ms} ms)"
        if isinstance(event, ev.Wake):
            return f"({event.name})"
        return ""

    return [f"{type(e).__name__}{detail(e)} {e.at - start:.2f}" for e in sorted(events, key=lambda e: e.at)]


def test_a_turn_s_events_from_the_wake_word_to_the_end_of_the_reply():
    rig = make_rig(mode="wake_word")
    seen = watched(rig)
    asyncio.run(run_loop(rig, [WAKE] + say(0) + quiet(0.8)))
    # the words read at the first pause (0.24 s into it) were the turn's; the pause ended at 0.64 s
    assert timeline(seen) == [
        "Wake(hey_jarvis) 0.08", "Listening 0.08", "SpeechStart 0.32", "SpeechEnd 1.28",
        "Transcribed 1.52", "TurnEnd 1.92", "Prompt 1.92", "Committed 1.92", "FirstToken 1.92",
        "FirstAudio 1.92", "Done 1.92"]
    assert rig.loop.turns.last_finished is not None and rig.loop.turns.last_finished.events == seen


def test_a_judged_turn_is_answered_ahead_and_its_reply_heard_when_the_pause_ends():
    rig = make_rig(judge=True, speculate=True)
    seen = watched(rig)
    asyncio.run(run_loop(rig, [WAKE] + say(WHOLE) + quiet(0.8)))
    assert timeline(seen) == [
        "Wake(hey_jarvis) 0.08", "Listening 0.08", "SpeechStart 0.32", "SpeechEnd 1.28",
        "PauseJudged(finished, ends after 250 ms) 1.52", "Prompt 1.52", "Transcribed 1.52",
        "FirstToken 1.52", "TurnEnd 1.60", "Committed 1.60", "FirstAudio 1.60", "Done 1.60",
        "Listening 1.60"]  # the follow-up's


def in_order(events: list[ev.TurnEvent], story: list[str]) -> bool:
    """Do the events tell `story` (kinds as `timeline` names them, without times), in that order,
    among others? For scenarios fed without waiting, where when work ends depends on threads."""
    told = iter(line.rsplit(" ", 1)[0] for line in timeline(events))
    return all(any(kind == line for line in told) for kind in story)


def test_going_on_over_her_reply_drops_it_and_the_same_turn_goes_on():
    rig = echo_rig(judge=True, speculate=True, go_on_ms=1500)
    seen = watched(rig)
    asyncio.run(go_on_over_her(rig, OVER_HER))
    assert in_order(seen, ["Wake(hey_jarvis)", "SpeechStart", "TurnEnd", "Dropped(the person went on)", "GoneOn",
                           "SpeechStart", "TurnEnd", "Committed"])
    assert sum(isinstance(e, ev.Committed) for e in seen) == 1
    assert sum(isinstance(e, ev.Done) for e in seen) == 1
    # one turn: what was measured of the words before the person went on no longer counts
    record = rig.loop.turns.last_finished
    assert record is not None and record.last(ev.SpeechEnd).at > record.first(ev.GoneOn).at


def test_a_wake_over_her_reply_cuts_it_and_begins_a_new_turn():
    rig = make_rig(barge_in=True)
    seen = watched(rig)

    async def scenario():
        rig.player.hold = asyncio.Event()  # the first clip is still playing
        await run_loop(rig, [WAKE] + say(0) + quiet(0.7), wait=False)
        await until(rig, d.SPEAKING)
        await run_loop(rig, [WAKE], wait=False)
        await asyncio.sleep(0.01)
        rig.player.hold.set()
        rig.player.hold = None
        await settle(rig)

    asyncio.run(scenario())
    assert in_order(seen, ["Wake(hey_jarvis)", "SpeechStart", "SpeechEnd", "TurnEnd", "Prompt", "Committed",
                           "Wake(hey_jarvis)", "Dropped(the reply was cut off)"])
    assert not any(isinstance(e, ev.Done) for e in seen)


@pytest.mark.parametrize(("script", "why"), [([WAKE] + quiet(6), "no speech"),
                                             ([WAKE] + say(WAKE_PHRASE_ONLY) + quiet(0.8), "only the wake word")])
def test_a_turn_without_a_question_is_dropped_and_says_why(script, why):
    rig = make_rig(mode="wake_word")
    seen = watched(rig)
    asyncio.run(run_loop(rig, script))
    assert [e.why for e in seen if isinstance(e, ev.Dropped)] == [why]
    assert not any(isinstance(e, ev.Prompt | ev.Done) for e in seen)
