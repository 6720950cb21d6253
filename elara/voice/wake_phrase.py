"""Wake-phrase text matching: whether, and where, a transcript holds the wake phrase.

Pure: text in, answers out. One tokeniser (`words`) reads every transcript and phrase. A wake
word is given either by its model's name ("hey_jarvis") or as a phrase ("hey jarvis", "Hey
Jarvis."); both read as the same words. How alike a word must be depends on what it decides, so
each cut-off is named for that.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable

#: A word (or two run together, "Jar vis") of a Whisper transcript names the wake word when this
#: alike to its name: Whisper spells a name it hears in its own ways ("Jervis", "Jarvis,").
HEARD_NAME_SIMILARITY = 0.7
#: A transcript is the wake phrase when this alike to it: Whisper writes "Hey Jarvis" as "Hey
#: Jervis", "Hey, Travis", "A Jarvis"; a little stricter than a name alone, as the whole
#: transcript is weighed.
SAID_PHRASE_SIMILARITY = 0.75
#: A word she played herself explains a wake when this alike to the wake word's name ("Jervis"
#: does, "Paris" does not): her words are the text she was given, not Whisper's guesses.
PLAYED_NAME_SIMILARITY = 0.8

_WORD = re.compile(r"[a-z0-9']+")


def _tokens(text: str) -> list[tuple[str, int]]:
    """Each word of `text` and the offset in `text` just past it. Each character is normalised on
    its own (NFKC, lower case, ’ as '), so an offset in the normalised text maps back to `text`."""
    normal: list[str] = []
    ends: list[int] = []
    for i, char in enumerate(text):
        norm = unicodedata.normalize("NFKC", char).lower().replace("’", "'")
        normal.append(norm)
        ends.extend([i + 1] * len(norm))
    return [(m.group(), ends[m.end() - 1]) for m in _WORD.finditer("".join(normal))]


def words(text: str) -> list[str]:
    """A transcript's, phrase's or wake-word name's words as they are matched: lower case,
    apostrophes kept, anything else a separator ("Hey, Jarvis’s" → hey, jarvis's; "hey_jarvis" →
    hey, jarvis)."""
    return [word for word, _ in _tokens(text)]


def spoken_wake_phrase(name: str) -> str:
    """A wake-word model's phrase as Whisper writes it: "hey_jarvis" → "Hey Jarvis."."""
    return " ".join(word.capitalize() for word in name.split("_")) + "."


def says_wake_phrase(text: str, name: str) -> bool:
    """Whether a transcript holds wake word `name`'s whole phrase, word for word as Whisper writes
    it, the name perhaps split in two: "hey_jarvis" in "Oh, hey, Jar vis." but not "Jarvis, the
    butler" or "Hey Jervis"."""
    phrase = words(name)
    said = words(text)
    n = len(phrase)
    for i in range(len(said) - n + 1):
        if said[i : i + n - 1] == phrase[:-1] and (
                said[i + n - 1] == phrase[-1] or "".join(said[i + n - 1 : i + n + 1]) == phrase[-1]):
            return True
    return False


def names_wake_word(text: str, name: str, similarity: float = HEARD_NAME_SIMILARITY) -> bool:
    """Whether a transcript holds the wake word's name ("hey_jarvis" → a word like "jarvis"), alone
    or split in two ("Jar vis"), at least `similarity` alike (1.0: spelled right)."""
    named = words(name)
    if not named:
        return False
    target, said = named[-1], words(text)
    candidates = said + [a + b for a, b in zip(said, said[1:], strict=False)]
    return any(difflib.SequenceMatcher(None, word, target).ratio() >= similarity for word in candidates)


def is_wake_phrase_only(text: str, wake_phrases: Iterable[str]) -> bool:
    """True when `text` is a wake phrase and nothing else ("Hey Jarvis.", "Hey, Jervis,", "Jarvis")."""
    said = words(text)
    if not said:
        return False
    joined = " ".join(said)
    for phrase in wake_phrases:
        target = words(phrase)
        # The phrase's tail alone too ("Jarvis"): the detector can fire before the whole phrase
        # reached the recording. A lone "hey" is not the phrase: it ends the tail only as a whole.
        # No more words than the phrase: "Hey Jarvis, what" has begun the question.
        for first in range(len(target)):
            tail = target[first:]
            if (len(said) <= len(tail) and difflib.SequenceMatcher(
                    None, joined, " ".join(tail)).ratio() >= SAID_PHRASE_SIMILARITY):
                return True
    return False


def said_wake_phrase(text: str, wake_phrases: Iterable[str]) -> str | None:
    """The wake phrase `text` is, whole and alone ("Hey, Jervis." is "hey jarvis"), or None.
    Unlike `is_wake_phrase_only`, its tail alone ("Jarvis") is not enough."""
    said = words(text)
    for phrase in wake_phrases:
        target = words(phrase)
        if (said and len(said) == len(target) and difflib.SequenceMatcher(
                None, " ".join(said), " ".join(target)).ratio() >= SAID_PHRASE_SIMILARITY):
            return phrase
    return None


def strip_wake_phrase(text: str, wake_phrases: Iterable[str]) -> str:
    """Remove a wake phrase ("Hey Jarvis," or just "Jarvis,") Whisper heard at the start."""
    stripped = text.strip()
    tokens = _tokens(stripped)
    said = [word for word, _ in tokens]
    for phrase in wake_phrases:
        target = words(phrase)
        # The phrase's tail alone counts too: the detector may fire before the whole phrase
        # left the pre-roll. "hey" alone is a real start of a sentence, so the last word must match.
        for first in range(len(target)):
            tail = target[first:]
            if said[: len(tail)] == tail:
                return stripped[tokens[len(tail) - 1][1]:].lstrip(" ,.!?;:-").strip()
    return stripped
