"""The conversation state machine, driven by event values and a fake clock (plain numbers)."""

from __future__ import annotations

import logging
import re
from dataclasses import replace

import pytest

from elara.conversation.messages import PromptReady
from elara.settings import AudioSettings, ListeningSettings
from elara.voice.dialogue import (
    ANNOUNCING,
    EVENT_TYPES,
    FOLLOW_UP,
    IDLE,
    LISTENING,
    SPEAKING,
    STATES,
    THINKING,
    TRANSCRIBING,
    AnnouncementFinished,
    AnnouncementStarted,
    ArmWakeWord,
    Cancel,
    CancelTurn,
    Dialogue,
    DialogueEvent,
    NoSpeechHeard,
    ReplyFinished,
    ReplyStarted,
    SpeechContinued,
    SpeechHeard,
    StartListening,
    StopHeard,
    StopListening,
    StopSpeaking,
    Tick,
    Transcribe,
    TranscriptReady,
    TranscriptRejected,
    TurnFailed,
    UtteranceCaptured,
    WakeDetected,
)


def sample(event_type: type[DialogueEvent], t: float = 0.0) -> DialogueEvent:
    """One event of each type, at time t."""
    return {
        WakeDetected: lambda: WakeDetected(at=t),
        SpeechHeard: lambda: SpeechHeard(at=t),
        UtteranceCaptured: lambda: UtteranceCaptured(at=t),
        NoSpeechHeard: lambda: NoSpeechHeard(at=t),
        TranscriptReady: lambda: TranscriptReady(text="what time is it", at=t),
        TranscriptRejected: lambda: TranscriptRejected(reason="phantom", at=t),
        ReplyStarted: lambda: ReplyStarted(at=t),
        ReplyFinished: lambda: ReplyFinished(at=t),
        TurnFailed: lambda: TurnFailed(reason="boom", at=t),
        Tick: lambda: Tick(now=t),
        Cancel: lambda: Cancel(at=t),
        AnnouncementStarted: lambda: AnnouncementStarted(at=t),
        AnnouncementFinished: lambda: AnnouncementFinished(at=t),
        StopHeard: lambda: StopHeard(at=t),
        SpeechContinued: lambda: SpeechContinued(at=t),
    }[event_type]()


# how to reach each state from idle (times 1, 2, 3 …)
PATHS: dict[str, list[type[DialogueEvent]]] = {
    IDLE: [],
    LISTENING: [WakeDetected],
    TRANSCRIBING: [WakeDetected, UtteranceCaptured],
    THINKING: [WakeDetected, UtteranceCaptured, TranscriptReady],
    SPEAKING: [WakeDetected, UtteranceCaptured, TranscriptReady, ReplyStarted],
    FOLLOW_UP: [WakeDetected, UtteranceCaptured, TranscriptReady, ReplyStarted, ReplyFinished],
    ANNOUNCING: [AnnouncementStarted],
}


def reach(state: str, mode: str = "continued", *, barge_in: bool = False, follow_up: float = 6.0) -> Dialogue:
    dialogue = Dialogue(mode, follow_up, barge_in=barge_in)
    for t, event_type in enumerate(PATHS[state], start=1):
        dialogue.handle(sample(event_type, t))
    assert dialogue.state == state
    assert dialogue.ignored == 0
    return dialogue


def test_states_and_events_are_what_the_machine_has() -> None:
    assert STATES == (IDLE, LISTENING, TRANSCRIBING, THINKING, SPEAKING, FOLLOW_UP, ANNOUNCING)
    assert Dialogue("wake_word", 0).state == IDLE
    assert len({t.trigger for t in EVENT_TYPES}) == len(EVENT_TYPES) == 15


# -- happy paths -----------------------------------------------------------------------------


def test_wake_word_mode_turn() -> None:
    d = Dialogue("wake_word", 6.0)
    steps = [
        (WakeDetected(at=1.0), LISTENING, [StartListening(follow_up=False)]),
        (SpeechHeard(at=1.5), LISTENING, []),
        (UtteranceCaptured(at=3.0), TRANSCRIBING, [StopListening(), Transcribe()]),
        (TranscriptReady(text=" What time is it? ", at=3.4), THINKING,
         [PromptReady(text="What time is it?", source="voice")]),
        (ReplyStarted(at=4.0), SPEAKING, []),
        (ReplyFinished(at=7.0), IDLE, [ArmWakeWord()]),
    ]
    for event, state, intents in steps:
        assert d.handle(event) == intents, event
        assert d.state == state
    assert d.ignored == 0
    assert d.follow_up_deadline is None
    # the next turn needs the wake word again
    assert d.handle(SpeechHeard(at=8.0)) == [] and d.state == IDLE and d.ignored == 1
    assert d.handle(WakeDetected(at=9.0)) == [StartListening()] and d.state == LISTENING


def test_prompt_ready_is_the_orchestrators_message_type() -> None:
    d = reach(TRANSCRIBING)
    (intent,) = d.handle(TranscriptReady(text="hello", at=5))
    assert type(intent) is PromptReady and intent.source == "voice"


def test_continued_mode_turn_opens_the_follow_up_window() -> None:
    d = reach(SPEAKING, "continued", follow_up=6.0)
    assert d.handle(ReplyFinished(at=10.0)) == [StartListening(follow_up=True)]
    assert d.state == FOLLOW_UP
    assert d.follow_up_deadline == 16.0


def test_follow_up_times_out_on_tick() -> None:
    d = reach(SPEAKING, "continued", follow_up=6.0)
    d.handle(ReplyFinished(at=10.0))
    for now in (10.0, 12.5, 15.999):
        assert d.handle(Tick(now=now)) == []
        assert d.state == FOLLOW_UP
    assert d.handle(Tick(now=16.0)) == [StopListening(), ArmWakeWord()]
    assert d.state == IDLE
    assert d.follow_up_deadline is None
    assert d.ignored == 0  # ticks are never "ignored"


def test_follow_up_window_is_measured_from_entering_it() -> None:
    d = reach(SPEAKING, "continued", follow_up=2.0)
    d.handle(Tick(now=100.0))  # a long reply: time passes while speaking
    d.handle(ReplyFinished(at=100.0))
    assert d.handle(Tick(now=101.9)) == [] and d.state == FOLLOW_UP
    assert d.handle(Tick(now=102.5)) == [StopListening(), ArmWakeWord()] and d.state == IDLE


def test_speech_in_follow_up_starts_a_turn_without_the_wake_word() -> None:
    d = reach(SPEAKING, "continued", follow_up=6.0)
    d.handle(ReplyFinished(at=10.0))
    turn = d.turn
    # the segmenter already runs (StartListening(follow_up=True)): no new intent, it keeps capturing
    assert d.handle(SpeechHeard(at=12.0)) == []
    assert d.state == LISTENING and d.turn == turn
    assert d.follow_up_deadline is None
    # the window's deadline no longer applies
    assert d.handle(Tick(now=30.0)) == [] and d.state == LISTENING
    assert d.handle(UtteranceCaptured(at=31.0)) == [StopListening(), Transcribe()]
    assert d.handle(TranscriptReady(text="and tomorrow?", at=31.5)) == [PromptReady("and tomorrow?", "voice")]
    assert d.handle(ReplyStarted(at=32.0)) == []
    assert d.handle(ReplyFinished(at=35.0)) == [StartListening(follow_up=True)]
    assert d.state == FOLLOW_UP and d.follow_up_deadline == 41.0
    assert d.ignored == 0


def test_utterance_captured_straight_from_follow_up() -> None:
    d = reach(FOLLOW_UP)
    assert d.handle(UtteranceCaptured(at=9)) == [StopListening(), Transcribe()]
    assert d.state == TRANSCRIBING


def test_wake_word_in_follow_up_restarts_the_capture() -> None:
    d = reach(FOLLOW_UP)
    turn = d.turn
    assert d.handle(WakeDetected(at=9)) == [StartListening(follow_up=False)]
    assert d.state == LISTENING and d.turn == turn + 1


def test_no_speech_in_follow_up_goes_idle() -> None:
    d = reach(FOLLOW_UP)
    assert d.handle(NoSpeechHeard(at=9)) == [StopListening(), ArmWakeWord()]
    assert d.state == IDLE


def test_continued_mode_with_no_follow_up_time_goes_idle() -> None:
    d = reach(SPEAKING, "continued", follow_up=0)
    assert d.handle(ReplyFinished(at=9)) == [ArmWakeWord()]
    assert d.state == IDLE


def test_a_reply_with_nothing_spoken_still_ends_the_turn() -> None:
    d = reach(THINKING, "wake_word")
    assert d.handle(ReplyFinished(at=9)) == [ArmWakeWord()] and d.state == IDLE
    d = reach(THINKING, "continued")
    assert d.handle(ReplyFinished(at=9)) == [StartListening(follow_up=True)] and d.state == FOLLOW_UP


# -- error paths -----------------------------------------------------------------------------


def test_no_speech_after_the_wake_word_goes_idle() -> None:
    d = reach(LISTENING)
    assert d.handle(NoSpeechHeard(at=9)) == [StopListening(), ArmWakeWord()]
    assert d.state == IDLE


def test_rejected_transcript_goes_idle() -> None:
    d = reach(TRANSCRIBING)
    assert d.handle(TranscriptRejected(reason="phantom", at=9)) == [ArmWakeWord()]
    assert d.state == IDLE


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_blank_transcript_is_a_rejection(text: str) -> None:
    d = reach(TRANSCRIBING)
    assert d.handle(TranscriptReady(text=text, at=9)) == [ArmWakeWord()]
    assert d.state == IDLE


CLEANUP = {
    LISTENING: [StopListening()],
    TRANSCRIBING: [CancelTurn()],
    THINKING: [CancelTurn()],
    SPEAKING: [StopSpeaking(), CancelTurn()],
    FOLLOW_UP: [StopListening()],
}


@pytest.mark.parametrize("state", list(CLEANUP))
@pytest.mark.parametrize("event_type", [TurnFailed, Cancel])
def test_failure_and_cancel_clean_up_and_go_idle(state: str, event_type: type[DialogueEvent]) -> None:
    d = reach(state)
    assert d.handle(sample(event_type, 50)) == CLEANUP[state] + [ArmWakeWord()]
    assert d.state == IDLE
    assert d.follow_up_deadline is None
    # and the next turn works
    assert d.handle(WakeDetected(at=60)) == [StartListening()]
    assert d.state == LISTENING


@pytest.mark.parametrize("state", [TRANSCRIBING, THINKING, SPEAKING])
def test_speech_continued_drops_the_reply_and_listens_on_in_a_new_turn(state: str) -> None:
    d = reach(state)
    turn = d.turn
    assert d.handle(SpeechContinued(at=50)) == CLEANUP[state] + [StartListening(resumed=True)]
    assert d.state == LISTENING and d.turn == turn + 1
    # the dropped reply's late results belong to the old turn: ignored
    assert d.handle(ReplyFinished(at=51, turn=turn)) == [] and d.state == LISTENING
    assert d.handle(UtteranceCaptured(at=52)) == [StopListening(), Transcribe()]


def test_cancel_and_tick_when_idle_do_nothing() -> None:
    d = Dialogue("continued", 6)
    assert d.handle(Cancel(at=1)) == [] and d.handle(Tick(now=2)) == []
    assert d.state == IDLE and d.ignored == 0


def test_turn_failed_when_idle_is_ignored() -> None:
    d = Dialogue("continued", 6)
    assert d.handle(TurnFailed(reason="late", at=1)) == []
    assert d.state == IDLE and d.ignored == 1


# -- every event in every state --------------------------------------------------------------

X = None  # ignored: no state change, no intents, counted

# expected state after each event type, per state (continued mode, barge-in off)
TABLE: dict[str, dict[type[DialogueEvent], str | None]] = {
    IDLE: {
        WakeDetected: LISTENING, SpeechHeard: X, UtteranceCaptured: X, NoSpeechHeard: X, TranscriptReady: X,
        TranscriptRejected: X, ReplyStarted: X, ReplyFinished: X, TurnFailed: X, Tick: IDLE, Cancel: IDLE,
        AnnouncementStarted: ANNOUNCING, AnnouncementFinished: X, StopHeard: X,
        SpeechContinued: X,
    },
    LISTENING: {
        WakeDetected: X, SpeechHeard: LISTENING, UtteranceCaptured: TRANSCRIBING, NoSpeechHeard: IDLE,
        TranscriptReady: X, TranscriptRejected: X, ReplyStarted: X, ReplyFinished: X, TurnFailed: IDLE,
        Tick: LISTENING, Cancel: IDLE, AnnouncementStarted: X, AnnouncementFinished: X, StopHeard: X,
        SpeechContinued: X,
    },
    TRANSCRIBING: {
        WakeDetected: X, SpeechHeard: X, UtteranceCaptured: X, NoSpeechHeard: X, TranscriptReady: THINKING,
        TranscriptRejected: IDLE, ReplyStarted: X, ReplyFinished: X, TurnFailed: IDLE, Tick: TRANSCRIBING,
        Cancel: IDLE, AnnouncementStarted: X, AnnouncementFinished: X, StopHeard: X,
        SpeechContinued: LISTENING,
    },
    THINKING: {
        WakeDetected: X, SpeechHeard: X, UtteranceCaptured: X, NoSpeechHeard: X, TranscriptReady: X,
        TranscriptRejected: X, ReplyStarted: SPEAKING, ReplyFinished: FOLLOW_UP, TurnFailed: IDLE,
        Tick: THINKING, Cancel: IDLE, AnnouncementStarted: X, AnnouncementFinished: X, StopHeard: X,
        SpeechContinued: LISTENING,
    },
    SPEAKING: {
        WakeDetected: X, SpeechHeard: X, UtteranceCaptured: X, NoSpeechHeard: X, TranscriptReady: X,
        TranscriptRejected: X, ReplyStarted: X, ReplyFinished: FOLLOW_UP, TurnFailed: IDLE, Tick: SPEAKING,
        Cancel: IDLE, AnnouncementStarted: X, AnnouncementFinished: X, StopHeard: IDLE,
        SpeechContinued: LISTENING,
    },
    FOLLOW_UP: {
        WakeDetected: LISTENING, SpeechHeard: LISTENING, UtteranceCaptured: TRANSCRIBING, NoSpeechHeard: IDLE,
        TranscriptReady: X, TranscriptRejected: X, ReplyStarted: X, ReplyFinished: X, TurnFailed: IDLE,
        Tick: FOLLOW_UP, Cancel: IDLE, AnnouncementStarted: X, AnnouncementFinished: X, StopHeard: X,
        SpeechContinued: X,
    },
    ANNOUNCING: {
        WakeDetected: X, SpeechHeard: X, UtteranceCaptured: X, NoSpeechHeard: X, TranscriptReady: X,
        TranscriptRejected: X, ReplyStarted: X, ReplyFinished: X, TurnFailed: X, Tick: ANNOUNCING,
        Cancel: IDLE, AnnouncementStarted: X, AnnouncementFinished: IDLE, StopHeard: IDLE,
        SpeechContinued: X,
    },
}


def expected(mode: str, barge_in: bool, state: str, event_type: type[DialogueEvent]) -> str | None:
    result = TABLE[state][event_type]
    if mode == "wake_word" and state in (THINKING, SPEAKING) and event_type is ReplyFinished:
        result = IDLE
    if barge_in and state in (SPEAKING, ANNOUNCING) and event_type is WakeDetected:
        result = LISTENING
    return result


def test_the_table_covers_every_state_and_event() -> None:
    assert set(TABLE) == set(STATES)
    for row in TABLE.values():
        assert set(row) == set(EVENT_TYPES)


CASES = [
    (mode, barge_in, state, event_type)
    for mode in ("wake_word", "continued")
    for barge_in in (False, True)
    for state in STATES
    if not (mode == "wake_word" and state == FOLLOW_UP)  # unreachable in wake_word mode
    for event_type in EVENT_TYPES
]


@pytest.mark.parametrize("mode, barge_in, state, event_type", CASES,
                         ids=[f"{m}-{'barge' if b else 'nobarge'}-{s}-{e.__name__}" for m, b, s, e in CASES])
def test_every_event_in_every_state(mode: str, barge_in: bool, state: str, event_type: type[DialogueEvent]) -> None:
    d = reach(state, mode, barge_in=barge_in)
    event = sample(event_type, 10.0)  # 10 s: the follow-up window (6 s from t=5) has not closed
    want = expected(mode, barge_in, state, event_type)
    assert d.accepts(event) == (want is not X)
    intents = d.handle(event)
    if want is X:
        assert intents == []
        assert d.state == state
        assert d.ignored == 1
    else:
        assert d.state == want
        assert d.ignored == 0
        if want == IDLE and state != IDLE:
            assert intents[-1] == ArmWakeWord()


def test_follow_up_is_unreachable_in_wake_word_mode() -> None:
    d = Dialogue("wake_word", 6.0, barge_in=True)
    seen = {d.state}
    # a breadth of sequences: every event after every state reached along the normal paths
    for state in (IDLE, LISTENING, TRANSCRIBING, THINKING, SPEAKING):
        for event_type in EVENT_TYPES:
            d = reach(state, "wake_word", barge_in=True)
            d.handle(sample(event_type, 10.0))
            d.handle(Tick(now=1000.0))
            seen.add(d.state)
    assert FOLLOW_UP not in seen


def test_repeated_events_are_harmless() -> None:
    d = reach(SPEAKING)
    assert d.handle(ReplyStarted(at=9)) == []
    assert d.state == SPEAKING and d.ignored == 1


def test_ignored_events_are_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    d = Dialogue("continued", 6)
    with caplog.at_level(logging.DEBUG, logger="elara.voice.dialogue"):
        d.handle(TranscriptReady(text="secret words", at=1))
    records = [r for r in caplog.records if r.name == "elara.voice.dialogue"]
    assert records and all(r.levelno == logging.DEBUG for r in records)
    assert "TranscriptReady" in records[0].getMessage() and "idle" in records[0].getMessage()
    assert "secret" not in caplog.text  # conversation text is never logged by the dialogue


def test_non_events_are_a_programming_error() -> None:
    with pytest.raises(TypeError):
        Dialogue("continued", 6).handle("wake")  # type: ignore[arg-type]


# -- barge-in --------------------------------------------------------------------------------


def test_barge_in_on_stops_speaking_and_listens() -> None:
    d = reach(SPEAKING, barge_in=True)
    turn = d.turn
    assert d.handle(WakeDetected(at=9)) == [StopSpeaking(), CancelTurn(), StartListening(follow_up=False)]
    assert d.state == LISTENING and d.turn == turn + 1
    assert d.handle(UtteranceCaptured(at=11)) == [StopListening(), Transcribe()]


def test_a_wake_read_once_the_phrase_was_over_listens_from_where_it_was_said() -> None:
    d = reach(SPEAKING, barge_in=True)
    assert d.handle(WakeDetected(at=9, said_from=7.8)) == [StopSpeaking(), CancelTurn(),
                                                            StartListening(said_from=7.8)]


def test_barge_in_off_ignores_the_wake_word_while_speaking() -> None:
    d = reach(SPEAKING, barge_in=False)
    assert not d.accepts(WakeDetected(at=9))
    assert d.handle(WakeDetected(at=9)) == []
    assert d.state == SPEAKING and d.ignored == 1
    assert d.handle(ReplyFinished(at=10)) == [StartListening(follow_up=True)]


@pytest.mark.parametrize("state", [LISTENING, TRANSCRIBING, THINKING])
def test_barge_in_only_while_speaking(state: str) -> None:
    d = reach(state, "wake_word", barge_in=True)
    assert d.handle(WakeDetected(at=9)) == [] and d.state == state


# -- stale results ---------------------------------------------------------------------------


def test_results_of_a_cancelled_turn_are_ignored() -> None:
    d = reach(SPEAKING, barge_in=True)
    old = d.turn
    d.handle(WakeDetected(at=9))  # barge-in: a new turn
    d.handle(UtteranceCaptured(at=10))
    d.handle(TranscriptReady(text="stop", at=10.5, turn=d.turn))
    assert d.state == THINKING
    # the cancelled turn's orchestrator reports late: it must not end the new turn
    assert d.handle(ReplyFinished(at=11, turn=old)) == []
    assert d.state == THINKING and d.ignored == 1
    assert not d.accepts(ReplyStarted(at=11, turn=old))
    assert d.accepts(ReplyStarted(at=11, turn=d.turn))
    assert d.handle(ReplyStarted(at=11, turn=d.turn)) == [] and d.state == SPEAKING


def test_turn_counts_captures() -> None:
    d = Dialogue("continued", 6)
    assert d.turn == 0
    d.handle(WakeDetected(at=1))
    assert d.turn == 1
    d.handle(NoSpeechHeard(at=6))
    assert d.turn == 1
    d.handle(WakeDetected(at=7))
    assert d.turn == 2


# -- construction ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode, seconds", [("always", 6), ("", 6), ("continued", -1), ("continued", float("nan"))])
def test_bad_configuration_is_refused(mode: str, seconds: float) -> None:
    with pytest.raises(ValueError):
        Dialogue(mode, seconds)


def test_from_settings() -> None:
    listening = ListeningSettings(mode="continued", vad="energy", vad_threshold=0.5, pre_roll_ms=300,
                                  end_silence_ms=600, min_speech_ms=200, max_utterance_seconds=15,
                                  no_speech_timeout_seconds=5, follow_up_seconds=4,
                                  turn_judgment="transcript", finished_ms=250, max_pause_ms=2000,
                                  uncertain_pause_ms=1300,
                                  speculative_reply=True, go_on_ms=1500)
    audio = AudioSettings(input_device=None, output_device=None, output_latency_ms=100,
                          speaker_tail_ms=300, echo_cancellation=False, echo_canceller="speex", barge_in=True,
                          stop_without_wake_word=True)
    d = Dialogue.from_settings(listening, audio)
    assert (d.mode, d.follow_up_seconds, d.barge_in) == ("continued", 4.0, True)
    # unset, barge-in follows echo cancellation: on when it works, off when it could not load
    follows = replace(audio, echo_cancellation=True, barge_in=None)
    assert Dialogue.from_settings(listening, follows).barge_in is True
    assert Dialogue.from_settings(listening, follows, echo_cancelled=False).barge_in is False
    assert Dialogue.from_settings(listening, replace(audio, barge_in=False),
                                  echo_cancelled=True).barge_in is False


# -- diagrams --------------------------------------------------------------------------------


def sections(text: str) -> dict[str, list[str]]:
    """describe()'s text split into {state: [its transition lines]}."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.split(" ")[0] in STATES:
            current = line.split(" ")[0]
            out[current] = []
        elif line.startswith("  ") and current:
            out[current].append(line.strip())
        else:
            current = None
    return out


@pytest.mark.parametrize("mode, barge_in", [("wake_word", False), ("continued", True)])
def test_describe_lists_every_state_and_what_it_acts_on(mode: str, barge_in: bool) -> None:
    d = Dialogue(mode, 6.0, barge_in=barge_in)
    text = d.describe()
    found = sections(text)
    assert list(found) == list(STATES)
    assert "idle (initial)" in text
    for event_type in EVENT_TYPES:
        assert event_type.trigger in text and event_type.__name__ in text
    # every event the table says a state acts on is listed under that state, and nothing else
    for state in STATES:
        listed = {line.split()[0] for line in found[state]}
        acted_on = {e.trigger for e in EVENT_TYPES if TABLE[state][e] is not X}
        if state in (SPEAKING, ANNOUNCING):
            acted_on.add(WakeDetected.trigger)  # guarded by barge_in, shown with its guard
        assert listed == acted_on, state
    assert any(re.fullmatch(r"wake_detected\s+-> listening\s+\[barge_in\]", line) for line in found[SPEAKING])
    assert any(re.fullmatch(r"tick\s+-> idle\s+\[follow-up window over\]", line) for line in found[FOLLOW_UP])


def test_to_dot_has_every_state_and_trigger() -> None:
    d = Dialogue("continued", 6.0, barge_in=True)
    dot = d.to_dot()
    assert dot.startswith("digraph dialogue {") and dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    for state in STATES:
        assert f'"{state}";' in dot
    for event_type in EVENT_TYPES:
        assert f'label="{event_type.trigger}' in dot
    assert '__start__ -> "idle";' in dot
    assert '"speaking" -> "listening" [label="wake_detected [barge_in]"];' in dot
    assert '"follow_up" -> "follow_up" [label="tick [otherwise]", style=dashed];' in dot
    # one edge per transition of the machine
    edges = [line for line in dot.splitlines() if "->" in line and "__start__" not in line]
    described = sum(len(lines) for lines in sections(d.describe()).values())
    assert len(edges) == described


def test_diagrams_follow_the_machine() -> None:
    # built from the Machine itself: a transition added to it shows up in both
    d = Dialogue("continued", 6.0)
    d._machine.add_transition("reply_started", "follow_up", "speaking")
    assert any(line.startswith("reply_started") for line in sections(d.describe())[FOLLOW_UP])
    assert '"follow_up" -> "speaking" [label="reply_started"];' in d.to_dot()


# -- announcements and questions -------------------------------------------------------------


def test_an_announcement_plays_from_idle_and_rearms_the_wake_word() -> None:
    d = Dialogue("wake_word", 0)
    assert d.handle(AnnouncementStarted(at=1)) == [] and d.state == ANNOUNCING
    assert d.handle(AnnouncementFinished(at=3)) == [ArmWakeWord()] and d.state == IDLE


def test_the_wake_word_over_an_announcement_stops_it_only_with_barge_in() -> None:
    quiet = Dialogue("wake_word", 0)
    quiet.handle(AnnouncementStarted(at=1))
    assert quiet.handle(WakeDetected(at=2)) == [] and quiet.state == ANNOUNCING
    barging = Dialogue("wake_word", 0, barge_in=True)
    barging.handle(AnnouncementStarted(at=1))
    assert barging.handle(WakeDetected(at=2)) == [StopSpeaking(), StartListening(follow_up=False)]
    assert barging.state == LISTENING


def test_an_announcement_never_starts_during_a_turn() -> None:
    d = reach(THINKING)
    assert d.handle(AnnouncementStarted(at=9)) == [] and d.state == THINKING


def test_a_question_opens_the_answer_window_in_wake_word_mode() -> None:
    d = Dialogue("wake_word", 0)
    for t, event_type in enumerate([WakeDetected, UtteranceCaptured, TranscriptReady, ReplyStarted], 1):
        d.handle(sample(event_type, t))
    assert d.handle(ReplyFinished(at=5, expects_answer=True)) == [StartListening(follow_up=True)]
    assert d.state == FOLLOW_UP and d.follow_up_deadline == 5 + 6.0
    d.handle(Tick(now=11.5))
    assert d.state == IDLE


@pytest.mark.parametrize("state, cleanup", [(SPEAKING, [StopSpeaking(), CancelTurn()]),
                                            (ANNOUNCING, [StopSpeaking()])])
def test_stop_heard_silences_her_and_starts_no_turn(state: str, cleanup: list[object]) -> None:
    d = reach(state, barge_in=True)
    turn = d.turn
    assert d.handle(StopHeard(at=50)) == [*cleanup, ArmWakeWord()]
    assert d.state == IDLE and d.turn == turn and d.follow_up_deadline is None
