"""The pure parts of hearing "stop" without the wake word: the spotter, the decision, and the
reader's choice between Whisper's own reading and a stop command it was told."""

import numpy as np
import pytest

from elara.voice.stop import TOLD_STOPS, StopCandidate, StopReader, StopSpotter, heard_stop, told_stop
from elara.voice.stt import Transcript, Weighing

F = 0.08


def spot(pattern: str, **options: int) -> list[StopCandidate]:
    """Feed a pattern of frames ("s" speech, "." silence); the candidates offered."""
    spotter = StopSpotter(**options)
    return [c for c in (spotter.feed(F, ch == "s") for ch in pattern) if c is not None]


def test_a_short_word_is_offered_at_its_first_silent_frame():
    spotter = StopSpotter()
    got = [spotter.feed(F, ch == "s") for ch in "..sssss.."]
    assert got[:7] == [None] * 7
    assert got[7] == StopCandidate(pytest.approx(2 * F), pytest.approx(7 * F))
    assert got[8] is None  # offered once


@pytest.mark.parametrize("pattern, spans", [
    (".s...", []),  # a click: too short
    ("ss...", [(0, 2)]),  # 160 ms: the shortest word
    ("s" * 25 + "...", [(0, 25)]),  # 2 s: the longest command
    ("s" * 26 + "...", []),  # a sentence said over her
    ("ssss..sss...", [(0, 4), (0, 9)]),  # "never … mind": offered again, whole
    ("ssss......sss...", [(0, 4), (10, 13)]),  # a gap over 400 ms: two utterances
    ("s" * 20 + "..." + "s" * 10 + "...", [(0, 20)]),  # joined past 2 s: no longer offered
    ("s" * 30 + "......" + "sss..", [(36, 39)]),  # after a long one, a short one still counts
])
def test_which_stretches_are_offered(pattern, spans):
    assert [(round(c.start / F), round(c.end / F)) for c in spot(pattern)] == spans


@pytest.mark.parametrize("text, played_words, ringing, stop", [
    ("Stop.", "", False, True),
    ("Stop! Stop! Stop! Stop! Stop! Stop", "", False, True),
    ("Never mind. Never mind. Never", "", False, True),  # Whisper repeating a word said alone
    ("That's enough.", "", False, True),
    ("Be quiet.", "", False, True),
    ("Shut up!", "", False, True),
    ("Cancel that.", "", False, True),
    ("OK, stop.", "", False, True),
    ("Don't stop.", "", False, False),
    ("Stop the timer.", "", True, True),  # a timer ringing
    ("Stop the timer.", "", False, False),  # a reply: that is a command for a turn
    ("Stop the pasta timer.", "", True, False),  # names one: a turn's business
    ("Stop.", "Please don't stop me now. I am", False, False),  # her own word heard back
    ("Stop, stop.", "and then stop it", False, False),
    ("Stop.", "Paris is the capital.", False, True),
    ("Tell me a joke.", "", False, False),
    ("", "", False, False),
    ("Stopwatch.", "", False, False),
    # what is left of her voice heard around the person's word
    ("Here's the stop.", "Here is the third part of a long story", False, True),
    ("Stop, part of a", "Here is the third part of a long story", False, True),
    ("Here is the top.", "Here is the third part of a long story", False, False),
    ("Here's the story.", "Here is the third part of a long story", False, False),
])
def test_heard_stop(text, played_words, ringing, stop):
    assert heard_stop(text, played_words, ringing=ringing) is stop


@pytest.mark.parametrize("log_odds, heard, told", [
    ({"Stop.": -0.9, "Stop it.": -7.3, "Hey Jarvis.": -12.0}, "It's top.", "Stop."),
    ({"That's enough.": 1.7, "Stop.": -5.1, "Hey Jarvis.": -9.0}, "That's it, huh?", "That's enough."),
    ({"That's enough.": -2.3}, "I see her.", "That's enough."),  # a word more: still a command's length
    ({"That's enough.": -2.3}, "Not to sit up.", None),  # two more
    ({"Stop.": 1.0}, "In-up-shad.", None),  # "Enough said."
    ({"Stop.": -2.9}, "Stop by later.", None),
    ({"Stop.": -3.0}, "Top.", "Stop."),  # at the bound
    ({"Stop.": -3.1, "Be quiet.": -6.0}, "Thank you.", None),  # far less likely
    ({"Stop.": -2.4}, "It helps, it helps, it helps, it helps", None),  # short wins on length alone
    ({"Stop.": -2.8}, "It up, it's bad.", None),
    ({"Never mind.": -0.5, "Hey Jarvis.": 0.2}, "Hey, John, I missed you.", None),  # a misread wake phrase
    ({"Hey Jarvis.": 0.0}, "Hey, John.", None),
    ({}, "Stop.", None),  # Whisper's own reading settled it
])
def test_the_told_stop_stands_within_its_odds_unless_too_short_or_the_wake_phrase_is_likelier(log_odds, heard, told):
    assert told_stop(log_odds, heard, ["Hey Jarvis."]) == told


class Weigher:
    """Whisper weighing what it was told, from a script: its own reading, and each phrase's log odds."""

    def __init__(self, own: str, log_odds: dict[str, float]) -> None:
        self.own, self.log_odds = own, log_odds
        self.asked: list[tuple[str, ...]] = []

    def weigh(self, samples, phrases, *, settled):
        self.asked.append(tuple(phrases))
        odds = {} if settled(self.own) else {p: v for p, v in self.log_odds.items() if p in phrases}
        return Weighing(Transcript(self.own, 0.24, -0.4, 1.2, 0.1), odds)


def test_the_reader_reads_a_misheard_stop_as_the_stop_and_keeps_whispers_verdict():
    reader = StopReader(Weigher("It's top.", {"Stop.": -0.9, "Hey Jarvis.": -12.0}), ["Hey Jarvis."])
    heard = reader.transcribe(np.zeros(1600, dtype=np.int16))
    assert heard == Transcript("Stop.", 0.24, -0.4, 1.2, 0.1)  # how sure it was there was speech, kept
    assert reader.whisper.asked == [TOLD_STOPS + ("Hey Jarvis.",)]


@pytest.mark.parametrize("own", ["Stop.", "Be quiet!", "Hey, Jervis.", "Thank you.", "Really?"])
def test_the_reader_keeps_whispers_own_reading_when_it_settles_it_or_nothing_told_is_near(own):
    reader = StopReader(Weigher(own, {"Stop.": -2.0 if own in ("Stop.", "Be quiet!", "Hey, Jervis.") else -11.0,
                                      "Hey Jarvis.": -12.0}), ["Hey Jarvis."])
    assert reader.transcribe(np.zeros(1600, dtype=np.int16)).text == own
