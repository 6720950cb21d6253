"""Hearing "stop" while Elara speaks, without the wake word.

While she speaks (a reply, a ringing timer) with her own echo cancelled, the voice-activity scores
of the cleaned microphone go to `StopSpotter`: a short stretch of speech — a word or a few — is
offered as a `StopCandidate` at its first silent frame, so the check starts at once. The loop
transcribes the candidate and `heard_stop` decides from the words, and from what she was saying
then, whether the person told her to stop. Both are pure: no audio, no clock, no model.

Through what cancelling leaves of her voice Whisper misreads short commands ("It's top." for
"Stop."). `StopReader` reads the candidate for the loop: Whisper's own reading, or, when that is
neither a stop nor the wake phrase, a stop command Whisper was told and finds nearly as likely
(`told_stop`, pure).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from elara.skills import intents
from elara.voice.wake_phrase import said_wake_phrase, words

if TYPE_CHECKING:
    import numpy as np

    from elara.voice.stt import Transcript, Weighing

log = logging.getLogger(__name__)

#: The shortest speech that may be a command (a click or a breath is shorter), in ms.
MIN_SPEECH_MS = 160
#: The longest: "stop the timer please" fits, a sentence said over her does not.
MAX_SPEECH_MS = 2_000
#: A gap this short inside the words keeps them one utterance ("never … mind").
JOIN_GAP_MS = 400


@dataclass(frozen=True)
class StopCandidate:
    """A short utterance heard while Elara spoke: its span, in seconds of the spotter's stream."""

    start: float
    end: float


class StopSpotter:
    """Finds short utterances in a stream of per-frame speech decisions (pure)."""

    def __init__(self, *, min_speech_ms: int = MIN_SPEECH_MS, max_speech_ms: int = MAX_SPEECH_MS,
                 join_gap_ms: int = JOIN_GAP_MS) -> None:
        self.min_speech = min_speech_ms / 1000
        self.max_speech = max_speech_ms / 1000
        self.join_gap = join_gap_ms / 1000
        self.reset()

    def reset(self) -> None:
        """Start over at stream time 0 (a new reply or announcement)."""
        self.now = 0.0
        self._start: float | None = None  # the utterance's first speech frame
        self._end = 0.0  # the end of its last speech frame
        self._speech = 0.0  # seconds of speech in it
        self._offered = False  # offered since its last speech frame
        self._too_long = False

    def feed(self, seconds: float, is_speech: bool) -> StopCandidate | None:
        """One frame of `seconds`; a candidate at the first silent frame after short speech."""
        begin, self.now = self.now, self.now + seconds
        if is_speech:
            if self._start is None:
                self._start = begin
            self._end, self._speech, self._offered = self.now, self._speech + seconds, False
            self._too_long = self._too_long or self.now - self._start > self.max_speech + 1e-9
            return None
        if self._start is None:
            return None
        if self.now - self._end > self.join_gap:
            self._start, self._speech, self._too_long = None, 0.0, False
            return None
        if self._offered or self._too_long or self._speech < self.min_speech:
            return None
        self._offered = True
        return StopCandidate(self._start, self._end)


def heard_stop(text: str, played_words: str = "", *, ringing: bool = False) -> bool:
    """Did the person say stop? `text` is what was heard; `played_words` what Elara was saying at the
    time: words she said herself (her "stop" heard back) never count. While a timer rings, "stop
    the timer" and "cancel the timer" count too."""
    said = intents.words(text)
    if not said or set(said) <= set(intents.words(played_words)):
        return False
    # Whisper tends to repeat a word heard alone ("Never mind. Never mind. Never"): the first
    # sentence is what was said.
    first = _SENTENCE_END.split(text.strip(), maxsplit=1)[0]
    # What is left of her voice around the person's words is heard too ("Here's the stop." over
    # her "Here is the third part"): the words without hers at either end.
    own = " ".join(_without_played_words(_stems(text), set(_stems(played_words))))
    return any(_means_stop(intents.match(words), ringing) for words in (text, first, own) if words)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _stems(text: str) -> list[str]:
    """Lower-case words with any contraction cut off ("Here's" → "here"), to compare heard words
    with the words she said."""
    return [w.split("'")[0] for w in words(text) if w.split("'")[0]]


def _without_played_words(heard: list[str], played: set[str]) -> list[str]:
    """`heard` without the words at its start and end that she was saying herself (`played`)."""
    start, end = 0, len(heard)
    while start < end and heard[start] in played:
        start += 1
    while end > start and heard[end - 1] in played:
        end -= 1
    return heard[start:end]


def _means_stop(intent: intents.Intent | None, ringing: bool) -> bool:
    if isinstance(intent, intents.Stop):
        return True
    return ringing and isinstance(intent, intents.CancelTimer) and intent.name is None


#: The stop commands Whisper is told when its own reading of words over her is not one: through
#: what cancelling leaves of her voice it misreads them ("It's top.", "that's it, huh?").
TOLD_STOPS = ("Stop.", "Stop it.", "That's enough.", "Be quiet.", "Never mind.", "Okay, stop.")
#: How much less likely than Whisper's own reading a stop command told may be and still stand
#: (≈20 times); bench/echo.py measured it on stops, other words and her echo.
TOLD_LOG_ODDS = -3.0
#: How many more words than the stop command Whisper's own reading may have: a short command wins
#: against a longer reading on length alone ("In-up-shad." for "Stop." where "Enough said." was said).
TOLD_EXTRA_WORDS = 1


class Weigher(Protocol):
    """Whisper that weighs phrases it is told against its own reading (`Transcriber.weigh`)."""

    def weigh(self, samples: np.ndarray, phrases: Sequence[str], *, settled: Callable[[str], bool]) -> Weighing:
        """Its reading, and each phrase's log odds against it."""


class StopReader:
    """Reads short speech over her voice: Whisper's own reading when that is a stop or the wake
    phrase, else the stop command `told_stop` finds in what Whisper made of the phrases told."""

    def __init__(self, whisper: Weigher, wake_phrases: Sequence[str]) -> None:
        self.whisper = whisper
        self.wake_phrases = tuple(wake_phrases)

    def transcribe(self, samples: np.ndarray) -> Transcript:
        """What was said over her, as the loop reads it for "stop" and the wake phrase."""
        weighing = self.whisper.weigh(samples, TOLD_STOPS + self.wake_phrases, settled=self._settled)
        heard = weighing.transcript
        told = told_stop(weighing.log_odds, heard.text, self.wake_phrases)
        if told is None:
            return heard
        log.debug("read %r over her as %r when told (log odds %.2f)", heard.text, told, weighing.log_odds[told])
        return replace(heard, text=told)

    def _settled(self, text: str) -> bool:
        return heard_stop(text) or said_wake_phrase(text, self.wake_phrases) is not None


def told_stop(log_odds: dict[str, float], heard: str, wake_phrases: Sequence[str] = ()) -> str | None:
    """The stop command that explains the words over her, from each told phrase's log odds
    against Whisper's own reading `heard`: the likeliest of `TOLD_STOPS`, if within
    `TOLD_LOG_ODDS`, `heard` is at most `TOLD_EXTRA_WORDS` words longer, and no wake phrase is
    likelier (a misread "Hey Jarvis" leans to "That's enough" too)."""
    stops = [phrase for phrase in TOLD_STOPS if phrase in log_odds]
    if not stops:
        return None
    best = max(stops, key=log_odds.__getitem__)
    if log_odds[best] < TOLD_LOG_ODDS:
        return None
    if len(intents.words(heard)) > len(intents.words(best)) + TOLD_EXTRA_WORDS:
        return None
    if any(log_odds.get(phrase, float("-inf")) > log_odds[best] for phrase in wake_phrases):
        return None
    return best
