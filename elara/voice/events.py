"""What happened in a turn, as typed events on the loop's one clock.

The voice loop and its collaborators add each event to the turn's `TurnRecord` as it happens; the
INFO timing line, the last turn in `elara status` and the tests all read the same record. An
event's `at` is when it happened, which is not always when it was known (the first token is
known once the reply is in): `TurnRecord.timeline` orders them by `at`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnEvent:
    """Something that happened in a turn, `at` seconds on the loop's clock."""

    at: float


@dataclass(frozen=True)
class Wake(TurnEvent):
    """The wake word `name` was heard (`how`: its score, or how it was read)."""

    name: str
    how: str


@dataclass(frozen=True)
class Listening(TurnEvent):
    """Listening for the person's words began (after the wake word, or for a follow-up)."""


@dataclass(frozen=True)
class SpeechStart(TurnEvent):
    """The person began to speak."""


@dataclass(frozen=True)
class PauseJudged(TurnEvent):
    """The end-of-turn judgment on a pause: `verdict` and `reason`, made at `silence_ms` of
    silence in `seconds`; the pause then ends after `end_after_ms` of silence."""

    verdict: str
    reason: str
    silence_ms: float
    end_after_ms: int
    seconds: float


@dataclass(frozen=True)
class SpeechEnd(TurnEvent):
    """The person's last speech before the pause that ended the turn."""


@dataclass(frozen=True)
class TurnEnd(TurnEvent):
    """The pause was taken as the end of the turn."""


@dataclass(frozen=True)
class GoneOn(TurnEvent):
    """The person went on after the pause taken for the end: the same turn goes on, and what
    was measured of its words so far no longer counts."""


@dataclass(frozen=True)
class Transcribed(TurnEvent):
    """The transcript the turn was answered from was ready (read at a pause, or after the end)."""


@dataclass(frozen=True)
class Prompt(TurnEvent):
    """The words went to the orchestrator: a reply began (held unheard, if started ahead)."""


@dataclass(frozen=True)
class FirstToken(TurnEvent):
    """The model's first token of the reply (or a local command's answer), and how its prompt was
    read: tokens evaluated anew and kept from the last request (None where unknown)."""

    evaluated: int | None = None
    reused: int | None = None


@dataclass(frozen=True)
class FirstAudio(TurnEvent):
    """The reply's first audio reached the speaker."""


@dataclass(frozen=True)
class Committed(TurnEvent):
    """The person could no longer go on: their words are the turn's, and it is stored."""


@dataclass(frozen=True)
class Dropped(TurnEvent):
    """A reply begun was dropped, or the turn was given up; `why` says which and why."""

    why: str


@dataclass(frozen=True)
class Done(TurnEvent):
    """The reply ended: played, cut short or failed."""


E = TypeVar("E", bound=TurnEvent)

#: Events that describe the words of the turn: those from before the person went on are moot.
_OF_THE_WORDS = (SpeechEnd, TurnEnd, Transcribed, PauseJudged, FirstToken, FirstAudio, Done)

#: The timing line's stages: (name, from, to).
STAGES: tuple[tuple[str, type[TurnEvent], type[TurnEvent]], ...] = (
    ("wake_to_listening", Wake, Listening),
    ("speech_end_to_turn_end", SpeechEnd, TurnEnd),
    ("speech_end_to_transcript", SpeechEnd, Transcribed),
    ("transcript_to_first_token", Transcribed, FirstToken),
    ("first_token_to_first_audio", FirstToken, FirstAudio),
    ("speech_end_to_first_audio", SpeechEnd, FirstAudio),
)


class TurnRecord:
    """The events of one turn, and the figures they add up to."""

    def __init__(self, notify: Callable[[TurnEvent], None] | None = None) -> None:
        self.events: list[TurnEvent] = []
        self._notify = notify

    def add(self, event: TurnEvent) -> None:
        """Record one event (and pass it on to whoever watches the loop's turns)."""
        self.events.append(event)
        if self._notify is not None:
            self._notify(event)

    def timeline(self) -> list[TurnEvent]:
        """The events in the order they happened."""
        return sorted(self.events, key=lambda event: event.at)

    def last(self, kind: type[E]) -> E | None:
        """The latest event of `kind` that still counts: for the words' events, none from before
        the person last went on."""
        gone_on = max((i for i, e in enumerate(self.events) if isinstance(e, GoneOn)), default=-1)
        for i in range(len(self.events) - 1, -1, -1):
            event = self.events[i]
            if isinstance(event, kind):
                return event if i > gone_on or not issubclass(kind, _OF_THE_WORDS) else None
        return None

    def _at(self, kind: type[TurnEvent]) -> float | None:
        event = self.first(kind) if kind is Wake else self.last(kind)
        return None if event is None else event.at

    def first(self, kind: type[E]) -> E | None:
        """The earliest event of `kind`."""
        return next((e for e in self.events if isinstance(e, kind)), None)

    def timings(self) -> dict[str, float | None]:
        """Seconds between the turn's moments (None where one of them never came)."""
        def span(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else b - a

        figures = {name: span(self._at(start), self._at(end)) for name, start, end in STAGES}
        begun = self._at(Wake)
        figures["total"] = span(begun if begun is not None else self._at(Listening), self._at(Done))
        return figures

    def judgment(self) -> dict[str, Any]:
        """The last end-of-turn judgment, for `elara status` ({} when no pause was judged)."""
        judged = self.last(PauseJudged)
        if judged is None:
            return {}
        return {"verdict": judged.verdict, "reason": judged.reason, "at_silence_ms": judged.silence_ms,
                "end_after_ms": judged.end_after_ms, "judge_ms": judged.seconds * 1000}

    def prompt_tokens(self) -> dict[str, int | None]:
        """How the reply's prompt was read ({} for a turn the model did not answer)."""
        token = self.last(FirstToken)
        if token is None or token.evaluated is None:
            return {}
        return {"evaluated": token.evaluated, "reused": token.reused}

    def summary(self) -> str:
        """The turn's timings and judgment, as the INFO line says them."""
        timings = ", ".join(f"{name} {'-' if value is None else f'{value:.3f} s'}"
                            for name, value in self.timings().items())
        read = self.prompt_tokens()
        if read:
            reused = "" if read["reused"] is None else f", {read['reused']} reused"
            timings += f"; prompt tokens {read['evaluated']} evaluated{reused}"
        judged = self.last(PauseJudged)
        if judged is None:
            return f"{timings}; no judgment"
        return (f"{timings}; judged {judged.verdict} at {judged.silence_ms:.0f} ms of silence in "
                f"{judged.seconds * 1000:.1f} ms ({judged.reason}), ended after {judged.end_after_ms} ms")


class TurnLog:
    """The loop's turns: the one under way, the last one whose reply ended, and who watches."""

    def __init__(self) -> None:
        #: called with every event as it is recorded (tests, and whoever else watches the turns)
        self.observers: list[Callable[[TurnEvent], None]] = []
        self.current = self.begin()
        #: the last turn whose reply ended
        self.last_finished: TurnRecord | None = None
        self._status: dict[str, Any] = {"last_turn": {}, "last_judgment": {}, "last_prompt": {}}

    def begin(self) -> TurnRecord:
        """A new turn begins: its record is the current one."""
        self.current = TurnRecord(notify=self._notify)
        return self.current

    def add(self, event: TurnEvent) -> None:
        """Record `event` in the turn under way."""
        self.current.add(event)

    def finished(self, record: TurnRecord) -> None:
        """The reply of `record`'s turn ended: its figures are logged and are the last turn's."""
        self.last_finished = record
        self._status = {"last_turn": record.timings(), "last_judgment": record.judgment(),
                        "last_prompt": record.prompt_tokens()}
        log.info("turn timings: %s", record.summary())

    def status(self) -> dict[str, Any]:
        """The last finished turn's timings, end-of-turn judgment and prompt tokens, for `elara status`."""
        return {key: dict(value) for key, value in self._status.items()}

    def _notify(self, event: TurnEvent) -> None:
        for observer in self.observers:
            observer(event)
