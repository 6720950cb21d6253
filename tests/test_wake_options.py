"""The wake-word detector's options (the VAD gate, shortened pauses), and the front ends
bench/wake.py measures it behind: each loads and still hears the wake phrase."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from bench.wake import VARIANTS, variant_detector
from elara.voice.wake import WakeWordDetector
from tests.rig.voice_clips import (
    concat,
    espeak_speech,
    espeak_ssml,
    frames,
    noise,
    piper_speech,
    silence,
    with_noise,
)


@pytest.mark.parametrize("variant", ["speex", "vad", "webrtc"])
def test_each_front_end_still_detects_the_phrase_once(hey_jarvis_path, variant):
    detector = variant_detector(variant, hey_jarvis_path)
    clip = with_noise(concat(silence(1.0), piper_speech("Hey Jarvis."), silence(1.5)), 20, color="pink")
    for _ in range(2):  # reset() must bring the front ends back to a working fresh state
        found = [hit for frame in frames(clip) if (hit := detector.process(frame))]
        assert [d.name for d in found] == ["hey_jarvis"]
        assert 1.0 < found[0].at < len(clip) / 16_000
        detector.reset()


def test_odd_frame_lengths_pass_through_webrtc_whole():
    front_end = VARIANTS["webrtc"][2]
    assert front_end is not None
    cleaner = front_end()
    # 1000 samples is not a multiple of WebRTC's 10 ms; the remainder waits for the next frame.
    cleaned = [len(cleaner.clean(silence(1000 / 16_000))) for _ in range(8)]
    assert sum(cleaned) == 8000 - 8000 % 160 and all(n % 160 == 0 for n in cleaned)


@pytest.mark.parametrize(
    "options",
    [{"vad_threshold": 1.0}, {"trigger_level": 0}, {"confirm_from": 0.6}],
    ids=["vad", "trigger", "confirm"],
)
def test_out_of_range_options_are_refused(hey_jarvis_path, options):
    with pytest.raises(ValueError, match=next(iter(options))):
        WakeWordDetector([hey_jarvis_path], **options)


def paused_phrase(pause_ms: int) -> np.ndarray:
    """espeak-ng en-gb saying "Hey … Jarvis" with a pause after "Hey", in silence."""
    return concat(silence(1.0), espeak_ssml(f'<speak>Hey <break time="{pause_ms}ms"/> Jarvis</speak>',
                                            voice="en-gb", speed=160), silence(1.5))


def best_score(detector: WakeWordDetector, clip: np.ndarray) -> tuple[float, int]:
    """The highest hey_jarvis score over a clip fed from a fresh state, and how many wakes came."""
    detector.reset()
    best, wakes = 0.0, 0
    for frame in frames(clip):
        wakes += detector.process(frame) is not None
        best = max(best, detector.last_scores.get("hey_jarvis", 0.0))
    return best, wakes


def test_with_pauses_shortened_hey_pause_jarvis_scores_as_the_phrase(hey_jarvis_path):
    plain = WakeWordDetector([hey_jarvis_path], vad_threshold=0.5, threshold=0.7)
    shortened = WakeWordDetector([hey_jarvis_path], vad_threshold=0.5, threshold=0.7, shorten_pauses=True)
    clip = paused_phrase(500)
    assert best_score(plain, clip) < (0.5, 1)  # the model alone barely hears it …
    assert best_score(shortened, clip) >= (0.7, 1)  # … its copy, the pause undone, is sure
    for _ in range(2):  # reset() forgets a pause half heard
        assert best_score(shortened, clip)[1] == 1


def test_a_pause_longer_than_a_second_and_her_voice_are_left_to_the_model(hey_jarvis_path):
    plain = WakeWordDetector([hey_jarvis_path], vad_threshold=0.5, threshold=0.7)
    shortened = WakeWordDetector([hey_jarvis_path], vad_threshold=0.5, threshold=0.7, shorten_pauses=True)
    # "Hey", 1.5 s, "Jarvis" are two things said, not a phrase with a pause in it.
    assert best_score(shortened, paused_phrase(1500)) == best_score(plain, paused_phrase(1500))
    # While she speaks, what is left of her voice counts as speech, so only the model's score counts.
    shortened.during_playback = True
    assert best_score(shortened, paused_phrase(500)) == best_score(plain, paused_phrase(500))
    # Speech without the phrase scores no higher than it would.
    talk = concat(silence(1.0), espeak_speech("Hey, are you coming to dinner or not? The dog needs a walk."),
                  silence(1.0))
    shortened.during_playback = False
    assert best_score(shortened, talk)[0] < 0.01


def test_shortened_pauses_need_the_vad_gate(hey_jarvis_path):
    with pytest.raises(ValueError, match="vad_threshold"):
        WakeWordDetector([hey_jarvis_path], shorten_pauses=True)


def test_behind_the_gate_silence_spares_the_models_and_every_score_is_as_if_each_frame_were_scored(
        hey_jarvis_path, monkeypatch):
    # Quiet stretches of every length around the gate's reach and the frames kept to catch up on,
    # each followed by the phrase or by other speech, in silence and in a quiet room.
    parts = []
    for seconds in (0.3, 0.5, 0.6, 1.0, 1.8, 2.6, 3.0, 6.0):
        parts += [silence(seconds), piper_speech("Hey Jarvis."), noise(seconds, dbfs=-60, seed=round(seconds * 10)),
                  espeak_speech("What time is it?", voice="en-gb")]
    clip = concat(*parts, silence(1.0))
    np.random.seed(0)  # openWakeWord fills its first feature window with random noise: the same in both
    detector = WakeWordDetector([hey_jarvis_path], vad_threshold=0.5, threshold=0.7, shorten_pauses=True)
    calls = 0
    predict = detector._model.predict

    def counted(samples):
        nonlocal calls
        calls += 1
        return predict(samples)

    monkeypatch.setattr(detector._model, "predict", counted)
    spared = [(detector.process(frame), dict(detector.last_scores)) for frame in frames(clip)]
    assert calls < 0.8 * len(spared)  # the models were spared in the silences

    # The reference: every frame scored, and openWakeWord's own 10 s of raw audio kept.
    np.random.seed(0)
    every = WakeWordDetector([hey_jarvis_path], vad_threshold=0.5, threshold=0.7, shorten_pauses=True)
    monkeypatch.setattr(every._scorer, "predict", every._model.predict)
    every._model.preprocessor.raw_data_buffer = collections.deque(maxlen=160_000)
    scored = [(every.process(frame), dict(every.last_scores)) for frame in frames(clip)]
    assert spared == scored
    assert sum(found is not None for found, _ in scored) >= 6  # the phrase was heard after the silences
