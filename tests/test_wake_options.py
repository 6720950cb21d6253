"""The wake-word detector's optional front ends load and still hear the wake phrase."""

from __future__ import annotations

import pytest
from voice_clips import concat, frames, piper_speech, silence, with_noise

from elara.voice.wake import WakeWordDetector

OPTIONS = {
    "speex": {"speex_noise_suppression": True},
    "vad": {"vad_threshold": 0.5},
    "webrtc": {"auto_gain_dbfs": 5, "webrtc_noise_suppression": 2},
}


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
def test_each_front_end_still_detects_the_phrase_once(hey_jarvis_path, options):
    detector = WakeWordDetector([hey_jarvis_path], **options)
    clip = with_noise(concat(silence(1.0), piper_speech("Hey Jarvis."), silence(1.5)), 20, color="pink")
    for _ in range(2):  # reset() must bring the front ends back to a working fresh state
        found = [hit for frame in frames(clip) if (hit := detector.process(frame))]
        assert [d.name for d in found] == ["hey_jarvis"]
        assert 1.0 < found[0].at < len(clip) / 16_000
        detector.reset()


def test_odd_frame_lengths_pass_through_webrtc_whole(hey_jarvis_path):
    detector = WakeWordDetector([hey_jarvis_path], auto_gain_dbfs=5, webrtc_noise_suppression=2)
    # 1000 samples is not a multiple of WebRTC's 10 ms; the remainder waits for the next frame.
    cleaned = [len(detector._front_end(silence(1000 / 16_000))) for _ in range(8)]
    assert sum(cleaned) == 8000 - 8000 % 160 and all(n % 160 == 0 for n in cleaned)


@pytest.mark.parametrize(
    "options",
    [{"auto_gain_dbfs": 32}, {"webrtc_noise_suppression": 5}, {"vad_threshold": 1.0}],
    ids=["gain", "suppression", "vad"],
)
def test_out_of_range_options_are_refused(hey_jarvis_path, options):
    with pytest.raises(ValueError, match=next(iter(options))):
        WakeWordDetector([hey_jarvis_path], **options)
