"""Think blocks dropped from streamed and whole replies (elara.brain.thinking)."""

from __future__ import annotations

import pytest

from elara.brain.thinking import ThinkFilter, strip_thinking

# (reply as the model streams it, what is visible)
CASES = [
    ("Paris is the capital.", "Paris is the capital."),
    ("<think>The user asks about France.</think>\n\nParis.", "Paris."),
    ("<think>\nhmm\n</think>Paris.", "Paris."),
    ("  \n<think>x</think>  Paris.", "Paris."),
    ("<THINK>Upper case.</Think>Paris.", "Paris."),
    ("<thinking>A longer tag.</thinking> Paris.", "Paris."),
    ("<think>one</think>\n<think>two</think>\nParis.", "Paris."),
    ("Paris<think>aside</think> is the capital.", "Paris is the capital."),
    ("One. <think>a</think>Two. <think>b</think>Three.", "One. Two. Three."),
    ("<think>reasoning that never ends", ""),
    ("Paris. <think>then more reasoning, cut off at the end", "Paris. "),
    ("<think>only reasoning</think>", ""),
    ("<think>only reasoning</think>\n\n  ", ""),
    ("<think>a < b and </thin is not a close</think>Yes.", "Yes."),
    ("Is a < b? Yes.", "Is a < b? Yes."),
    ("Use <b>bold</b> and <thinker> tags.", "Use <b>bold</b> and <thinker> tags."),
    ("It ends with <thin", "It ends with <thin"),
    ("It ends with <", "It ends with <"),
    ("It ends with </think", "It ends with </think"),
    ("A stray </think> close is left as is.", "A stray </think> close is left as is."),
    ("  Leading spaces are kept without thinking.", "  Leading spaces are kept without thinking."),
    ("   ", "   "),
    ("", ""),
]


def _stream(chunks: list[str]) -> str:
    think = ThinkFilter()
    return "".join(think.feed(chunk) for chunk in chunks) + think.flush()


@pytest.mark.parametrize(("reply", "visible"), CASES)
def test_strip_thinking_of_a_whole_reply(reply: str, visible: str) -> None:
    assert strip_thinking(reply) == visible


@pytest.mark.parametrize(("reply", "visible"), CASES)
def test_splitting_the_reply_anywhere_gives_the_same_text(reply: str, visible: str) -> None:
    # Every cut point, including inside "<think>" and "</think>" ("<th" + "ink>").
    for cut in range(len(reply) + 1):
        assert _stream([reply[:cut], reply[cut:]]) == visible, f"cut at {cut}: {reply[:cut]!r} | {reply[cut:]!r}"
    for first in range(len(reply) + 1):
        for second in range(first, len(reply) + 1):
            chunks = [reply[:first], reply[first:second], reply[second:]]
            assert _stream(chunks) == visible, f"chunks {chunks!r}"


@pytest.mark.parametrize(("reply", "visible"), CASES)
def test_one_character_at_a_time(reply: str, visible: str) -> None:
    assert _stream(list(reply)) == visible


def test_visible_text_comes_out_as_soon_as_it_is_known() -> None:
    think = ThinkFilter()
    assert think.feed("<th") == ""
    assert think.feed("ink>The user wants") == ""
    assert think.feed(" a city.</thi") == ""
    assert think.feed("nk>\n\nPar") == "Par"
    assert think.feed("is. A <") == "is. A "  # "<" could still open a tag
    assert think.feed("b.") == "<b."
    assert think.flush() == ""
    assert think.thought


def test_a_partial_tag_that_never_completes_comes_out_at_flush() -> None:
    think = ThinkFilter()
    assert think.feed("Almost a tag: <thin") == "Almost a tag: "
    assert think.flush() == "<thin"
    assert not think.thought


def test_an_unclosed_block_is_dropped_at_flush() -> None:
    think = ThinkFilter()
    assert think.feed("<think>still reasoning when the stream ended </thi") == ""
    assert think.flush() == ""
    assert think.thought
