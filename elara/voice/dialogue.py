"""The conversation's state machine: wake word → listen → transcribe → think → speak → (follow up).

`Dialogue` is pure: it is driven by small event values (what the audio loop, the transcriber and
the orchestrator observed, each stamped with a time in seconds from any monotonic clock) and
answers each with a list of *intents* — what the daemon should now do. It never touches audio,
threads, the network or a clock; time only moves when an event says so (`Tick(now)` drives the
follow-up timeout).

States::

    idle          waiting for the wake word
    listening     capturing an utterance (the segmenter runs)
    transcribing  speech-to-text on the captured utterance
    thinking      the orchestrator is building the prompt / waiting for the model's first words
    speaking      the reply is being spoken
    follow_up     listening again without the wake word, for `follow_up_seconds` (mode "continued")
    announcing    saying something unasked (a timer ringing); only ever entered from idle

Modes: "wake_word" — every turn starts with the wake word, so a finished reply goes back to idle;
"continued" — a finished reply opens the follow-up window: speech in it starts the next turn with
no wake word, silence until the window closes (or the segmenter's `NoSpeech`) goes back to idle.
A reply that asked a question (`ReplyFinished(expects_answer=True)`) opens the window in either
mode, so the answer needs no wake word.

Announcements wait for idle, so they never talk over the user or a reply; the wake word over one
stops it when barge-in is on, as it does a reply. "Stop" said over either (`StopHeard`, no wake
word) silences it and goes back to idle without a turn.

Every failure and cancellation path goes back to idle. An event that means nothing in the current
state (a transcript while idle, the wake word while thinking, a repeated event …) is ignored: no
state change, no intents, one DEBUG line, and `ignored` counts it — it never raises.

Wiring: the segmenter's `SpeechStarted` becomes `SpeechHeard`, `UtteranceEnded` becomes
`UtteranceCaptured`, `NoSpeech` becomes `NoSpeechHeard`; its `EarlyEnd` / `SpeechResumed` stay in
the daemon (speculative transcription). The person going on just after the turn was taken as over
(the daemon's go-on watch) is `SpeechContinued`: the reply begun is dropped and the capture goes on,
the words so far kept (`StartListening(resumed=True)`). Every `StartListening` begins a new turn
(`turn`); stamp the events of a turn's asynchronous work with it (`TranscriptReady(..., turn=n)`)
and results arriving after that turn was cancelled or barged into are ignored.

The machine is built on `transitions`; `describe()` and `to_dot()` are generated from that very
machine, so `elara fsm` always shows what runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Union

from transitions import EventData, Machine, MachineError

from elara.conversation.messages import PromptReady

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elara.settings import AudioSettings, ListeningSettings

log = logging.getLogger(__name__)

# -- states ----------------------------------------------------------------------------------

IDLE = "idle"
LISTENING = "listening"
TRANSCRIBING = "transcribing"
THINKING = "thinking"
SPEAKING = "speaking"
FOLLOW_UP = "follow_up"
ANNOUNCING = "announcing"
#: Every state, in the order a turn passes through them (announcing is outside turns).
STATES: tuple[str, ...] = (IDLE, LISTENING, TRANSCRIBING, THINKING, SPEAKING, FOLLOW_UP, ANNOUNCING)
#: How long the follow-up window stays open after a question when FollowUpSeconds is 0.
ANSWER_WINDOW_SECONDS = 6.0

Mode = Literal["wake_word", "continued"]
MODES: tuple[str, ...] = ("wake_word", "continued")

# -- input events ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DialogueEvent:
    """Base of the events `Dialogue.handle` takes. `trigger` names its transitions in the machine.

    `turn` (keyword-only, optional): the `Dialogue.turn` the work that produced this event belongs
    to. Stamp the results of asynchronous work (transcription, the orchestrator's reply) with the
    turn it started in, and a late result of a turn that was cancelled or barged into is ignored
    instead of being taken for the current turn's. None: not checked.
    """

    trigger: ClassVar[str]
    turn: int | None = field(default=None, kw_only=True)

    @property
    def time(self) -> float:
        """When it happened, in seconds of the daemon's monotonic clock."""
        return float(self.at)  # type: ignore[attr-defined]  # every event type declares `at` or `now`


@dataclass(frozen=True)
class WakeDetected(DialogueEvent):
    """The wake-word detector fired. `said_from`: where the phrase began, for a wake read only once
    the phrase was over (the listening reaches back to it); None for the detector's own."""

    trigger: ClassVar[str] = "wake_detected"
    at: float
    said_from: float | None = None


@dataclass(frozen=True)
class SpeechHeard(DialogueEvent):
    """The segmenter reported `SpeechStarted`: someone is talking (starts a follow-up turn)."""

    trigger: ClassVar[str] = "speech_heard"
    at: float


@dataclass(frozen=True)
class UtteranceCaptured(DialogueEvent):
    """The segmenter reported `UtteranceEnded`: the daemon holds the utterance's audio."""

    trigger: ClassVar[str] = "utterance_captured"
    at: float


@dataclass(frozen=True)
class NoSpeechHeard(DialogueEvent):
    """The segmenter reported `NoSpeech`: nobody spoke in time."""

    trigger: ClassVar[str] = "no_speech_heard"
    at: float


@dataclass(frozen=True)
class TranscriptReady(DialogueEvent):
    """Speech-to-text produced the user's words (blank text is treated as a rejection)."""

    trigger: ClassVar[str] = "transcript_ready"
    text: str
    at: float


@dataclass(frozen=True)
class TranscriptRejected(DialogueEvent):
    """Speech-to-text produced nothing usable: empty, a phantom ("Thank you."), too unsure…"""

    trigger: ClassVar[str] = "transcript_rejected"
    reason: str
    at: float


@dataclass(frozen=True)
class ReplyStarted(DialogueEvent):
    """The first audio of the reply started playing."""

    trigger: ClassVar[str] = "reply_started"
    at: float


@dataclass(frozen=True)
class ReplyFinished(DialogueEvent):
    """The turn's reply is over: all of it was spoken (or there was nothing to say).
    `expects_answer`: the reply asked the user a question; `quiet`: the person asked for quiet
    ("stop"), so no follow-up window opens."""

    trigger: ClassVar[str] = "reply_finished"
    at: float
    expects_answer: bool = False
    quiet: bool = False


@dataclass(frozen=True)
class AnnouncementStarted(DialogueEvent):
    """An announcement began playing (the loop starts one only while idle)."""

    trigger: ClassVar[str] = "announcement_started"
    at: float


@dataclass(frozen=True)
class AnnouncementFinished(DialogueEvent):
    """The announcement is over (heard, cut, or failed to play)."""

    trigger: ClassVar[str] = "announcement_finished"
    at: float


@dataclass(frozen=True)
class StopHeard(DialogueEvent):
    """The person said "stop" (no wake word) while Elara spoke: silence her, start no turn."""

    trigger: ClassVar[str] = "stop_heard"
    at: float


@dataclass(frozen=True)
class SpeechContinued(DialogueEvent):
    """The person went on speaking just after the turn was taken as over (a thinking pause, not
    the end): drop the reply begun for the words so far and listen on, the same words included."""

    trigger: ClassVar[str] = "speech_continued"
    at: float


@dataclass(frozen=True)
class TurnFailed(DialogueEvent):
    """Something in the turn failed (microphone, speech-to-text, model, speaker): give it up."""

    trigger: ClassVar[str] = "turn_failed"
    reason: str
    at: float


@dataclass(frozen=True)
class Tick(DialogueEvent):
    """The clock moved on: lets the follow-up window close. Harmless in every state."""

    trigger: ClassVar[str] = "tick"
    now: float

    @property
    def time(self) -> float:
        """When it happened: `now`."""
        return float(self.now)


@dataclass(frozen=True)
class Cancel(DialogueEvent):
    """Stop whatever is going on and go idle (shutdown, a user command). Harmless when idle."""

    trigger: ClassVar[str] = "cancel"
    at: float


#: Every event type `Dialogue.handle` understands.
EVENT_TYPES: tuple[type[DialogueEvent], ...] = (
    WakeDetected, SpeechHeard, UtteranceCaptured, NoSpeechHeard, TranscriptReady, TranscriptRejected,
    ReplyStarted, ReplyFinished, TurnFailed, Tick, Cancel, AnnouncementStarted, AnnouncementFinished,
    StopHeard, SpeechContinued,
)

# -- intents ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartListening:
    """Reset the segmenter and feed it every captured frame from now on (with the pre-roll the
    daemon buffers). Any capture already running is discarded and restarted. `follow_up` is True
    when this opens the follow-up window (no wake word was said; the window closes by `Tick`, or by
    the segmenter's `NoSpeech`, whichever comes first). `resumed` is True when the person went on
    after a pause taken for the end (`SpeechContinued`): the capture keeps the words before it.
    `said_from`: the capture reaches back to there (`WakeDetected.said_from`)."""

    follow_up: bool = False
    resumed: bool = False
    said_from: float | None = None


@dataclass(frozen=True)
class StopListening:
    """Stop feeding the segmenter; the capture is over (kept if `Transcribe` follows, else dropped)."""


@dataclass(frozen=True)
class Transcribe:
    """Transcribe the utterance the segmenter just delimited (its `UtteranceEnded` span, or reuse
    the speculative transcript of a matching `EarlyEnd` span), then send `TranscriptReady` or
    `TranscriptRejected` (or `TurnFailed`)."""


@dataclass(frozen=True)
class StopSpeaking:
    """Silence the speaker now: stop playback and drop queued sentences."""


@dataclass(frozen=True)
class CancelTurn:
    """Abandon the turn's work in flight: the transcription, the orchestrator's model request (its
    partial reply is not stored). Sent with `StopSpeaking` when speech was playing."""


@dataclass(frozen=True)
class ArmWakeWord:
    """The dialogue is idle: reset the wake-word detector (so audio from the turn, Elara's own
    voice included, cannot trigger it) and wait for the wake word."""


#: What `Dialogue.handle` may return. `PromptReady(text, source="voice")` (from
#: `elara.conversation.messages`) means: hand this text to the orchestrator as the user's turn.
Intent = Union[StartListening, StopListening, Transcribe, PromptReady, StopSpeaking, CancelTurn, ArmWakeWord]

# -- the machine -----------------------------------------------------------------------------


def _guard(label: str) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    """Name a condition for the diagrams."""

    def mark(func: Callable[..., bool]) -> Callable[..., bool]:
        func.label = label  # type: ignore[attr-defined]
        return func

    return mark


class _Model:
    """What `transitions` binds its trigger methods and the `state` attribute to."""

    state: str


class Dialogue:
    """The conversation state machine. Feed it events with `handle`; do what the intents say."""

    def __init__(self, mode: Mode | str = "wake_word", follow_up_seconds: float = 0.0, *,
                 barge_in: bool = False) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if not follow_up_seconds >= 0:
            raise ValueError(f"follow_up_seconds must be >= 0, got {follow_up_seconds!r}")
        self.mode: str = mode
        self.follow_up_seconds = float(follow_up_seconds)
        self.barge_in = bool(barge_in)
        self._intents: list[Any] = []
        self._ignored = 0
        self._turn = 0
        self._continues = False
        self._follow_up_deadline: float | None = None
        self._model = _Model()
        self._machine = Machine(
            model=self._model,
            states=[
                {"name": IDLE, "on_enter": [self._on_enter_idle]},
                {"name": LISTENING},
                {"name": TRANSCRIBING},
                {"name": THINKING},
                {"name": SPEAKING},
                {"name": FOLLOW_UP, "on_exit": [self._on_exit_follow_up]},
                {"name": ANNOUNCING},
            ],
            transitions=self._transitions(),
            initial=IDLE,
            auto_transitions=False,
            send_event=True,
            ignore_invalid_triggers=False,
            name="dialogue",
        )

    @classmethod
    def from_settings(cls, listening: ListeningSettings, audio: AudioSettings, *,
                      echo_cancelled: bool | None = None) -> Dialogue:
        """A dialogue configured from the `Listening` and `Audio` settings sections; barge-in
        unset follows echo cancellation (`echo_cancelled`, or the setting when not given)."""
        barge_in = audio.barge_in
        if barge_in is None:
            barge_in = audio.echo_cancellation if echo_cancelled is None else echo_cancelled
        return cls(listening.mode, listening.follow_up_seconds, barge_in=barge_in)

    def _transitions(self) -> list[dict[str, Any]]:
        busy = [LISTENING, TRANSCRIBING, THINKING, SPEAKING, FOLLOW_UP]
        capturing = [LISTENING, FOLLOW_UP]
        return [
            # the wake word: a new turn (from idle, or restarting the follow-up capture), barge-in
            {"trigger": "wake_detected", "source": IDLE, "dest": LISTENING, "after": self._start_listening},
            {"trigger": "wake_detected", "source": FOLLOW_UP, "dest": LISTENING, "after": self._start_listening},
            {"trigger": "wake_detected", "source": [SPEAKING, ANNOUNCING], "dest": LISTENING,
             "conditions": self._barge_in_enabled, "before": self._abort, "after": self._start_listening},
            # announcements: only from idle, and back to it
            {"trigger": "announcement_started", "source": IDLE, "dest": ANNOUNCING},
            {"trigger": "announcement_finished", "source": ANNOUNCING, "dest": IDLE},
            # capture
            {"trigger": "speech_heard", "source": FOLLOW_UP, "dest": LISTENING},
            {"trigger": "speech_heard", "source": LISTENING, "dest": None},
            {"trigger": "utterance_captured", "source": capturing, "dest": TRANSCRIBING, "after": self._transcribe},
            {"trigger": "no_speech_heard", "source": capturing, "dest": IDLE, "before": self._stop_listening},
            # speech-to-text
            {"trigger": "transcript_ready", "source": TRANSCRIBING, "dest": THINKING, "conditions": self._has_text,
             "after": self._prompt_ready},
            {"trigger": "transcript_ready", "source": TRANSCRIBING, "dest": IDLE},
            {"trigger": "transcript_rejected", "source": TRANSCRIBING, "dest": IDLE},
            # the reply
            {"trigger": "reply_started", "source": THINKING, "dest": SPEAKING},
            {"trigger": "reply_finished", "source": [THINKING, SPEAKING], "dest": FOLLOW_UP,
             "conditions": self._follows_up, "after": self._open_follow_up},
            {"trigger": "reply_finished", "source": [THINKING, SPEAKING], "dest": IDLE},
            # "stop" said over her reply or a ringing timer: silence, and no new turn
            {"trigger": "stop_heard", "source": [SPEAKING, ANNOUNCING], "dest": IDLE, "before": self._abort},
            # the person went on after the pause taken for the end: the same turn, listened to on
            {"trigger": "speech_continued", "source": [TRANSCRIBING, THINKING, SPEAKING], "dest": LISTENING,
             "before": self._abort, "after": self._resume_listening},
            # failures and cancellation
            {"trigger": "turn_failed", "source": busy, "dest": IDLE, "before": self._abort},
            {"trigger": "cancel", "source": [*busy, ANNOUNCING], "dest": IDLE, "before": self._abort},
            {"trigger": "cancel", "source": IDLE, "dest": None},
            # the clock: closes the follow-up window, otherwise nothing
            {"trigger": "tick", "source": FOLLOW_UP, "dest": IDLE, "conditions": self._follow_up_expired,
             "before": self._stop_listening},
            {"trigger": "tick", "source": "*", "dest": None},
        ]

    # -- public API --------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """The current state: one of `STATES`."""
        return self._model.state

    @property
    def turn(self) -> int:
        """The current turn's number: 0 before the first; each `StartListening` begins a new one."""
        return self._turn

    @property
    def continues(self) -> bool:
        """True while the words being captured go on a turn taken as over (`SpeechContinued`):
        their `PromptReady` has `continues` set."""
        return self._continues

    @property
    def ignored(self) -> int:
        """How many events were ignored because they meant nothing in the state they arrived in."""
        return self._ignored

    @property
    def follow_up_deadline(self) -> float | None:
        """When the follow-up window closes (clock of the events), while in follow_up; else None."""
        return self._follow_up_deadline

    def accepts(self, event: DialogueEvent) -> bool:
        """Whether `handle(event)` would act on `event` now (e.g. run the wake-word detector only
        while `accepts(WakeDetected(now))`)."""
        self._check(event)
        if event.turn is not None and event.turn != self._turn:
            return False
        return bool(self._model.may_trigger(event.trigger, event=event))  # type: ignore[attr-defined]

    def handle(self, event: DialogueEvent) -> list[Intent]:
        """Apply one event; return the intents, in the order to carry them out ([] if ignored)."""
        self._check(event)
        source = self.state
        if event.turn is not None and event.turn != self._turn:
            return self._ignore(event, source, f"stale: turn {event.turn}, now {self._turn}")
        if event.trigger not in self._machine.get_triggers(source):
            return self._ignore(event, source)
        self._intents = []
        try:
            moved = self._model.trigger(event.trigger, event=event)  # type: ignore[attr-defined]
        except MachineError:  # not reachable after the check above; never let it escape
            moved = False
        intents, self._intents = self._intents, []
        if not moved:
            return self._ignore(event, source)
        if self.state != source:
            log.debug("dialogue: %s -> %s on %s", source, self.state, type(event).__name__)
        return intents

    # -- diagrams ----------------------------------------------------------------------------

    def _edges(self) -> list[tuple[str, str, str | None, list[str], bool]]:
        """(source, trigger, dest or None for "stays", guard labels, is the fallback) per transition."""
        edges = []
        for state in self._machine.states:
            for trigger in self._machine.get_triggers(state):
                guarded_before = False
                for transition in self._machine.events[trigger].transitions[state]:
                    labels = [getattr(c.func, "label", getattr(c.func, "__name__", str(c.func)))
                              if c.target else f"not {getattr(c.func, 'label', c.func)}"
                              for c in transition.conditions]
                    edges.append((state, trigger, transition.dest, labels, guarded_before and not labels))
                    guarded_before = guarded_before or bool(labels)
        return edges

    def describe(self) -> str:
        """A readable state diagram: every state with its outgoing transitions and their triggers."""
        lines = [
            f"Dialogue state machine (mode={self.mode}, follow_up_seconds={self.follow_up_seconds:g}, "
            f"barge_in={'on' if self.barge_in else 'off'})",
            "",
        ]
        edges = self._edges()
        width = max(len(trigger) for _, trigger, _, _, _ in edges)
        for state in self._machine.states:
            note = " (initial)" if state == self._machine.initial else ""
            lines.append(f"{state}{note}")
            for source, trigger, dest, labels, fallback in edges:
                if source != state:
                    continue
                guard = f"  [{' and '.join(labels)}]" if labels else ("  [otherwise]" if fallback else "")
                target = f"-> {dest}" if dest is not None else "(stays)"
                lines.append(f"  {trigger:<{width}}  {target}{guard}")
        lines.append("")
        lines.append("Events: " + ", ".join(f"{t.trigger}={t.__name__}" for t in EVENT_TYPES))
        return "\n".join(lines) + "\n"

    def to_dot(self) -> str:
        """The same diagram in Graphviz dot (`elara fsm --dot | dot -Tsvg > fsm.svg`)."""

        def quote(text: str) -> str:
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

        lines = [
            "digraph dialogue {",
            "  rankdir=LR;",
            f"  label={quote(f'Elara dialogue (mode={self.mode}, barge_in={self.barge_in})')};",
            "  node [shape=box, style=rounded];",
            "  __start__ [shape=point, label=\"\"];",
        ]
        for state in self._machine.states:
            lines.append(f"  {quote(state)};")
        lines.append(f"  __start__ -> {quote(str(self._machine.initial))};")
        for source, trigger, dest, labels, fallback in self._edges():
            label = trigger
            if labels:
                label += f" [{' and '.join(labels)}]"
            elif fallback:
                label += " [otherwise]"
            style = ", style=dashed" if dest is None else ""
            lines.append(f"  {quote(source)} -> {quote(dest or source)} [label={quote(label)}{style}];")
        lines.append("}")
        return "\n".join(lines) + "\n"

    # -- internals ---------------------------------------------------------------------------

    @staticmethod
    def _check(event: object) -> None:
        if not isinstance(event, DialogueEvent):
            raise TypeError(f"not a dialogue event: {event!r}")

    def _ignore(self, event: DialogueEvent, state: str, why: str = "") -> list[Intent]:
        self._ignored += 1
        log.debug("dialogue: ignored %s in state %s%s", type(event).__name__, state, f" ({why})" if why else "")
        return []

    @staticmethod
    def _event(data: EventData) -> Any:
        return data.kwargs["event"]

    # guards

    @_guard("barge_in")
    def _barge_in_enabled(self, data: EventData) -> bool:
        return self.barge_in

    @_guard("not asked for quiet, and a question was asked or continued mode and follow_up_seconds > 0")
    def _follows_up(self, data: EventData) -> bool:
        event = self._event(data)
        return not event.quiet and (event.expects_answer
                                    or (self.mode == "continued" and self.follow_up_seconds > 0))

    @_guard("text not blank")
    def _has_text(self, data: EventData) -> bool:
        return bool(self._event(data).text.strip())

    @_guard("follow-up window over")
    def _follow_up_expired(self, data: EventData) -> bool:
        deadline = self._follow_up_deadline
        return deadline is not None and self._event(data).time >= deadline

    # callbacks that emit intents

    def _start_listening(self, data: EventData) -> None:
        self._turn += 1
        self._continues = False
        self._intents.append(StartListening(follow_up=False, said_from=self._event(data).said_from))

    def _resume_listening(self, data: EventData) -> None:
        self._turn += 1  # the dropped reply's late results are stale
        self._continues = True
        self._intents.append(StartListening(resumed=True))

    def _open_follow_up(self, data: EventData) -> None:
        self._turn += 1
        self._continues = False
        self._follow_up_deadline = self._event(data).time + (self.follow_up_seconds or ANSWER_WINDOW_SECONDS)
        self._intents.append(StartListening(follow_up=True))

    def _stop_listening(self, data: EventData) -> None:
        self._intents.append(StopListening())

    def _transcribe(self, data: EventData) -> None:
        self._intents += [StopListening(), Transcribe()]

    def _prompt_ready(self, data: EventData) -> None:
        self._intents.append(PromptReady(text=self._event(data).text.strip(), source="voice",
                                         continues=self._continues))

    def _abort(self, data: EventData) -> None:
        """Undo whatever the state being left has running."""
        source = data.state.name
        if source in (LISTENING, FOLLOW_UP):
            self._intents.append(StopListening())
        elif source in (TRANSCRIBING, THINKING):
            self._intents.append(CancelTurn())
        elif source == SPEAKING:
            self._intents += [StopSpeaking(), CancelTurn()]
        elif source == ANNOUNCING:
            self._intents.append(StopSpeaking())
        event = self._event(data)
        reason = getattr(event, "reason", None)
        log.debug("dialogue: %s in %s%s", type(event).__name__, source, f" ({reason})" if reason else "")

    def _on_enter_idle(self, data: EventData) -> None:
        self._intents.append(ArmWakeWord())

    def _on_exit_follow_up(self, data: EventData) -> None:
        self._follow_up_deadline = None
