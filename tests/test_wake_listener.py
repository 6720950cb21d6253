"""The wake listener on its own: a wake over her voice that the "stop" reader counted while the
listener weighed it is not counted twice."""

import asyncio
from types import SimpleNamespace

import numpy as np

from elara.audio.frames import FRAME_SAMPLES, AudioFrame
from elara.voice import dialogue as d
from elara.voice.parts import LoopCounters
from elara.voice.wake_listener import WakeListener


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
