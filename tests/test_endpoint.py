"""The endpointing segmenter, driven frame by frame with durations and speech flags only."""

from __future__ import annotations

import pytest

from elara.settings import ListeningSettings, SpeechToTextSettings
from elara.voice.endpoint import (
    EarlyEnd,
    NoSpeech,
    Segmenter,
    SpeechResumed,
    SpeechStarted,
    UtteranceEnded,
)

FRAME = 0.08  # the capture frame: 1 280 samples at 16 kHz
S, Q = True, False  # speech, quiet

DEFAULTS = dict(  # the shipped defaults before the end-of-turn judgment (EarlyStartMs is 80 now)
    pre_roll_ms=300,
    end_silence_ms=600,
    min_speech_ms=200,
    max_utterance_seconds=15,
    no_speech_timeout_seconds=5,
    early_start_ms=200,
)


def make(**overrides: float) -> Segmenter:
    return Segmenter(**{**DEFAULTS, **overrides})


def run(seg: Segmenter, *pattern: tuple[int, bool], frame: float = FRAME) -> list[tuple[int, object]]:
    """Feed runs of (frame count, speech?) and return (1-based frame number, event) for each event."""
    out = []
    for count, speech in pattern:
        for _ in range(count):
            for event in seg.feed(frame, speech):
                out.append((round(seg.elapsed / frame), event))
    return out


def at(n: int) -> float:
    """The time at the end of frame n (1-based), i.e. n frames in."""
    return pytest.approx(n * FRAME, abs=1e-9)


# -- the ordinary utterance ------------------------------------------------------------------


def test_speech_then_silence_gives_the_span_with_pre_roll() -> None:
    seg = make()
    events = run(seg, (10, Q), (10, S), (10, Q))
    # speech runs over frames 11..20 = [0.80, 1.60)
    assert events == [
        # the third speech frame brings it to 240 ms >= 200 ms
        (13, SpeechStarted(at=at(10), confirmed_at=at(13))),
        # 3 silent frames = 240 ms >= 200 ms; span = [0.80 - 0.30, 1.60 + 0.20)
        (23, EarlyEnd(at=at(23), start=pytest.approx(0.5), end=pytest.approx(1.8))),
        # 8 silent frames = 640 ms >= 600 ms; the span is EarlyEnd's, exactly
        (28, UtteranceEnded(start=pytest.approx(0.5), end=pytest.approx(1.8), reason="silence", at=at(28))),
    ]
    assert seg.done and seg.speech_started
    assert seg.result == events[-1][1]
    assert seg.elapsed == pytest.approx(28 * FRAME)


def test_times_are_exact_sums_of_frames() -> None:
    seg = make()
    run(seg, (12, Q))
    assert seg.elapsed == 0.96  # not 0.9600000000000001
    events = run(seg, (3, S), (8, Q))
    ended = events[-1][1]
    assert isinstance(ended, UtteranceEnded)
    assert (ended.start, ended.end, ended.at) == (0.66, 1.40, 1.84)


def test_pre_roll_never_reaches_before_the_start() -> None:
    seg = make()
    events = run(seg, (1, Q), (5, S), (8, Q))
    assert events[0][1] == SpeechStarted(at=at(1), confirmed_at=at(4))
    assert events[-1][1] == UtteranceEnded(start=0.0, end=pytest.approx(0.68), reason="silence", at=at(14))


def test_speech_from_the_first_frame() -> None:
    seg = make(pre_roll_ms=0, early_start_ms=0)
    events = run(seg, (3, S), (8, Q))
    assert events[0][1] == SpeechStarted(at=0.0, confirmed_at=at(3))
    assert events[-1][1] == UtteranceEnded(start=0.0, end=at(3), reason="silence", at=at(11))


def test_the_end_is_decided_on_the_exact_frame() -> None:
    # 560 ms = exactly 7 frames: the 7th silent frame ends it
    events = run(make(end_silence_ms=560), (5, S), (10, Q))
    assert events[-1] == (12, UtteranceEnded(start=0.0, end=pytest.approx(5 * FRAME + 0.2), reason="silence", at=at(12)))
    # 561 ms needs an 8th
    events = run(make(end_silence_ms=561), (5, S), (10, Q))
    assert events[-1][0] == 13


def test_onset_needs_exactly_min_speech() -> None:
    # 240 ms = 3 frames exactly
    events = run(make(min_speech_ms=240), (2, S), (1, S))
    assert events == [(3, SpeechStarted(at=0.0, confirmed_at=at(3)))]
    # 241 ms needs a 4th frame
    events = run(make(min_speech_ms=241), (3, S), (1, S))
    assert events == [(4, SpeechStarted(at=0.0, confirmed_at=at(4)))]


def test_min_speech_zero_counts_the_first_speech_frame() -> None:
    events = run(make(min_speech_ms=0), (2, Q), (1, S))
    assert events == [(3, SpeechStarted(at=at(2), confirmed_at=at(3)))]


def test_other_frame_sizes() -> None:
    seg = make()
    events = run(seg, (25, Q), (10, S), (19, Q), frame=0.032)  # 32 ms frames
    assert [type(e) for _, e in events] == [SpeechStarted, EarlyEnd, UtteranceEnded]
    ended = events[-1][1]
    assert ended == UtteranceEnded(start=pytest.approx(0.5), end=pytest.approx(1.12 + 0.2), reason="silence",
                                   at=pytest.approx(54 * 0.032))


# -- what is not an utterance ----------------------------------------------------------------


def test_a_short_blip_is_not_an_utterance_and_times_out() -> None:
    seg = make()
    events = run(seg, (5, Q), (1, S), (100, Q))
    # one 80 ms frame < 200 ms: no event at all until the timeout, 5 s = 62.5 frames -> frame 63
    assert events == [(63, NoSpeech(at=at(63)))]
    assert not seg.speech_started and seg.done


def test_blips_far_apart_do_not_add_up() -> None:
    # two 160 ms blips 640 ms apart (>= end_silence): each is dropped on its own
    events = run(make(), (2, S), (8, Q), (2, S), (8, Q), (60, Q))
    assert events == [(63, NoSpeech(at=at(63)))]


def test_speech_with_short_gaps_adds_up() -> None:
    # 80 ms, a 240 ms gap, 80 + 80 ms: 240 ms of speech in one run -> it counts from the first frame
    events = run(make(), (3, Q), (1, S), (3, Q), (2, S))
    assert events == [(9, SpeechStarted(at=at(3), confirmed_at=at(9)))]


def test_no_speech_times_out_on_the_exact_frame() -> None:
    events = run(make(no_speech_timeout_seconds=0.96), (20, Q))
    assert events == [(12, NoSpeech(at=0.96))]
    events = run(make(no_speech_timeout_seconds=0.97), (20, Q))
    assert events == [(13, NoSpeech(at=at(13)))]


def test_speech_being_weighed_at_the_timeout_gets_its_chance() -> None:
    # a run begins at 0.88 s; the 1 s timeout passes while it has 160 ms; at 240 ms it counts
    seg = make(no_speech_timeout_seconds=1.0)
    events = run(seg, (11, Q), (3, S), (8, Q))
    assert [type(e) for _, e in events] == [SpeechStarted, EarlyEnd, UtteranceEnded]
    assert events[0] == (14, SpeechStarted(at=at(11), confirmed_at=at(14)))


def test_a_blip_being_weighed_at_the_timeout_ends_in_no_speech_when_dropped() -> None:
    seg = make(no_speech_timeout_seconds=1.0)
    events = run(seg, (11, Q), (2, S), (20, Q))
    # the blip ends at frame 13; it is dropped after 600 ms = 8 silent frames: frame 21
    assert events == [(21, NoSpeech(at=at(21)))]


def test_no_timeout_once_speech_started() -> None:
    seg = make(no_speech_timeout_seconds=1.0)
    events = run(seg, (3, S), (20, S), (7, Q))
    assert [type(e) for _, e in events] == [SpeechStarted, EarlyEnd]
    assert not seg.done


# -- long utterances -------------------------------------------------------------------------


def test_max_length_ends_a_long_utterance() -> None:
    seg = make(max_utterance_seconds=1.0)
    events = run(seg, (5, Q), (100, S))
    # speech from 0.40 s; 1.00 s later is frame 5 + 12.5 -> the 18th frame (1.44 s)
    assert events == [
        (8, SpeechStarted(at=at(5), confirmed_at=at(8))),
        (18, UtteranceEnded(start=pytest.approx(0.1), end=at(18), reason="max_length", at=at(18))),
    ]
    assert seg.done


def test_max_length_during_a_pause_keeps_the_tail_within_the_audio() -> None:
    seg = make(max_utterance_seconds=0.96, early_start_ms=400, end_silence_ms=1000)
    events = run(seg, (10, S), (10, Q))
    # speech [0, 0.80); 0.96 s is 2 silent frames in: the tail (400 ms) is cut at 0.96
    assert events[-1] == (12, UtteranceEnded(start=0.0, end=0.96, reason="max_length", at=0.96))


def test_max_length_shorter_than_min_speech_ends_as_it_starts() -> None:
    seg = make(min_speech_ms=1200, max_utterance_seconds=1.0)
    events = run(seg, (20, S))
    assert [(n, type(e)) for n, e in events] == [(15, SpeechStarted), (15, UtteranceEnded)]
    assert events[1][1].reason == "max_length"


# -- early end -------------------------------------------------------------------------------


def test_early_end_then_resume_then_end() -> None:
    seg = make()
    events = run(seg, (5, S), (4, Q), (5, S), (10, Q))
    assert events == [
        (3, SpeechStarted(at=0.0, confirmed_at=at(3))),
        (8, EarlyEnd(at=at(8), start=0.0, end=pytest.approx(0.6))),
        (10, SpeechResumed(at=at(9))),
        (17, EarlyEnd(at=at(17), start=0.0, end=pytest.approx(1.32))),
        (22, UtteranceEnded(start=0.0, end=pytest.approx(1.32), reason="silence", at=at(22))),
    ]


def test_a_pause_shorter_than_early_start_reports_nothing() -> None:
    events = run(make(), (5, S), (2, Q), (5, S))
    assert [type(e) for _, e in events] == [SpeechStarted]


def test_awaiting_end_follows_early_end_and_resume() -> None:
    seg = make()
    run(seg, (5, S), (3, Q))
    assert seg.awaiting_end
    run(seg, (1, S))
    assert not seg.awaiting_end
    run(seg, (8, Q))
    assert seg.done and not seg.awaiting_end


def test_no_early_end_when_it_would_not_come_before_the_end() -> None:
    events = run(make(early_start_ms=600), (5, S), (10, Q))
    assert [type(e) for _, e in events] == [SpeechStarted, UtteranceEnded]
    # the tail is capped at end_silence_ms
    assert events[-1][1].end == pytest.approx(0.4 + 0.6)


def test_early_start_zero_fires_on_the_first_silent_frame() -> None:
    events = run(make(early_start_ms=0), (5, S), (8, Q))
    assert events[1] == (6, EarlyEnd(at=at(6), start=0.0, end=at(5)))
    assert events[2][1].end == events[1][1].end


def test_no_early_end_before_speech_counts() -> None:
    # 160 ms (< 200) then 3 silent frames: nothing; the run is still being weighed
    events = run(make(), (2, S), (3, Q))
    assert events == []


# -- life cycle ------------------------------------------------------------------------------


def test_done_until_reset() -> None:
    seg = make()
    run(seg, (5, S), (8, Q))
    assert seg.done
    assert seg.feed(FRAME, True) == [] and seg.feed(FRAME, False) == []
    seg.reset()
    assert not seg.done and seg.result is None and seg.elapsed == 0 and not seg.speech_started
    events = run(seg, (2, Q), (3, S))
    assert events == [(5, SpeechStarted(at=at(2), confirmed_at=at(5)))]
    assert seg.speech_start == pytest.approx(0.16)


def test_properties_before_speech() -> None:
    seg = make()
    assert (seg.elapsed, seg.speech_started, seg.speech_start, seg.done, seg.awaiting_end) == (
        0.0, False, None, False, False)
    run(seg, (2, S))  # being weighed, not started
    assert not seg.speech_started and seg.speech_start is None


@pytest.mark.parametrize("duration", [0, -0.08, float("nan"), float("inf")])
def test_bad_frame_durations_are_refused(duration: float) -> None:
    with pytest.raises(ValueError):
        make().feed(duration, True)


@pytest.mark.parametrize("name, value", [
    ("pre_roll_ms", -1), ("end_silence_ms", 0), ("min_speech_ms", -5), ("max_utterance_seconds", 0),
    ("no_speech_timeout_seconds", 0), ("early_start_ms", float("nan")), ("pre_roll_ms", True),
])
def test_bad_parameters_are_refused(name: str, value: float) -> None:
    with pytest.raises(ValueError, match=name):
        make(**{name: value})


def test_from_settings() -> None:
    listening = ListeningSettings(mode="continued", vad="energy", vad_threshold=0.5, pre_roll_ms=160,
                                  end_silence_ms=480, min_speech_ms=160, max_utterance_seconds=10,
                                  no_speech_timeout_seconds=3, follow_up_seconds=6,
                                  turn_judgment="off", finished_ms=250, max_pause_ms=2000,
                                  uncertain_pause_ms=1300,
                                  speculative_reply=True, go_on_ms=1500)
    stt = SpeechToTextSettings(model="tiny.en", language="en", beam_size=1, read_again_beam_size=5,
                               read_again_by_second_model=True,
                               noise_suppression=2,
                               window_seconds=10, no_speech_threshold=0.6, early_start_ms=160, engine="local",
                               fallback_to_local=True, timeout_seconds=10)
    seg = Segmenter.from_settings(listening, stt)
    assert seg.max_pause_ms is None  # the judgment is off: EndSilenceMs ends every pause
    assert (seg.pre_roll_ms, seg.end_silence_ms, seg.min_speech_ms, seg.max_utterance_seconds,
            seg.no_speech_timeout_seconds, seg.early_start_ms) == (160, 480, 160, 10, 3, 160)
    events = run(seg, (4, Q), (2, S), (6, Q))
    assert events == [
        (6, SpeechStarted(at=at(4), confirmed_at=at(6))),
        (8, EarlyEnd(at=at(8), start=at(2), end=at(8))),
        (12, UtteranceEnded(start=at(2), end=at(8), reason="silence", at=at(12))),
    ]


# -- judged pauses ---------------------------------------------------------------------------


def test_a_judged_pause_waits_up_to_max_pause_without_a_judgment() -> None:
    seg = make(max_pause_ms=2000)
    events = run(seg, (5, S), (25, Q))
    assert [type(e) for _, e in events] == [SpeechStarted, EarlyEnd, UtteranceEnded]
    # 2 000 ms of silence = 25 frames after the speech: frame 30, not 600 ms (frame 13)
    assert events[-1][0] == 30


def test_a_finished_judgment_ends_the_pause_at_once_when_the_silence_already_reached_it() -> None:
    seg = make(max_pause_ms=2000)
    events = run(seg, (5, S), (4, Q))  # 320 ms of silence: EarlyEnd at 240 ms
    assert [type(e) for _, e in events] == [SpeechStarted, EarlyEnd]
    early = events[-1][1]
    assert seg.silence_ms == pytest.approx(320)
    ended = seg.end_pause_after(250)
    # the span is the EarlyEnd's: the speculative transcript is the final one
    assert ended == [UtteranceEnded(start=early.start, end=early.end, reason="silence", at=at(9))]
    assert seg.done and run(seg, (3, Q)) == []


def test_a_judgment_longer_than_the_silence_ends_it_later() -> None:
    seg = make(max_pause_ms=2000)
    run(seg, (5, S), (3, Q))
    assert seg.end_pause_after(1200) == []
    events = run(seg, (15, Q))
    # 1 200 ms = 15 frames of silence after the speech (frames 6..20); the span keeps its tail
    assert events == [(20, UtteranceEnded(start=0.0, end=pytest.approx(0.6), reason="silence",
                                          at=at(20)))]


def test_speech_resuming_forgets_the_judgment() -> None:
    seg = make(max_pause_ms=2000)
    run(seg, (5, S), (3, Q))
    assert seg.end_pause_after(1200) == []
    events = run(seg, (2, S), (16, Q))
    # the new pause is unjudged again: it runs to max_pause_ms (25 frames), not 1 200 ms
    assert [type(e) for _, e in events] == [SpeechResumed, EarlyEnd]
    assert not seg.done
    assert seg.end_pause_after(250) and seg.done


def test_a_judgment_outside_a_pause_is_ignored() -> None:
    seg = make(max_pause_ms=2000)
    assert seg.end_pause_after(0) == []  # nothing heard yet
    run(seg, (5, S))
    assert seg.end_pause_after(0) == []  # still speaking
    assert not seg.done
    with pytest.raises(ValueError, match="ms"):
        seg.end_pause_after(-1)


def test_max_pause_shorter_than_end_silence_is_refused() -> None:
    with pytest.raises(ValueError, match="max_pause_ms"):
        make(max_pause_ms=400)
