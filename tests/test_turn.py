"""End-of-turn judgment (elara.voice.turn): decision tables of numbers and strings; the Smart Turn
model's loading and features (elara.voice.smart_turn) against pipecat's own numpy features."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from elara.config import load_settings
from elara.errors import ModelLoadError, ModelNotFoundError
from elara.voice.models import TURN_MODEL_KEY, resolve_turn_model, smart_turn_path
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

T = TurnThresholds(finished_ms=250, max_pause_ms=2000, end_silence_ms=600, finished_probability=0.9,
                   confirmed_probability=0.5, unfinished_probability=0.1, wake_phrases=WAKE)
DONE = "What is the capital of France?"
HALF = "What is the capital of"


@pytest.mark.parametrize(
    ("silence", "p", "text", "verdict", "action", "end_after"),
    [
        # Smart Turn alone
        (200, 0.95, None, Verdict.FINISHED, Action.WAIT, 250),
        (250, 0.95, None, Verdict.FINISHED, Action.COMMIT, 250),
        (250, 0.90, None, Verdict.FINISHED, Action.COMMIT, 250),
        (250, 0.60, None, Verdict.UNKNOWN, Action.WAIT, 600),
        (600, 0.60, None, Verdict.UNKNOWN, Action.COMMIT, 600),
        (600, 0.05, None, Verdict.UNFINISHED, Action.WAIT, 2000),
        (1999, 0.05, None, Verdict.UNFINISHED, Action.WAIT, 2000),
        (2000, 0.05, None, Verdict.UNFINISHED, Action.COMMIT, 2000),
        # the transcript alone
        (250, None, DONE, Verdict.FINISHED, Action.COMMIT, 250),
        (1200, None, HALF, Verdict.UNFINISHED, Action.WAIT, 2000),
        (250, None, "What is the largest planet", Verdict.UNKNOWN, Action.WAIT, 600),
        # both: unfinished words veto a confident model; a finished sentence lowers the bar
        (250, 0.99, HALF, Verdict.UNFINISHED, Action.WAIT, 2000),
        (250, 0.60, DONE, Verdict.FINISHED, Action.COMMIT, 250),
        (250, 0.40, DONE, Verdict.UNKNOWN, Action.WAIT, 600),
        (250, 0.05, DONE, Verdict.UNFINISHED, Action.WAIT, 2000),
        (250, 0.95, "What is the largest planet", Verdict.FINISHED, Action.COMMIT, 250),
        # the wake phrase alone never ends a turn, however sure the model is
        (1500, 0.99, "Hey Jarvis.", Verdict.UNFINISHED, Action.WAIT, 2000),
        (250, 0.99, "Hey Jarvis,", Verdict.UNFINISHED, Action.WAIT, 2000),
        # no signal: EndSilenceMs decides
        (250, None, None, Verdict.NO_SIGNAL, Action.FALLBACK, 600),
        (900, None, None, Verdict.NO_SIGNAL, Action.FALLBACK, 600),
    ],
)
def test_decision_table(silence, p, text, verdict, action, end_after):
    judgment = judge(PauseSignals(silence_ms=silence, smart_turn=p, transcript=text), T)
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
    judgment = judge(PauseSignals(silence_ms=700, smart_turn=0.5), thresholds)
    assert (judgment.verdict, judgment.action, judgment.end_after_ms) == (Verdict.UNKNOWN, Action.WAIT, 1400)
    # no signal still falls back to EndSilenceMs, not to the uncertain wait
    assert judge(PauseSignals(silence_ms=700), thresholds).end_after_ms == 600


def test_the_judge_follows_new_thresholds():
    turn_judge = TurnJudge(TurnThresholds(finished_ms=250))
    signals = PauseSignals(silence_ms=220, smart_turn=0.97)
    assert turn_judge.judge(signals).action is Action.WAIT
    turn_judge.thresholds = TurnThresholds(finished_ms=200)
    assert turn_judge.judge(signals).action is Action.COMMIT


@pytest.mark.parametrize(
    "kwargs",
    [dict(finished_ms=3000, max_pause_ms=2000), dict(finished_ms=-1),
     dict(unfinished_probability=0.6, confirmed_probability=0.5),
     dict(confirmed_probability=0.95, finished_probability=0.9)],
)
def test_inconsistent_thresholds_are_refused(kwargs):
    with pytest.raises(ValueError):
        TurnThresholds(**kwargs)


# ---------------------------------------------------------------------------------------------
# the model: resolved by path, pipecat never imported

needs_model = pytest.mark.skipif(smart_turn_path() is None,
                                 reason="pipecat-ai is not installed (scripts/setup installs it --no-deps)")


@needs_model
def test_builtin_turn_model_resolves_without_importing_pipecat():
    record = resolve_turn_model("smart-turn-v3.2")
    assert record.kind == "turn" and record.config_key == TURN_MODEL_KEY
    assert record.path.name == "smart-turn-v3.2-cpu.onnx" and record.path.stat().st_size > 5_000_000
    assert "pipecat" not in sys.modules


def test_turn_model_by_path_and_missing(tmp_path):
    copy = tmp_path / "turn.onnx"
    copy.write_bytes(b"not really onnx")
    assert resolve_turn_model("turn", [tmp_path]).path == copy.resolve()
    with pytest.raises(ModelNotFoundError, match="Listening.TurnModel"):
        resolve_turn_model("nowhere.onnx", [tmp_path])


def test_a_damaged_turn_model_is_a_load_error(tmp_path):
    from elara.voice.smart_turn import SmartTurn

    bad = tmp_path / "turn.onnx"
    bad.write_bytes(b"not really onnx")
    with pytest.raises(ModelLoadError, match="does not load"):
        SmartTurn(bad)
    with pytest.raises(ModelNotFoundError, match="pipecat-ai"):
        SmartTurn(tmp_path / "absent.onnx")


def test_model_window_keeps_the_last_8_s_and_pads_the_start():
    from elara.voice.smart_turn import WINDOW_SAMPLES, model_window

    short = np.full(16_000, 16384, dtype=np.int16)
    window = model_window(short)
    assert window.shape == (WINDOW_SAMPLES,) and window.dtype == np.float32
    assert not window[:-16_000].any() and np.allclose(window[-16_000:], 0.5)
    long = np.arange(WINDOW_SAMPLES + 500, dtype=np.float32) / (WINDOW_SAMPLES + 500)
    assert np.array_equal(model_window(long), long[-WINDOW_SAMPLES:])


def _pipecat_features():
    """pipecat's vendored numpy features, loaded from its file (importing pipecat would fail)."""
    path = smart_turn_path()
    assert path is not None
    source = Path(path).parents[1] / "_whisper_features.py"
    spec = importlib.util.spec_from_file_location("_pipecat_whisper_features", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_whisper_log_mel_features


@needs_model
def test_features_match_pipecats_numpy_features():
    from elara.voice.smart_turn import TurnFeatures, model_window

    reference = _pipecat_features()
    ours = TurnFeatures()
    rng = np.random.default_rng(3)
    t = np.arange(40_000) / 16_000
    tone = (0.3 * np.sin(2 * np.pi * 220 * t) * np.exp(-t)).astype(np.float32)
    for clip in (tone, (rng.standard_normal(150_000) * 0.05).astype(np.float32)):
        expected = reference(model_window(clip), do_normalize=True)
        got = ours(clip)
        assert got.shape == expected.shape == (80, 800)
        assert np.max(np.abs(got - expected)) < 2e-3


@needs_model
def test_smart_turn_gives_a_probability():
    from elara.voice.smart_turn import SmartTurn

    model = SmartTurn(resolve_turn_model().path)
    rng = np.random.default_rng(5)
    p = model.probability((rng.standard_normal(24_000) * 2000).astype(np.int16))
    assert 0.0 <= p <= 1.0 and model.last_seconds > 0
    assert "pipecat" not in sys.modules


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
    ("What timers do I have?", True, Verdict.FINISHED),  # "have" usually leads on
    ("What timers do I have?", False, Verdict.UNFINISHED),
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
