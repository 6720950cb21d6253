"""The utterance's audio: the pre-roll a wake begins it with."""

import numpy as np

from elara.audio.frames import FRAME_SAMPLES, FRAME_SECONDS, AudioFrame
from elara.voice.utterance import WAKE_READ_KEPT_SECONDS, Utterance


def heard(seconds: float) -> Utterance:
    """An utterance that kept `seconds` of frames, the n-th ending at (n + 1) frames."""
    utterance = Utterance(pre_roll_ms=300)
    for n in range(round(seconds / FRAME_SECONDS)):
        utterance.keep(AudioFrame(np.full(FRAME_SAMPLES, n, dtype=np.int16), (n + 1) * FRAME_SECONDS))
    return utterance


def first_frames(utterance: Utterance) -> list[int]:
    return [int(frame.samples[0]) for frame in utterance.frames]


def test_a_wake_begins_with_the_pre_roll_and_a_follow_up_with_nothing():
    utterance = heard(2.0)
    utterance.begin(follow_up=False)
    assert first_frames(utterance) == [21, 22, 23, 24]  # 300 ms
    utterance.begin(follow_up=True, said_from=0.0)
    assert utterance.frames == []


def test_a_wake_read_once_the_phrase_was_over_reaches_back_to_where_it_was_said():
    # The "stop" reader reads the phrase after it ended, and may have cut it short of its tail:
    # the utterance holds the whole phrase and what was said while it was read.
    utterance = heard(2.0)
    utterance.begin(follow_up=False, said_from=10 * FRAME_SECONDS)  # the end of frame 9
    assert first_frames(utterance) == list(range(10, 25))
    utterance.begin(follow_up=False, said_from=23 * FRAME_SECONDS)  # later than the pre-roll
    assert first_frames(utterance) == [21, 22, 23, 24]


def test_what_a_wake_read_late_reaches_back_to_is_bounded():
    utterance = heard(10.0)
    utterance.begin(follow_up=False, said_from=0.0)
    assert len(utterance.frames) == round(WAKE_READ_KEPT_SECONDS / FRAME_SECONDS)
    assert first_frames(utterance)[-1] == 124
    utterance.resize(200)
    utterance.begin(follow_up=False)
    assert first_frames(utterance) == [123, 124]
