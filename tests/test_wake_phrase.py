"""Wake-phrase text matching (elara.voice.wake_phrase): one tokeniser, named cut-offs."""

from __future__ import annotations

import pytest

from elara.voice.wake_phrase import (
    HEARD_NAME_SIMILARITY,
    PLAYED_NAME_SIMILARITY,
    SAID_PHRASE_SIMILARITY,
    is_wake_phrase_only,
    names_wake_word,
    said_wake_phrase,
    says_wake_phrase,
    spoken_wake_phrase,
    strip_wake_phrase,
    words,
)

WAKE = ("hey jarvis",)

# ---------------------------------------------------------------------------------------------
# the tokeniser


@pytest.mark.parametrize(("text", "expected"), [
    ("Hey, Jarvis!", ["hey", "jarvis"]),
    ("Jarvis's timer", ["jarvis's", "timer"]),
    ("Jarvis’s timer", ["jarvis's", "timer"]),  # a curly apostrophe is the straight one
    ("Set it for 10 minutes.", ["set", "it", "for", "10", "minutes"]),
    ("hey_jarvis", ["hey", "jarvis"]),  # a model's name reads as its phrase
    ("Ｊａｒｖｉｓ", ["jarvis"]),  # compatibility forms (NFKC)
    ("Jar-vis — café", ["jar", "vis", "caf"]),
    ("", []),
])
def test_words(text, expected):
    assert words(text) == expected


def test_the_cut_offs_are_distinct_and_ordered():
    # Whisper's guess at a name may be looser than the whole phrase heard alone, and her own
    # words, which are exact text, must be nearer still to explain a wake.
    assert (HEARD_NAME_SIMILARITY, SAID_PHRASE_SIMILARITY, PLAYED_NAME_SIMILARITY) == (0.7, 0.75, 0.8)


# ---------------------------------------------------------------------------------------------
# a wake word's name in a transcript


@pytest.mark.parametrize(("text", "heard"), [
    ("Hey Jarvis.", True),
    ("Hey, Jervis, what time is it?", True),
    ("Hey jar vis", True),  # split by Whisper: the two words joined
    ("Jarvis", True),
    ("Hey Travis.", False),
    ("Hey Harvey, come here.", False),
    ("What is the capital of France?", False),
    ("", False),
])
def test_the_transcript_names_the_wake_word_or_not(text, heard):
    assert names_wake_word(text, "hey_jarvis") is heard


def test_other_wake_words_are_matched_by_their_own_name():
    assert names_wake_word("Alexa, stop.", "alexa") and names_wake_word("hey my croft", "hey_mycroft")
    assert not names_wake_word("Hey Jarvis", "alexa")


@pytest.mark.parametrize(("played", "explains"), [
    ("I am Jarvis, your assistant.", True),
    ("Ask Jervis about it.", True),
    ("The capital of France is Paris.", False),  # near enough for Whisper's guess, not for her words
])
def test_her_own_words_explain_a_wake_only_when_nearer(played, explains):
    assert names_wake_word(played, "hey_jarvis", similarity=PLAYED_NAME_SIMILARITY) is explains
    assert names_wake_word(played, "hey_jarvis")  # Whisper's reading is read more loosely


@pytest.mark.parametrize(("text", "name", "said"), [
    ("Hey Jarvis.", "hey_jarvis", True),
    ("Oh, hey, Jar vis, what time is it?", "hey_jarvis", True),  # split by Whisper: joined
    ("He wrote Hey Jarvis on the car.", "hey_jarvis", True),
    ("Calling Jarvis, Reese Harrison.", "hey_jarvis", False),  # the name in passing
    ("Mr. Jarvis will call you.", "hey_jarvis", False),
    ("Hey, Jervis.", "hey_jarvis", False),
    ("Hey. Hey.", "hey_jarvis", False),
    ("Alexa, stop.", "alexa", True),
    ("Hey my croft", "hey_mycroft", True),
])
def test_the_whole_phrase_is_said_or_not(text, name, said):
    assert says_wake_phrase(text, name) is said


def test_the_hint_is_the_phrase_as_whisper_writes_it():
    assert spoken_wake_phrase("hey_jarvis") == "Hey Jarvis."
    assert spoken_wake_phrase("alexa") == "Alexa."


# ---------------------------------------------------------------------------------------------
# a transcript that is the wake phrase


@pytest.mark.parametrize(
    ("text", "only"),
    [
        ("Hey Jarvis.", True), ("hey jarvis", True), ("Hey, Jarvis!", True), ("A Jarvis.", True),
        ("Hey Jervis,", True), ("Jarvis", True),
        ("Hey.", False),  # "hey" alone is an ordinary start, not the phrase
        ("Hey Siri", False), ("Hey Jarvis, what", False), ("What time is it?", False), ("", False),
    ],
)
def test_wake_phrase_only(text, only):
    assert is_wake_phrase_only(text, WAKE) is only


@pytest.mark.parametrize(
    "text, said",
    [
        ("Hey Jarvis.", "hey jarvis"),
        ("Hey, Jervis!", "hey jarvis"),
        ("hey travis", "hey jarvis"),
        ("Jarvis.", None),  # the tail alone: Whisper reads a name over her more easily than the phrase
        ("Hey.", None),
        ("Hey Jarvis, what time is it?", None),  # a question has begun
        ("", None),
    ],
)
def test_said_wake_phrase_is_the_whole_phrase_alone(text, said):
    assert said_wake_phrase(text, WAKE) == said


def test_the_phrase_as_whisper_is_told_it_matches_too():
    told = (spoken_wake_phrase("hey_jarvis"),)
    assert said_wake_phrase("Hey, Jervis!", told) == "Hey Jarvis."
    assert is_wake_phrase_only("Jarvis.", told)
    assert strip_wake_phrase("Hey Jarvis, stop.", told) == "stop."


# ---------------------------------------------------------------------------------------------
# the question without the wake phrase


def test_strip_wake_phrase():
    assert strip_wake_phrase("Hey Jarvis, what time is it?", WAKE) == "what time is it?"
    assert strip_wake_phrase("Jarvis. Turn it off", WAKE) == "Turn it off"
    assert strip_wake_phrase("Hey, how are you?", WAKE) == "Hey, how are you?"
    assert strip_wake_phrase("Who is Jarvis?", WAKE) == "Who is Jarvis?"
    assert strip_wake_phrase("Hey Jarvis.", WAKE) == ""


def test_strip_keeps_the_question_as_whisper_wrote_it():
    assert strip_wake_phrase("  HEY JARVIS — Ｗhat is 2+2? ", WAKE) == "— Ｗhat is 2+2?"
    assert strip_wake_phrase("Ｊａｒｖｉｓ, set a timer.", WAKE) == "set a timer."
    assert strip_wake_phrase("10 Jarvis, then.", WAKE) == "10 Jarvis, then."  # a number is a word
    assert strip_wake_phrase("Hey Jarvis, stop.", ()) == "Hey Jarvis, stop."
