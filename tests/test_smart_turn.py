"""Smart Turn as bench/turn.py measures it (bench/smart_turn.py): its probability beside the words,
and its input window. The model itself needs pipecat-ai, which Elara does not install:
`bench.turn --check-features` checks its loading and features against pipecat's own."""

from __future__ import annotations

import numpy as np
import pytest

from bench.smart_turn import (
    INSTALL,
    WINDOW_SAMPLES,
    SmartTurn,
    TurnProbabilities,
    model_window,
    verdict_with,
)
from elara.voice.turn import PauseSignals, TurnThresholds, Verdict

T = TurnThresholds(finished_ms=250, max_pause_ms=2000, end_silence_ms=600, wake_phrases=("hey jarvis",))
P = TurnProbabilities(finished=0.9, confirmed=0.5, unfinished=0.1)
DONE = "What is the capital of France?"
HALF = "What is the capital of"


@pytest.mark.parametrize(
    ("p", "text", "verdict", "end_after"),
    [
        # Smart Turn alone
        (0.95, None, Verdict.FINISHED, 250),
        (0.90, None, Verdict.FINISHED, 250),
        (0.60, None, Verdict.UNKNOWN, 600),
        (0.05, None, Verdict.UNFINISHED, 2000),
        # the transcript alone
        (None, DONE, Verdict.FINISHED, 250),
        (None, HALF, Verdict.UNFINISHED, 2000),
        (None, "What is the largest planet", Verdict.UNKNOWN, 600),
        # both: unfinished words veto a confident model; a finished sentence lowers the bar
        (0.99, HALF, Verdict.UNFINISHED, 2000),
        (0.60, DONE, Verdict.FINISHED, 250),
        (0.40, DONE, Verdict.UNKNOWN, 600),
        (0.05, DONE, Verdict.UNFINISHED, 2000),
        (0.95, "What is the largest planet", Verdict.FINISHED, 250),
        # the wake phrase alone never ends a turn, however sure the model is
        (0.99, "Hey Jarvis.", Verdict.UNFINISHED, 2000),
        (0.99, "Hey Jarvis,", Verdict.UNFINISHED, 2000),
        # no signal: EndSilenceMs decides
        (None, None, Verdict.NO_SIGNAL, 600),
    ],
)
def test_the_probability_beside_the_words(p, text, verdict, end_after):
    got, _, reason = verdict_with(p, PauseSignals(silence_ms=250, transcript=text), T, P)
    assert (got, T.wait_ms(got)) == (verdict, end_after)
    assert reason


def test_a_whole_command_is_finished_whatever_the_model_says():
    signals = PauseSignals(silence_ms=250, transcript="Stop.", command=True)
    assert verdict_with(0.01, signals, T, P)[0] is Verdict.FINISHED


@pytest.mark.parametrize("kwargs", [dict(unfinished=0.6, confirmed=0.5), dict(confirmed=0.95, finished=0.9)])
def test_inconsistent_probabilities_are_refused(kwargs):
    with pytest.raises(ValueError):
        TurnProbabilities(**kwargs)


def test_model_window_keeps_the_last_8_s_and_pads_the_start():
    short = np.full(16_000, 16384, dtype=np.int16)
    window = model_window(short)
    assert window.shape == (WINDOW_SAMPLES,) and window.dtype == np.float32
    assert not window[:-16_000].any() and np.allclose(window[-16_000:], 0.5)
    long = np.arange(WINDOW_SAMPLES + 500, dtype=np.float32) / (WINDOW_SAMPLES + 500)
    assert np.array_equal(model_window(long), long[-WINDOW_SAMPLES:])


def test_a_damaged_or_missing_model_says_so(tmp_path):
    bad = tmp_path / "turn.onnx"
    bad.write_bytes(b"not really onnx")
    with pytest.raises(ValueError, match="does not load"):
        SmartTurn(bad)
    with pytest.raises(FileNotFoundError, match="pipecat-ai") as missing:
        SmartTurn(tmp_path / "absent.onnx")
    assert INSTALL in str(missing.value)
