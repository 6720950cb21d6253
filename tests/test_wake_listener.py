"""The wake listener on its own: a wake over her voice that the "stop" reader counted while the
listener weighed it is not counted twice; one both it and the reader heard is the person's."""

import asyncio
from types import SimpleNamespace

import numpy as np

from elara.audio.frames import FRAME_SAMPLES, AudioFrame
from elara.voice import dialogue as d
from elara.voice.barge_in import HEARD_TOGETHER_SECONDS
from elara.voice.parts import LoopCounters
from elara.voice.wake_listener import READER, WakeListener


class Engine:
    """A wake word engine that hears the wake phrase in every frame."""

    during_playback = False

    def __init__(self):
        self.resets = 0

    def process(self, frame):
        return SimpleNamespace(name="hey_jarvis", at=frame.captured_at, score=0.99)

    def reset(self):
        self.resets += 1


class Echo:
    """An echo filter where the person is far louder than her; `meanwhile` runs while the
    listener asks whether her voice could be in the microphone (in a worker thread)."""

    trusted_erle_db = 30.0

    def __init__(self, meanwhile):
        self.meanwhile = meanwhile

    def recent_levels(self, frames):
        return 9000.0, 1000.0

    def could_be_her(self, frames):
        self.meanwhile()
        return True


def feed(listener, engine, echo):
    parts = SimpleNamespace(echo=echo, wake=engine, speech=SimpleNamespace(recent_text=lambda seconds: ""))
    frame = AudioFrame(np.zeros(FRAME_SAMPLES, dtype=np.int16), 10.0)
    asyncio.run(listener.feed(frame, parts, speaking_until=0.0))


def test_a_wake_over_her_is_counted_once_when_the_stop_reader_counted_it_meanwhile():
    state = {"now": d.SPEAKING}
    woken = []
    counters = LoopCounters()
    listener = WakeListener(counters=counters, state=lambda: state["now"],
                            on_wake=lambda name, at, how: woken.append(name))

    def stop_reader_counts_it():  # the loop's `_on_wake` for the "stop" reader's reading
        counters.wakes += 1
        listener.wake_counted()
        state["now"] = d.LISTENING

    engine = Engine()
    feed(listener, engine, Echo(stop_reader_counts_it))
    assert woken == []
    state["now"] = d.SPEAKING  # her next reply: the next phrase over it counts
    feed(listener, engine, Echo(lambda: None))
    assert woken == ["hey_jarvis"] and engine.resets == 1


def test_a_wake_over_her_last_words_counts_though_she_finished_meanwhile():
    """She finished her reply (the dialogue re-armed the wake word) while the listener weighed the
    phrase said over her last words: it is the person's call all the same."""
    state = {"now": d.SPEAKING}
    woken = []
    listener = WakeListener(counters=LoopCounters(), state=lambda: state["now"],
                            on_wake=lambda name, at, how: woken.append(name))

    def she_finishes():
        listener.rearm()
        state["now"] = d.IDLE

    feed(listener, Engine(), Echo(she_finishes))
    assert woken == ["hey_jarvis"]


def test_a_wake_over_her_is_dropped_when_the_person_went_on_meanwhile():
    """The going-on window took speech over her reply for the person going on (the dialogue is
    listening) while the listener weighed a wake phrase: it begins no second turn."""
    state = {"now": d.SPEAKING}
    woken = []
    listener = WakeListener(counters=LoopCounters(), state=lambda: state["now"],
                            on_wake=lambda name, at, how: woken.append(name))
    feed(listener, Engine(), Echo(lambda: state.update(now=d.LISTENING)))
    assert woken == []


class HerEchoAsLoud(Echo):
    """An echo filter just after her echo path moved: cancelling may leave her voice as loud as the
    phrase heard (no ERLE trusted yet)."""

    trusted_erle_db = 0.0

    def __init__(self):
        super().__init__(lambda: None)

    def recent_levels(self, frames):
        return 3700.0, 7900.0


def heard_by_engine(listener, echo, played_words="Here is the eighth part of a long story."):
    parts = SimpleNamespace(echo=echo, wake=Engine(), speech=SimpleNamespace(recent_text=lambda seconds: played_words))
    asyncio.run(listener.feed(AudioFrame(np.zeros(FRAME_SAMPLES, dtype=np.int16), 10.0), parts, speaking_until=0.0))


def over_her():
    woken = []
    listener = WakeListener(counters=LoopCounters(), state=lambda: d.SPEAKING,
                            on_wake=lambda name, at, how: woken.append(name))
    return listener, woken


def test_a_wake_phrase_heard_by_both_ears_over_her_is_the_persons_however_loud_her_echo():
    """Just after her echo path moved, the level can't tell the phrase from her voice; but the
    wake word's engine and the "stop" reader both heard it, and she did not say it."""
    echo = HerEchoAsLoud()
    listener, woken = over_her()
    assert listener.explained("hey_jarvis", 3700.0, 7900.0, "Here is the eighth part.", echo, at=9.7, ear=READER)
    heard_by_engine(listener, echo)
    assert woken == ["hey_jarvis"]

    listener, woken = over_her()  # the other way round: the engine first, the reader after it
    heard_by_engine(listener, echo)
    assert woken == []
    assert not listener.explained("hey_jarvis", 3700.0, 7900.0, "Here is the eighth part.", echo,
                                  at=10.4, ear=READER)


def test_a_wake_phrase_heard_by_one_ear_or_said_by_her_stays_hers_over_her_echo():
    echo = HerEchoAsLoud()
    listener, woken = over_her()
    heard_by_engine(listener, echo)  # the engine alone
    assert woken == []

    listener, woken = over_her()  # the reader heard it seconds before: another utterance
    assert listener.explained("hey_jarvis", 3700.0, 7900.0, "", echo, at=10.0 - HEARD_TOGETHER_SECONDS - 0.1,
                              ear=READER)
    heard_by_engine(listener, echo)
    assert woken == []

    listener, woken = over_her()  # she said it herself: both ears hear her
    said = "Hey Jarvis, you might say, and I would answer."
    assert listener.explained("hey_jarvis", 3700.0, 7900.0, said, echo, at=9.9, ear=READER)
    heard_by_engine(listener, echo, played_words=said)
    assert woken == []
