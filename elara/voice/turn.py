"""End of turn: at a pause in speech, is the person done (answer soon) or thinking (wait)?

Pure: no audio, no model. The caller measures the signals at a pause — the silence so far, the
speculative transcript Whisper made of the audio so far and how sure Whisper was of it, whether
it is a whole local command — and `TurnJudge.judge` turns them into a verdict and the silence
after which the turn ends unless speech resumes:

- **finished** → end after `finished_ms` (≈250 ms) of silence;
- **unfinished** → wait up to `max_pause_ms` (≈2 s): people pause to think mid-sentence;
- **unknown** (a transcript that says nothing: no final punctuation, or a full stop Whisper is
  unsure of) → `uncertain_ms` (by default `end_silence_ms`; `Listening.UncertainPauseMs`);
- **no signal at all** (no transcript: the judgment is off or failed) → `Action.FALLBACK`:
  `EndSilenceMs` rules.

The transcript's ending is a cheap language signal (`transcript_ending`): "…capital of",
"…and", "… the," or Whisper's trailing "..." mean unfinished; "?" or "." after a clause mean
finished. A transcript that is only the wake phrase ("Hey Jarvis,") is unfinished whatever the
other signals say: the wake phrase never ends a turn by itself.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elara.voice.wake_phrase import is_wake_phrase_only, strip_wake_phrase, words

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elara.settings import ListeningSettings
    from elara.voice.stt import Transcript


class Ending(enum.Enum):
    """What the words so far say about the end of the turn."""

    FINISHED = "finished"
    UNFINISHED = "unfinished"
    UNKNOWN = "unknown"


class Verdict(enum.Enum):
    """The judgment on one pause."""

    FINISHED = "finished"
    UNFINISHED = "unfinished"
    UNKNOWN = "unknown"
    NO_SIGNAL = "no_signal"


class Action(enum.Enum):
    """What the listener does now."""

    COMMIT = "commit"  # the turn is over: answer
    WAIT = "wait"  # keep listening; ask again as the silence grows
    FALLBACK = "fallback"  # no judgment: the plain EndSilenceMs rule decides


#: Auxiliaries, copulas and "have": a question whose last sentence ends on one after another
#: ("How many legs does a spider have?", "Do you know where my keys are?") is whole; one ending
#: on the only one ("How many moons are?") is a fragment Whisper put a question mark on.
_VERBS = frozenset(
    {
        "is", "are", "was", "were", "am", "be", "been", "do", "does", "did", "can", "could",
        "will", "would", "should", "shall", "may", "might", "must", "have", "has", "had",
    }
)

#: Words a sentence does not end on: articles, possessives, conjunctions, prepositions, question
#: words, hesitation sounds and the auxiliaries above. A question that really ends on one ("What is
#: it made of?") only waits longer; a thought cut at one loses the rest of the question.
UNFINISHED_WORDS = frozenset(
    {
        # articles, determiners, possessives
        "a", "an", "the", "my", "your", "our", "their", "his", "her", "its", "this", "these",
        "those", "some", "any", "every", "each", "no",
        # conjunctions
        "and", "or", "but", "so", "because", "if", "than", "as", "then", "nor", "whether",
        # prepositions
        "of", "for", "to", "with", "about", "from", "in", "on", "at", "by", "into", "onto",
        "between", "like", "over", "under", "after", "before", "during", "through", "without",
        "across", "near", "per",
        # question words alone at the end ("Tell me what", "and how")
        "what", "which", "who", "whose", "how", "when", "where", "why",
        # hesitation
        "um", "uh", "er", "erm", "hmm", "hm", "mm", "uhm", "ah",
    }
) | _VERBS

#: Words in `UNFINISHED_WORDS` that close a question as adverbs ("And then?", "What then?"); after a
#: cut conjunction ("…and then") Whisper writes no question mark.
_CLOSING_ADVERBS = frozenset({"then"})

_TRAILING_UNFINISHED = ("...", "…", ",", ";", ":", "-", "–", "—")
_SENTENCE_END = re.compile(r"[.!?]\s+")


def _is_whole_question(text: str) -> bool:
    """Does the question `text` end on a word that closes it: an adverb like "then", or a verb
    following an auxiliary in its last sentence?"""
    if not text.endswith("?"):
        return False
    said = words(_SENTENCE_END.split(text)[-1])
    if said and said[-1] in _CLOSING_ADVERBS:
        return True
    return len(said) >= 2 and said[-1] in _VERBS and any(word in _VERBS for word in said[:-1])


def transcript_ending(text: str | None, wake_phrases: Iterable[str] = ()) -> Ending:
    """What the end of a speculative transcript says: finished, unfinished or unknown.

    Unfinished: only the wake phrase; a trailing "...", "…", ",", ";", ":" or dash; a last word in
    `UNFINISHED_WORDS` (whatever punctuation Whisper put after it), unless a question ends on a
    word that closes it ("And then?", "…does a spider have?"). Finished: "?" or "!", or "." after at least
    two words. Anything else (no final punctuation, a one-word "Paris.") is unknown.
    """
    if text is None:
        return Ending.UNKNOWN
    stripped = text.strip().strip("\"'”“")
    said = words(stripped)
    if not said:
        return Ending.UNKNOWN
    if is_wake_phrase_only(stripped, wake_phrases):
        return Ending.UNFINISHED
    if stripped.endswith(_TRAILING_UNFINISHED):
        return Ending.UNFINISHED
    if said[-1] in UNFINISHED_WORDS and not _is_whole_question(stripped):
        return Ending.UNFINISHED
    if stripped.endswith(("?", "!")):
        return Ending.FINISHED
    if stripped.endswith(".") and len(said) >= 2:
        return Ending.FINISHED
    return Ending.UNKNOWN


@dataclass(frozen=True)
class PauseSignals:
    """What is known at a pause: the silence so far and each signal (None when not measured)."""

    silence_ms: float
    transcript: str | None = None  # the speculative transcript of the audio so far
    transcript_logprob: float | None = None  # Whisper's average log probability of it
    command: bool = False  # the transcript is a whole local command ("stop", "set a timer for …")

    @classmethod
    def read(cls, silence_ms: float, transcript: Transcript | None, wake_phrases: tuple[str, ...],
             is_command: Callable[[str], bool] | None) -> PauseSignals:
        """The signals of a pause from its silence and the words read in it (None: none read)."""
        if transcript is None:
            return cls(silence_ms)
        command = is_command is not None and is_command(strip_wake_phrase(transcript.text, wake_phrases))
        return cls(silence_ms, transcript.text, transcript.avg_logprob, command)


#: how long a doubtful pause waits when the person going on after she began is heard: the reply's
#: first audio takes about as long, and going on later drops it (`bench/voice.py`)
UNCERTAIN_PAUSE_MS = 400
#: … and when it isn't (no echo cancelling, a satellite's room): long enough for a thinking pause
UNCERTAIN_PAUSE_UNHEARD_MS = 1300


@dataclass(frozen=True)
class TurnThresholds:
    """How signals become a verdict, and how long each verdict lets the silence run."""

    finished_ms: int = 250
    max_pause_ms: int = 2000
    end_silence_ms: int = 600
    uncertain_ms: int | None = None  # None: end_silence_ms
    #: Whisper's full stop or question mark alone is trusted from this average log probability
    #: up: below it Whisper often "finishes" a half-heard last word ("Tell me a fun fact about"
    #: → "Tell me a fun fact I'm out.").
    finished_logprob: float = -0.3
    wake_phrases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.finished_ms <= self.max_pause_ms:
            raise ValueError(f"finished_ms {self.finished_ms} must lie in 0..max_pause_ms {self.max_pause_ms}")

    @classmethod
    def from_settings(cls, listening: ListeningSettings, wake_phrases: tuple[str, ...], *,
                      going_on_heard: bool = True) -> TurnThresholds:
        """The `Listening` section's pauses: FinishedMs, UncertainPauseMs, MaxPauseMs, EndSilenceMs.
        UncertainPauseMs unset depends on `going_on_heard`: whether the person going on once her
        reply began is heard (`Listening.GoOnMs` with echo cancelling) or she must wait for it."""
        uncertain = listening.uncertain_pause_ms
        if uncertain is None:
            uncertain = UNCERTAIN_PAUSE_MS if going_on_heard else UNCERTAIN_PAUSE_UNHEARD_MS
            uncertain = min(max(uncertain, listening.finished_ms), listening.max_pause_ms)
        return cls(finished_ms=listening.finished_ms, max_pause_ms=listening.max_pause_ms,
                   end_silence_ms=listening.end_silence_ms, uncertain_ms=uncertain,
                   wake_phrases=wake_phrases)

    def wait_ms(self, verdict: Verdict) -> int:
        """The silence after which the turn ends, for a verdict."""
        if verdict is Verdict.FINISHED:
            return self.finished_ms
        if verdict is Verdict.UNFINISHED:
            return self.max_pause_ms
        if verdict is Verdict.UNKNOWN and self.uncertain_ms is not None:
            return self.uncertain_ms
        return self.end_silence_ms


@dataclass(frozen=True)
class Judgment:
    """The verdict on a pause, what to do now, and when the turn ends if the silence goes on."""

    verdict: Verdict
    action: Action
    end_after_ms: int
    ending: Ending  # the transcript's ending (UNKNOWN without a transcript)
    reason: str


def verdict_of(signals: PauseSignals, thresholds: TurnThresholds) -> tuple[Verdict, Ending, str]:
    """The verdict from the signals alone (silence aside), the transcript's ending, and why."""
    ending = transcript_ending(signals.transcript, thresholds.wake_phrases)
    if signals.transcript is None:
        return Verdict.NO_SIGNAL, ending, "no signal"
    if is_wake_phrase_only(signals.transcript, thresholds.wake_phrases):
        return Verdict.UNFINISHED, ending, "only the wake phrase so far"
    if signals.command:
        # The matcher takes only whole commands: "Stop." says too little to end a sentence, and
        # "What timers do I have?" ends on a word that usually leads on; neither must wait.
        return Verdict.FINISHED, ending, "the words so far are a whole command"
    if ending is Ending.UNFINISHED:
        return Verdict.UNFINISHED, ending, "the words so far are unfinished"
    lp = signals.transcript_logprob
    if ending is Ending.FINISHED and lp is not None and lp < thresholds.finished_logprob:
        return Verdict.UNKNOWN, ending, (
            f"the words so far end a sentence, but Whisper is unsure of them "
            f"(logprob {lp:.2f} < {thresholds.finished_logprob:g})")
    if ending is Ending.FINISHED:
        return Verdict.FINISHED, ending, "the words so far end a sentence"
    return Verdict.UNKNOWN, ending, "the words so far say nothing"


def judge(signals: PauseSignals, thresholds: TurnThresholds | None = None) -> Judgment:
    """Commit, wait, or fall back to EndSilenceMs, from the signals at a pause."""
    thresholds = thresholds or TurnThresholds()
    verdict, ending, reason = verdict_of(signals, thresholds)
    end_after = thresholds.wait_ms(verdict)
    if verdict is Verdict.NO_SIGNAL:
        action = Action.FALLBACK
    elif signals.silence_ms >= end_after:
        action = Action.COMMIT
    else:
        action = Action.WAIT
    return Judgment(verdict, action, end_after, ending, reason)


def answer_ahead(judgment: Judgment | None, *, enabled: bool, is_question: bool) -> bool:
    """Start the reply before the pause is over? Only for words that are a question (not noise,
    not the wake phrase alone) and not judged unfinished; `judgment` None: the judgment is off."""
    if not enabled or not is_question:
        return False
    return judgment is None or judgment.verdict is not Verdict.UNFINISHED


#: A reading the judgment doubts is read again (a wider beam) only when Whisper was this unsure
#: of it: the doubtful readings below it hold most of the words a second reading gains, and the
#: others too few to be worth ≈0.1 s on every answer (`bench/stt.py`).
READ_AGAIN_BELOW_LOGPROB = -0.7


def read_again_wanted(judgment: Judgment | None, logprob: float) -> bool:
    """Whether a pause's words are worth a second, wider reading: the judgment doubts them
    (not finished) and Whisper's average log probability is below `READ_AGAIN_BELOW_LOGPROB`."""
    return (judgment is not None and judgment.verdict is not Verdict.FINISHED
            and logprob < READ_AGAIN_BELOW_LOGPROB)


def pause_limit_ms(judgment: Judgment | None, end_silence_ms: int) -> int:
    """The silence that ends this pause: the judgment's, or EndSilenceMs without one (Whisper
    failed)."""
    return end_silence_ms if judgment is None else judgment.end_after_ms


class GoingOn(enum.Enum):
    """What the moments after a turn was taken as over have shown so far."""

    WATCHING = "watching"
    OVER = "over"  # they passed without the person going on: the turn is theirs to keep
    WENT_ON = "went_on"  # the person went on with the same turn


@dataclass
class GoOnWatch:
    """The moments after a turn was taken as over in which the person may still go on with it
    (`Listening.GoOnMs` after their speech ended), her reply begun or not.

    Pure: fed each frame's capture time, length and whether it held the person's speech (the
    caller tells her own voice apart). `min_speech_ms` of speech in a row (at least one frame)
    begun before `until` means they went on (speech begun in time counts even when it reaches
    `min_speech_ms` later); `speech_frames` is how many frames that speech spans."""

    until: float
    min_speech_ms: float = 200.0
    speech_frames: int = 0
    speech_ms: float = 0.0

    def over(self, at: float) -> bool:
        """Have the moments passed at `at` (no speech begun in them still being weighed)?"""
        return self.speech_frames == 0 and at >= self.until

    def feed(self, at: float, duration_s: float, speech: bool) -> GoingOn:
        """Account for one frame (`at`: when it ends); what the moments have shown now."""
        if not speech:
            self.speech_frames, self.speech_ms = 0, 0.0
        if self.over(at - duration_s if speech else at):
            return GoingOn.OVER
        if not speech:
            return GoingOn.WATCHING
        self.speech_frames += 1
        self.speech_ms += duration_s * 1000
        return GoingOn.WENT_ON if self.speech_ms >= self.min_speech_ms else GoingOn.WATCHING


class TurnJudge:
    """`judge` with settled thresholds (swap `thresholds` on a settings reload)."""

    def __init__(self, thresholds: TurnThresholds | None = None) -> None:
        self.thresholds = thresholds or TurnThresholds()

    def judge(self, signals: PauseSignals) -> Judgment:
        """The judgment on one pause under the current thresholds."""
        return judge(signals, self.thresholds)
