"""The playback history read back by time, and the echo delay found by GCC-PHAT: numbers only."""

import numpy as np
import pytest

from elara.audio.reference import PlaybackHistory, estimate_delay


def test_what_was_played_is_read_back_at_the_time_it_was_heard():
    history = PlaybackHistory()
    tone = (np.arange(1600) % 100).astype(np.int16)
    history.write(10.0, tone[:800], 16_000)
    history.write(10.05, tone[800:], 16_000)
    assert np.array_equal(history.read(10.0, 1600), tone)
    before = history.read(9.99, 320)  # 10 ms of silence, then the first 10 ms
    assert np.all(before[:160] == 0) and np.array_equal(before[160:], tone[:160])
    assert not history.read(11.0, 160).any()
    assert history.playing_between(10.02, 10.03) and not history.playing_between(10.2, 10.3)


def test_playing_between_sees_each_block_and_the_gaps_between():
    history = PlaybackHistory(seconds=60)
    block = np.ones(320, np.int16)  # 20 ms
    for at in (1.0, 1.02, 3.0):
        history.write(at, block, 16_000)
    assert history.playing_between(0.9, 1.001) and history.playing_between(1.03, 1.05)
    assert not history.playing_between(1.05, 2.9) and history.playing_between(2.0, 3.01)
    assert not history.playing_between(3.02, 9.0) and not history.playing_between(0.0, 1.0)
    history.restamp(3.0, -0.5)  # the last block was heard earlier than stamped
    assert history.playing_between(2.5, 2.51) and not history.playing_between(2.52, 3.01)


def test_a_22050_hz_voice_is_read_at_16_khz():
    history = PlaybackHistory()
    t = np.arange(22_050) / 22_050
    history.write(5.0, (8000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16), 22_050)
    back = history.read(5.0, 16_000).astype(float)
    expected = 8000 * np.sin(2 * np.pi * 440 * np.arange(16_000) / 16_000)
    assert np.corrcoef(back, expected)[0, 1] > 0.999


def test_restamped_blocks_are_read_back_at_their_new_time():
    history = PlaybackHistory(seconds=60)
    ones, twos = np.ones(800, np.int16), np.full(800, 2, np.int16)
    history.write(1.0, ones, 16_000)
    history.write(10.0, twos[:400], 16_000)
    history.write(10.025, twos[400:], 16_000)
    history.restamp(10.0, 0.02)  # the second stream was heard 20 ms later than first stamped
    assert np.array_equal(history.read(1.0, 800), ones)
    assert np.array_equal(history.read(10.02, 800), twos) and not history.read(10.0, 320).any()
    assert history.last_end == pytest.approx(10.07)
    assert history.moved_at > float("-inf")  # the echo canceller is told its reference moved


def test_old_blocks_are_forgotten():
    history = PlaybackHistory(seconds=1.0)
    history.write(0.0, np.ones(1600, np.int16), 16_000)
    history.write(5.0, np.ones(1600, np.int16), 16_000)
    assert not history.read(0.0, 1600).any()


@pytest.mark.parametrize("delay_ms", [0, 30, 64, 100, 180])
def test_the_echo_delay_is_found_under_a_room_and_noise(delay_ms):
    rng = np.random.default_rng(delay_ms)
    far = (rng.standard_normal(16_000) * 3000).astype(np.int16)
    lag = delay_ms * 16
    # the direct path, then reflections dying away over 50 ms
    room = np.exp(-np.arange(800) / 160.0) * rng.standard_normal(800) * 0.15
    room[:16] = 0.0
    room[0] = 0.6
    echo = np.convolve(np.concatenate([np.zeros(lag), far[: len(far) - lag]]), room)[: len(far)]
    near = (echo + rng.standard_normal(len(far)) * 200).astype(np.int16)
    found, clarity = estimate_delay(far, near, max_lag=16 * 300)
    assert abs(found - lag) <= 2 and clarity > 5


def test_no_echo_has_no_clear_delay():
    rng = np.random.default_rng(1)
    far = (rng.standard_normal(16_000) * 3000).astype(np.int16)
    near = (rng.standard_normal(16_000) * 3000).astype(np.int16)
    assert estimate_delay(far, near, max_lag=16 * 300)[1] < 5


def test_an_echo_ahead_of_its_reference_is_found_at_a_negative_lag():
    """The reference read 60 ms behind the stamps (the path had grown), the echo now 20 ms ahead of
    it (the path shrank back): found where the lags searched reach below zero."""
    rng = np.random.default_rng(2)
    played = (rng.standard_normal(17_000) * 3000).astype(np.int16)
    far, near = played[:16_000], played[320:16_320] // 2  # near 20 ms ahead of far
    found, clarity = estimate_delay(far, near, max_lag=16 * 300, min_lag=-16 * 60)
    assert found == -320 and clarity > 5
    assert estimate_delay(far, near, max_lag=16 * 300)[0] >= 0  # not looked for by default
