"""A turn's record of typed events, and the figures the timing line and `elara status` derive from
it: plain values, no loop."""

import logging
import re

import pytest

from elara.voice import events as ev


def judged(at: float, verdict: str = "finished") -> ev.PauseJudged:
    return ev.PauseJudged(at=at, verdict=verdict, reason="the words so far end a sentence", silence_ms=240.0,
                          end_after_ms=250, seconds=0.002)


def a_turn() -> ev.TurnRecord:
    record = ev.TurnRecord()
    for event in (ev.Wake(at=10.0, name="hey_jarvis", how="score 0.91"), ev.Listening(at=10.1),
                  ev.SpeechStart(at=10.4), ev.SpeechEnd(at=12.0), judged(12.24), ev.Prompt(at=12.25),
                  ev.Transcribed(at=12.24), ev.TurnEnd(at=12.32), ev.Committed(at=12.32),
                  ev.FirstToken(at=12.30), ev.FirstAudio(at=12.45), ev.Done(at=14.0)):
        record.add(event)
    return record


def test_the_timings_are_the_spans_between_the_turn_s_moments():
    assert a_turn().timings() == pytest.approx({
        "wake_to_listening": 0.1, "speech_end_to_turn_end": 0.32, "speech_end_to_transcript": 0.24,
        "transcript_to_first_token": 0.06, "first_token_to_first_audio": 0.15,
        "speech_end_to_first_audio": 0.45, "total": 4.0})


def test_a_moment_that_never_came_has_no_span():
    record = ev.TurnRecord()
    record.add(ev.Listening(at=3.0))  # a follow-up: no wake word
    record.add(ev.Dropped(at=8.0, why="no speech"))
    timings = record.timings()
    assert timings["wake_to_listening"] is None and timings["speech_end_to_first_audio"] is None
    assert timings["total"] is None and record.judgment() == {}


def test_the_timeline_is_in_the_order_things_happened_not_the_order_they_were_known():
    kinds = [type(e).__name__ for e in a_turn().timeline()]
    assert kinds == ["Wake", "Listening", "SpeechStart", "SpeechEnd", "PauseJudged", "Transcribed", "Prompt",
                     "FirstToken", "TurnEnd", "Committed", "FirstAudio", "Done"]


def test_what_was_measured_before_the_person_went_on_no_longer_counts():
    record = ev.TurnRecord()
    for event in (ev.Wake(at=1.0, name="hey_jarvis", how="score 0.9"), ev.Listening(at=1.0),
                  ev.SpeechEnd(at=2.0), judged(2.24), ev.TurnEnd(at=2.32), ev.Transcribed(at=2.24),
                  ev.GoneOn(at=3.0), ev.SpeechEnd(at=4.0), ev.TurnEnd(at=4.6)):
        record.add(event)
    assert record.last(ev.SpeechEnd) == ev.SpeechEnd(at=4.0)
    assert record.last(ev.Transcribed) is None and record.last(ev.PauseJudged) is None
    assert record.last(ev.Listening) == ev.Listening(at=1.0)  # the turn's own moments stay
    timings = record.timings()
    assert timings["speech_end_to_turn_end"] == pytest.approx(0.6)
    assert timings["speech_end_to_transcript"] is None and timings["wake_to_listening"] == 0.0


def test_the_judgment_shown_is_the_last_pause_judged():
    record = a_turn()
    record.add(judged(12.5, "unfinished"))
    assert record.judgment() == {"verdict": "unfinished", "reason": "the words so far end a sentence",
                                 "at_silence_ms": 240.0, "end_after_ms": 250, "judge_ms": pytest.approx(2.0)}


def test_the_timing_line_names_each_stage_with_its_seconds():
    line = a_turn().summary()
    stages = dict(re.findall(r"(\w+) (-?[\d.]+) s", line.split(";")[0]))
    assert stages == {"wake_to_listening": "0.100", "speech_end_to_turn_end": "0.320",
                      "speech_end_to_transcript": "0.240", "transcript_to_first_token": "0.060",
                      "first_token_to_first_audio": "0.150", "speech_end_to_first_audio": "0.450", "total": "4.000"}
    assert line.endswith("; judged finished at 240 ms of silence in 2.0 ms (the words so far end a sentence), "
                         "ended after 250 ms")
    record = ev.TurnRecord()
    record.add(ev.Listening(at=0.0))
    assert record.summary().endswith("total -; no judgment")


def test_the_log_tells_each_event_to_whoever_watches_and_logs_the_turn_done(caplog):
    log = ev.TurnLog()
    seen: list[ev.TurnEvent] = []
    log.observers.append(seen.append)
    first = log.current
    log.add(ev.Listening(at=1.0))
    second = log.begin()
    log.add(ev.Wake(at=2.0, name="hey_jarvis", how="score 0.8"))
    assert first.events == [ev.Listening(at=1.0)] and second is log.current and len(second.events) == 1
    assert seen == [ev.Listening(at=1.0), ev.Wake(at=2.0, name="hey_jarvis", how="score 0.8")]
    assert log.status() == {"last_turn": {}, "last_judgment": {}, "last_prompt": {}}
    with caplog.at_level(logging.INFO, logger="elara.voice.events"):
        log.finished(second)
    assert log.last_finished is second and log.status()["last_turn"]["total"] is None
    assert "turn timings: wake_to_listening -" in caplog.text


def test_the_prompt_tokens_read_for_the_reply_are_in_the_line_and_the_status():
    log = ev.TurnLog()
    record = log.current
    record.add(ev.Listening(at=1.0))
    record.add(ev.FirstToken(at=1.5, evaluated=45, reused=812))
    assert "; prompt tokens 45 evaluated, 812 reused" in record.summary()
    log.finished(record)
    assert log.status()["last_prompt"] == {"evaluated": 45, "reused": 812}
    local = ev.TurnRecord()
    local.add(ev.FirstToken(at=1.0))
    assert local.prompt_tokens() == {} and "prompt tokens" not in local.summary()
