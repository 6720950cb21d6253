"""End-of-turn judgment (elara.voice.turn): decision tables of numbers and strings."""

from __future__ import annotations

from dataclasses import replace

import pytest

from elara.config import load_settings
from elara.voice.turn import (
    Action,
    Ending,
    GoingOn,
    GoOnWatch,
    Judgment,
    PauseSignals,
    TurnJudge,
    TurnThresholds,
    Verdict,
    answer_ahead,
    judge,
    pause_limit_ms,
    read_again_wanted,
    transcript_ending,
)

WAKE = ("hey jarvis",)

# ---------------------------------------------------------------------------------------------
# the transcript's ending


@pytest.mark.parametrize(
    ("text", "ending"),
    [
        ("What is the capital of France?", Ending.FINISHED),
        ("Tell me a joke.", Ending.FINISHED),
        ("Turn the lights off!", Ending.FINISHED),
        ("What is the capital of", Ending.UNFINISHED),
        ("What is the capital of?", Ending.UNFINISHED),  # Whisper's "?" after a fragment
        ("What is the capital of.", Ending.UNFINISHED),
        ("Can you tell me the", Ending.UNFINISHED),
        ("What are the names for", Ending.UNFINISHED),
        ("How many moons are", Ending.UNFINISHED),
        ("How many moons are?", Ending.UNFINISHED),  # the only verb: a fragment
        # a question ending on a verb after an auxiliary is whole
        ("How many legs does a spider have?", Ending.FINISHED),
        ("Do you know where my keys are?", Ending.FINISHED),
        ("Can you tell me what the time is?", Ending.FINISHED),
        ("It is late. How many moons are?", Ending.UNFINISHED),  # the auxiliary is in another sentence
        ("How many legs does a spider have", Ending.UNFINISHED),  # no question mark: it may go on
        # "then" closing a question is an adverb; without the question mark, a cut conjunction
        ("And then?", Ending.FINISHED),
        ("What happens then?", Ending.FINISHED),
        ("Turn the lights off and then", Ending.UNFINISHED),
        ("Turn the lights off and then.", Ending.UNFINISHED),
        ("I want to know about my", Ending.UNFINISHED),
        ("Play some music and", Ending.UNFINISHED),
        ("Set a timer for ten minutes and a", Ending.UNFINISHED),
        ("Remind me to call with", Ending.UNFINISHED),
        ("What is the largest planet...", Ending.UNFINISHED),
        ("What is the largest planet…", Ending.UNFINISHED),
        ("What is the largest planet,", Ending.UNFINISHED),
        ("What is the largest, um", Ending.UNFINISHED),
        ("What is the largest planet", Ending.UNKNOWN),  # no punctuation: the words alone can't tell
        ("Paris.", Ending.UNKNOWN),  # one word: not a clause
        ("", Ending.UNKNOWN),
        ("   ", Ending.UNKNOWN),
        (None, Ending.UNKNOWN),
        # the wake phrase never ends a turn
        ("Hey Jarvis.", Ending.UNFINISHED),
        ("Hey Jarvis,", Ending.UNFINISHED),
        ("Hey, Jervis.", Ending.UNFINISHED),
        ("Hey Travis?", Ending.UNFINISHED),
        ("Jarvis.", Ending.UNFINISHED),
        ("Hey Jarvis, what is the capital of France?", Ending.FINISHED),
        ("Hey Jarvis, what is the capital of", Ending.UNFINISHED),
    ],
)
def test_transcript_ending(text, ending):
    assert transcript_ending(text, WAKE) is ending


def test_without_wake_phrases_the_phrase_is_just_words():
    assert transcript_ending("Hey Jarvis.", ()) is Ending.FINISHED


# ---------------------------------------------------------------------------------------------
# the decision

T = TurnThresholds(finished_ms=250, max_pause_ms=2000, end_silence_ms=600, wake_phrases=WAKE)
DONE = "What is the capital of France?"
HALF = "What is the capital of"


@pytest.mark.parametrize(
    ("silence", "text", "verdict", "action", "end_after"),
    [
        (200, DONE, Verdict.FINISHED, Action.WAIT, 250),
        (250, DONE, Verdict.FINISHED, Action.COMMIT, 250),
        (1200, HALF, Verdict.UNFINISHED, Action.WAIT, 2000),
        (2000, HALF, Verdict.UNFINISHED, Action.COMMIT, 2000),
        (250, "What is the largest planet", Verdict.UNKNOWN, Action.WAIT, 600),
        (600, "What is the largest planet", Verdict.UNKNOWN, Action.COMMIT, 600),
        # the wake phrase alone never ends a turn
        (1500, "Hey Jarvis.", Verdict.UNFINISHED, Action.WAIT, 2000),
        (250, "Hey Jarvis,", Verdict.UNFINISHED, Action.WAIT, 2000),
        # no signal: EndSilenceMs decides
        (250, None, Verdict.NO_SIGNAL, Action.FALLBACK, 600),
        (900, None, Verdict.NO_SIGNAL, Action.FALLBACK, 600),
    ],
)
def test_decision_table(silence, text, verdict, action, end_after):
    judgment = judge(PauseSignals(silence_ms=silence, transcript=text), T)
    assert (judgment.verdict, judgment.action, judgment.end_after_ms) == (verdict, action, end_after)
    assert judgment.reason


@pytest.mark.parametrize(("text", "logprob", "verdict"), [
    ("What is the capital of France?", -0.12, Verdict.FINISHED),  # Whisper sure of its words
    ("What is the capital of France?", -0.30, Verdict.FINISHED),  # at the threshold
    ("Tell me a fun fact I'm out.", -0.41, Verdict.UNKNOWN),  # "…fun fact about" half heard
    ("Can you tell me?", -0.49, Verdict.UNKNOWN),  # "Can you tell me the" with "the" lost
    ("What is the capital of", -0.05, Verdict.UNFINISHED),  # unfinished words need no doubt
    ("What is the capital of France?", None, Verdict.FINISHED),  # no score: the words decide
])
def test_a_full_stop_whisper_is_unsure_of_is_not_trusted(text, logprob, verdict):
    thresholds = TurnThresholds(uncertain_ms=1300)
    judgment = judge(PauseSignals(silence_ms=250, transcript=text, transcript_logprob=logprob), thresholds)
    assert judgment.verdict is verdict
    if verdict is Verdict.UNKNOWN:
        assert judgment.end_after_ms == 1300 and "unsure" in judgment.reason


def test_uncertain_wait_is_its_own_setting():
    thresholds = TurnThresholds(uncertain_ms=1400, end_silence_ms=600)
    judgment = judge(PauseSignals(silence_ms=700, transcript="What is the largest planet"), thresholds)
    assert (judgment.verdict, judgment.action, judgment.end_after_ms) == (Verdict.UNKNOWN, Action.WAIT, 1400)
    # no signal still falls back to EndSilenceMs, not to the uncertain wait
    assert judge(PauseSignals(silence_ms=700), thresholds).end_after_ms == 600


def test_the_judge_follows_new_thresholds():
    turn_judge = TurnJudge(TurnThresholds(finished_ms=250))
    signals = PauseSignals(silence_ms=220, transcript=DONE)
    assert turn_judge.judge(signals).action is Action.WAIT
    turn_judge.thresholds = TurnThresholds(finished_ms=200)
    assert turn_judge.judge(signals).action is Action.COMMIT


@pytest.mark.parametrize("kwargs", [dict(finished_ms=3000, max_pause_ms=2000), dict(finished_ms=-1)])
def test_inconsistent_thresholds_are_refused(kwargs):
    with pytest.raises(ValueError):
        TurnThresholds(**kwargs)


def _judged(verdict: Verdict) -> Judgment:
    return Judgment(verdict, Action.WAIT, 250, Ending.UNKNOWN, "test")


@pytest.mark.parametrize(("judgment", "enabled", "is_question", "ahead"), [
    (_judged(Verdict.FINISHED), True, True, True),
    (_judged(Verdict.UNKNOWN), True, True, True),  # the wait hides the model and the voice
    (_judged(Verdict.UNFINISHED), True, True, False),  # more words are coming: don't ask yet
    (None, True, True, True),  # the judgment is off: still answer ahead during EndSilenceMs
    (_judged(Verdict.FINISHED), False, True, False),  # Listening.SpeculativeReply off
    (_judged(Verdict.FINISHED), True, False, False),  # noise, or the wake phrase alone
])
def test_when_the_reply_is_started_ahead(judgment, enabled, is_question, ahead):
    assert answer_ahead(judgment, enabled=enabled, is_question=is_question) is ahead


def test_a_pause_without_a_judgment_ends_after_end_silence():
    assert pause_limit_ms(None, 600) == 600
    assert pause_limit_ms(_judged(Verdict.FINISHED), 600) == 250


@pytest.mark.parametrize("text, command, verdict", [
    ("Stop.", True, Verdict.FINISHED),  # a one-word command says "nothing" as a sentence
    ("Stop.", False, Verdict.UNKNOWN),
    ("Set a timer for", False, Verdict.UNFINISHED),
    ("What time is it?", True, Verdict.FINISHED),
    ("What timers do I have?", True, Verdict.FINISHED),
    ("What is the capital of?", True, Verdict.FINISHED),  # what the matcher takes whole
    ("What is the capital of?", False, Verdict.UNFINISHED),
])
def test_a_whole_command_is_a_finished_turn(text, command, verdict):
    judgment = judge(PauseSignals(silence_ms=240, transcript=text, transcript_logprob=-0.9,
                                  command=command), TurnThresholds(wake_phrases=("hey jarvis",)))
    assert judgment.verdict is verdict


# -- going on after the turn was taken as over -------------------------------------------------

W, OVER, G = GoingOn.WATCHING, GoingOn.OVER, GoingOn.WENT_ON


@pytest.mark.parametrize("frames, min_speech_ms, expected", [
    ([0, 0, 0, 0], 200, [W, W, W, W]),  # silence: still watching
    ([1, 1, 1], 200, [W, W, G]),  # 240 ms of speech in a row: they went on
    ([1, 1, 0, 1, 1], 200, [W, W, W, W, W]),  # a click, a breath: not in a row
    ([1], 0, [G]),  # MinSpeechMs 0: one frame is enough
    ([0] * 19 + [1, 1, 1], 200, [W] * 18 + [OVER] * 4),  # 1.5 s passed: too late, the turn is theirs
    ([0] * 18 + [1, 1, 1], 200, [W] * 18 + [W, W, G]),  # begun in the last frame of the moments: in time
    ([0] * 17 + [1, 0, 1], 200, [W] * 17 + [W, OVER, OVER]),  # begun in time, but not kept up
])
def test_the_go_on_watch(frames, min_speech_ms, expected):
    watch = GoOnWatch(until=101.5, min_speech_ms=min_speech_ms)
    seen = [watch.feed(100.0 + (i + 1) * 0.08, 0.08, bool(speech)) for i, speech in enumerate(frames)]
    assert seen == expected
    if G in seen:  # the frames the speech that went on spans, for the capture that goes on
        assert watch.speech_frames == (3 if min_speech_ms else 1)


@pytest.mark.parametrize("setting, heard, expected", [
    (None, True, 400),  # going on over her reply is heard: a doubtful pause need not wait
    (None, False, 1300),  # it isn't (no echo cancelling, a satellite): wait for a thinking pause
    (900, True, 900),  # set: as set
    (900, False, 900),
])
def test_a_doubtful_pause_waits_less_where_going_on_over_her_is_heard(setting, heard, expected):
    listening = replace(load_settings(env={}).listening, uncertain_pause_ms=setting)
    thresholds = TurnThresholds.from_settings(listening, WAKE, going_on_heard=heard)
    assert thresholds.wait_ms(Verdict.UNKNOWN) == expected


@pytest.mark.parametrize(("text", "logprob", "command", "wanted"), [
    ("Kental Nutaimo", -1.47, False, True),  # doubted, and Whisper unsure of it: read it again
    ("What is the capital of", -0.9, False, True),  # unfinished words heard badly too
    ("What is the capital of France", -0.5, False, False),  # doubted, but Whisper fairly sure
    ("What is the capital of France?", -0.1, False, False),  # finished: never read again
    ("stop", -1.2, True, False),  # a whole command ends the turn: finished
])
def test_only_doubted_words_whisper_was_unsure_of_are_read_again(text, logprob, command, wanted):
    judgment = judge(PauseSignals(silence_ms=80, transcript=text, transcript_logprob=logprob,
                                  command=command), TurnThresholds())
    assert read_again_wanted(judgment, logprob) is wanted
    assert not read_again_wanted(None, -2.0)  # no judgment (it is off): no second reading
