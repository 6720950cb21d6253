"""The sentence splitter that lets the first sentence be spoken while the model still writes."""

import pytest

from elara.brain.sentences import SentenceSplitter


def split(text: str, step: int, **kw) -> list[str]:
    splitter = SentenceSplitter(**kw)
    out = []
    for i in range(0, len(text), step):
        out += splitter.feed(text[i:i + step])
    return out + splitter.flush()


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_sentences_do_not_depend_on_fragment_size(step):
    text = ('Hello there! It is 3.5 degrees, said Dr. Smith at 10 a.m. today. '
            'J. R. R. Tolkien wrote it... Really? "Yes." Ok\nA last line without a stop')
    assert split(text, step) == [
        "Hello there!", "It is 3.5 degrees, said Dr. Smith at 10 a.m. today.",
        "J. R. R. Tolkien wrote it...", "Really?", '"Yes."', "Ok", "A last line without a stop"]


def test_a_sentence_is_released_as_soon_as_the_next_word_starts():
    splitter = SentenceSplitter()
    assert splitter.feed("The answer is 42.") == []  # could still be 42.5
    assert splitter.feed(" Anything") == ["The answer is 42."]
    assert splitter.flush() == ["Anything"]
    assert splitter.flush() == []


def test_a_long_sentence_is_cut_at_a_clause():
    text = "one, " * 30 + "end."
    parts = split(text, 5, max_chars=60)
    assert all(len(p) <= 60 for p in parts)
    assert " ".join(parts) == text.strip()
    assert split("x" * 150, 10, max_chars=60) == ["x" * 60, "x" * 60, "x" * 30]


def test_whitespace_only_and_empty():
    assert split("   \n\n  ", 2) == []
    assert split("", 1) == []
