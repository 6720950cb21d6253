"""The pure parts of hearing "stop" without the wake word: the spotter and the decision."""

import pytest

from elara.voice.stop import StopCandidate, StopSpotter, heard_stop

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


@pytest.mark.parametrize("text, her_words, ringing, stop", [
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
def test_heard_stop(text, her_words, ringing, stop):
    assert heard_stop(text, her_words, ringing=ringing) is stop
