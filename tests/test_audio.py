"""Microphone, speaker and device lookup on the real PortAudio path, against a virtual sound card.

Audio goes through PortAudio → ALSA's pulse plugin → a private PulseAudio daemon (tests/rig/pulse.py):
clips played into the fake mic with `paplay` arrive bit-exact, and what the speaker plays is
recorded with `parecord`. Recordings start at an unknown moment, so audio is found by searching
for it. Every wait is bounded; nothing asserts on timing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from elara.audio.capture import Microphone
from elara.audio.devices import AudioDeviceError, find_device, list_devices
from elara.audio.frames import FRAME_SAMPLES, SAMPLE_RATE, AudioClip
from elara.audio.playback import Speaker, _anchor, _Output, as_mono_int16
from elara.audio.reference import PlaybackHistory
from elara.audio.streams import Resampler, close_stream, open_stream, resample
from tests.rig.pulse import VirtualSoundCard, best_offset, find_exact, match_report, read_wav, write_wav

TESTS = Path(__file__).parent


def run(coro, timeout: float = 30.0):
    """Run a coroutine on a fresh loop, bounded."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def noise(seconds: float, rate: int = SAMPLE_RATE, seed: int = 0, level: float = 3000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.standard_normal(round(seconds * rate)) * level, -32768, 32767).astype(np.int16)


def sine(freq: float, seconds: float, rate: int, amplitude: float = 10_000, phase: float = 0.3):
    t = np.arange(round(seconds * rate)) / rate
    return amplitude * np.sin(2 * np.pi * freq * t + phase)


@pytest.fixture(scope="session")
def speech(tmp_path_factory) -> tuple[np.ndarray, np.ndarray]:
    """"hello there" from espeak-ng: (22 050 Hz original, 16 kHz version made by sox)."""
    d = tmp_path_factory.mktemp("speech")
    subprocess.run(["espeak-ng", "-w", str(d / "raw.wav"), "hello there"], check=True, timeout=30)
    subprocess.run(["sox", str(d / "raw.wav"), "-r", "16000", "-c", "1", "-b", "16", str(d / "16k.wav")],
                   check=True, timeout=30)
    raw, raw_rate = read_wav(d / "raw.wav")
    clip, rate = read_wav(d / "16k.wav")
    assert (raw_rate, rate) == (22_050, SAMPLE_RATE)
    return raw, clip


# -- resampler (pure) --------------------------------------------------------------------------


@pytest.mark.parametrize("rates", [(48_000, 16_000), (44_100, 16_000), (22_050, 16_000),
                                   (8_000, 16_000), (16_000, 48_000)])
def test_resampler_output_is_the_ideal_signal_at_the_new_rate(rates):
    src, dst = rates
    x = sine(440, 1.0, src).astype(np.int16)
    y = resample(x, src, dst)
    assert y.dtype == np.int16 and len(y) == dst
    ideal = sine(440, 1.0, dst)
    edge = 100  # the ends see the silence outside the clip
    assert np.abs(y[edge:-edge] - ideal[edge:-edge]).max() <= 3  # within a few LSB of ±10 000


@pytest.mark.parametrize("rates", [(48_000, 16_000), (44_100, 16_000), (16_000, 22_050)])
def test_resampler_block_by_block_equals_all_at_once(rates):
    src, dst = rates
    x = noise(0.7, src, seed=3)
    whole = resample(x, src, dst)
    r = Resampler(src, dst)
    rng = np.random.default_rng(1)
    parts, i = [], 0
    while i < len(x):
        n = int(rng.integers(0, 3000))
        parts.append(r.process(x[i:i + n]))
        i += n
    parts.append(r.flush())
    streamed = np.concatenate(parts)[:len(whole)]
    assert np.array_equal(streamed, whole)


def test_resampler_removes_what_the_new_rate_cannot_hold():
    # 20 kHz at 48 kHz would alias to 4 kHz at 16 kHz; the low-pass must remove it
    x = sine(20_000, 1.0, 48_000).astype(np.int16)
    y = resample(x, 48_000, 16_000)
    assert np.sqrt(np.mean(y[100:-100].astype(float) ** 2)) < 10  # from an RMS of ~7 000


def test_resample_same_rate_and_empty():
    x = noise(0.1)
    assert np.array_equal(resample(x, 16_000, 16_000), x)
    assert len(resample(np.zeros(0, np.int16), 48_000, 16_000)) == 0
    with pytest.raises(ValueError):
        Resampler(0, 16_000)


def test_as_mono_int16():
    x = noise(0.01)
    assert as_mono_int16(x) is x
    assert np.array_equal(as_mono_int16(x.reshape(-1, 1)), x)
    assert np.array_equal(as_mono_int16(np.array([0.0, 1.0, -1.0, 2.0])), [0, 32767, -32767, 32767])
    with pytest.raises(ValueError):
        as_mono_int16(np.zeros((10, 2), np.int16))


def test_a_stream_that_hangs_while_closing_is_left_behind_with_a_warning(caplog):
    # a broken device can block Pa_CloseStream; no real one does so on demand, hence this stand-in
    release = threading.Event()

    class HangingStream:
        closed = False

        def abort(self, ignore_errors: bool = False) -> None:
            release.wait(10)

        def close(self, ignore_errors: bool = False) -> None:
            self.closed = True

    async def main():
        stream = HangingStream()
        await close_stream(stream, "microphone", timeout=0.1)
        closed_on_return = stream.closed
        release.set()  # else asyncio.run would wait for the worker thread at exit
        return closed_on_return

    with caplog.at_level(logging.WARNING, logger="elara.audio.streams"):
        assert run(main()) is False  # returned while the stream still hung
    assert any("microphone: closing the stream took over 0.1 s" in r.getMessage() for r in caplog.records)


# -- devices -----------------------------------------------------------------------------------


def test_devices_by_name_by_index_and_default(sound_card):
    inputs = list_devices("input")
    names = [d.name for d in inputs]
    assert "pulse" in names and "default" in names
    pulse = find_device("pulse", "input")
    assert pulse.name == "pulse" and pulse.max_input_channels > 0
    assert find_device(pulse.index, "input") == pulse
    assert find_device(str(pulse.index), "input") == pulse  # an index given as text (environment)
    assert find_device("PULSE", "output").name == "pulse"  # case-insensitive
    assert find_device("defau", "input").name == "default"  # a unique part of the name
    assert find_device(None, "input").max_input_channels > 0
    assert find_device(None, "output").max_output_channels > 0


def test_a_missing_device_says_what_exists_and_what_to_set(sound_card):
    with pytest.raises(AudioDeviceError) as e:
        find_device("USB Mic 3000", "input")
    err = e.value
    assert err.exit_status == 69 and err.code == "device_missing"
    assert 'no input device matches "USB Mic 3000"' in err.message
    assert '"pulse"' in err.message and '"default"' in err.message
    assert "Audio.InputDevice" in err.message

    with pytest.raises(AudioDeviceError) as e:
        find_device(99, "output")
    assert "index 99" in e.value.message and "Audio.OutputDevice" in e.value.message
    assert "output devices:" in e.value.message

    with pytest.raises(AudioDeviceError, match="Audio.InputDevice"):
        Microphone("USB Mic 3000")
    with pytest.raises(AudioDeviceError, match="Audio.OutputDevice"):
        Speaker("HDMI 7")
    with pytest.raises(AudioDeviceError, match="must be a device name"):
        find_device(1.5, "input")  # type: ignore[arg-type]


def test_without_a_sound_server_the_error_says_there_are_no_devices(tmp_path):
    code = ("from elara.audio.devices import find_device\n"
            "try:\n    find_device(None, 'input')\n"
            "except Exception as e:\n    print(type(e).__name__, e.exit_status, e)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULSE_")}
    env.update(PULSE_SERVER=f"unix:{tmp_path}/nothing.sock", HOME=str(tmp_path),
               XDG_RUNTIME_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=30).stdout
    assert out.startswith("AudioDeviceError 69 there is no default input device")
    assert "PortAudio sees no input devices" in out and "Audio.InputDevice" in out


@pytest.mark.parametrize("kind", ["input", "output"])
def test_open_stream_falls_back_past_the_rates_a_device_refuses(sound_card, kind):
    stream, rate = open_stream(kind, find_device(None, kind), [1, 0, 22_050, SAMPLE_RATE], lambda rate: {})
    try:
        assert rate == 22_050 and stream.samplerate == 22_050 and stream.active
    finally:
        stream.close()


def test_a_device_that_takes_no_rate_names_itself_each_rate_and_the_key(sound_card):
    device = find_device(None, "output")
    with pytest.raises(AudioDeviceError) as e:
        open_stream("output", device, [1, 3], lambda rate: {})
    err = e.value
    assert err.code == "device_unusable" and err.exit_status == 69
    assert f"can't open output device {device.label()} (Audio.OutputDevice)" in err.message
    assert "1 Hz: Invalid sample rate" in err.message and "3 Hz: Invalid sample rate" in err.message

    async def start_at_an_impossible_rate():
        mic = Microphone(None, device_rate=1)
        with pytest.raises(AudioDeviceError, match=r"Audio\.InputDevice.*1 Hz"):
            await mic.start()
        return mic.status()

    assert run(start_at_an_impossible_rate())["is_open"] is False


# -- microphone --------------------------------------------------------------------------------


async def capture_until_found(mic: Microphone, wav: Path, card: VirtualSoundCard, match,
                              timeout: float = 10.0) -> tuple[list, object]:
    """Collect frames while `wav` is played into the mic, until `match(samples)` finds it."""
    frames = []

    async def collect():
        async for frame in mic.frames():
            frames.append(frame)

    task = asyncio.create_task(collect())
    try:
        while not frames:  # the stream delivers before we play
            await asyncio.sleep(0.02)
        await asyncio.to_thread(card.play_into_mic, wav)
        deadline = time.monotonic() + timeout
        while True:
            found = match(np.concatenate([f.samples for f in frames]))
            if found is not None or time.monotonic() > deadline:
                return frames, found
            await asyncio.sleep(0.1)
    finally:
        task.cancel()


def test_microphone_delivers_80_ms_frames_that_hold_the_played_clip_bit_exact(sound_card, speech, tmp_path):
    clip = speech[1]
    wav = write_wav(tmp_path / "hello.wav", clip)

    async def main():
        async with Microphone("pulse") as mic:
            assert mic.is_open and mic.device_rate == SAMPLE_RATE
            assert mic.status() == {"device": mic.device.label(), "is_open": True,
                                    "sample_rate": SAMPLE_RATE, "device_rate": SAMPLE_RATE,
                                    "dropped_frames": 0, "overflows": 0, "reopens": 0}
            frames, offset = await capture_until_found(mic, wav, sound_card, lambda s: find_exact(s, clip))
        assert not mic.is_open
        assert mic.status()["is_open"] is False and mic.status()["device_rate"] is None
        return mic, frames, offset

    mic, frames, offset = run(main())
    assert offset is not None, "the played clip is not in the captured audio"
    assert all(f.samples.shape == (FRAME_SAMPLES,) and f.samples.dtype == np.int16 for f in frames)
    times = [f.captured_at for f in frames]
    assert times == sorted(times) and times[-1] <= time.monotonic()
    assert mic.dropped_frames == 0


def test_microphone_opened_at_48_khz_still_gives_16_khz_frames(sound_card, speech, tmp_path):
    clip = speech[1]
    wav = write_wav(tmp_path / "hello.wav", clip)

    def match(samples):
        if len(samples) < len(clip):
            return None
        offset, score = best_offset(samples, clip)
        return (offset, score) if score > 0.97 else None

    async def main():
        async with Microphone(None, device_rate=48_000) as mic:
            assert mic.device_rate == 48_000
            assert (mic.status()["device_rate"], mic.status()["sample_rate"]) == (48_000, SAMPLE_RATE)
            return await capture_until_found(mic, wav, sound_card, match)

    frames, found = run(main())
    # PulseAudio resamples 16 → 48 kHz and we resample back: close, not bit-exact
    assert found is not None, "the clip did not come through the 48 kHz path"
    assert all(f.samples.shape == (FRAME_SAMPLES,) for f in frames)


def test_microphone_drops_the_oldest_frames_when_the_consumer_lags(sound_card):
    async def main():
        async with Microphone(None, max_queued_frames=3) as mic:
            deadline = time.monotonic() + 10
            while mic.dropped_frames < 5 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)  # nobody reads frames()
            dropped = mic.dropped_frames
            queued = []
            async for frame in mic.frames():
                queued.append(frame)
                if len(queued) == 4:
                    break
        return dropped, queued

    dropped, queued = run(main())
    assert dropped >= 5
    # the three kept are the newest: consecutive, then the next live frame follows them
    times = [f.captured_at for f in queued]
    assert times == sorted(times)


def test_microphone_counts_overflows_and_warns_rate_limited(sound_card, caplog):
    # PulseAudio buffers seconds of capture, so a real overflow can't be forced here; feed the
    # stream's own callback the flag PortAudio sets.
    import sounddevice as sd

    async def main():
        async with Microphone(None) as mic:
            callback = mic._make_callback(mic._generation)
            block = np.zeros((FRAME_SAMPLES, 1), np.int16)
            for _ in range(3):
                callback(block, FRAME_SAMPLES, None, sd.CallbackFlags(sd._lib.paInputOverflow))
            deadline = time.monotonic() + 5
            while mic.overflows < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            return mic.overflows

    with caplog.at_level(logging.WARNING, logger="elara.audio.capture"):
        assert run(main()) == 3
    warnings = [r for r in caplog.records if "input overflow" in r.getMessage()]
    assert len(warnings) == 1


def test_frames_ends_when_the_microphone_stops(sound_card):
    async def main():
        mic = Microphone(None)
        await mic.start()
        got = []

        async def consume():
            async for frame in mic.frames():
                got.append(frame)

        task = asyncio.create_task(consume())
        while not got:
            await asyncio.sleep(0.02)
        await mic.stop()
        await asyncio.wait_for(task, 5)
        return got

    assert run(main())


# -- speaker -----------------------------------------------------------------------------------


def test_the_speakers_timeline_is_where_the_callbacks_agree_it_is():
    """Numbers only, as PulseAudio gave them (measured): eight callbacks fill the buffer at once,
    each saying its block is heard one block later than the one before; then they come every
    20 ms, and all of them put the stream's first sample 26 ms later than the first ones did.
    The timeline settles there once, and then holds: a callback that runs late without knowing it
    does not move it; a gap heard starts a new one."""
    out = _Output(16_000, 16_000)
    history = PlaybackHistory(seconds=60)
    block = 320

    def callback(now, ahead, underflow=False):
        heard = _anchor(out, now + ahead, underflow, history)
        history.write(heard, np.full(block, out.handed // block + 1, np.int16), 16_000)
        out.handed += block
        return heard

    stamps = [callback(0.0, n * 0.02) for n in range(8)]
    assert stamps == pytest.approx([n * 0.02 for n in range(8)])
    stamps += [callback(0.026 + n * 0.02, 0.16) for n in range(16)]
    assert stamps[-1] == pytest.approx(23 * 0.02)  # not settled yet
    stamps.append(callback(0.026 + 16 * 0.02, 0.16))
    # Settled on the 25th: it and what was played so far are read back from 26 ms on, block after
    # block, no gap, no overlap.
    assert stamps[-1] == pytest.approx(0.026 + 24 * 0.02)
    assert np.array_equal(history.read(0.026, 25 * block), np.repeat(np.arange(1, 26), block))
    late = [callback(0.026 + n * 0.02 + 0.015, 0.16) for n in range(17, 60)]
    assert late[-1] == pytest.approx(0.026 + 67 * 0.02)
    moved = history.moved_at
    after_gap = callback(0.026 + 60 * 0.02 + 0.1, 0.16, underflow=True)
    assert after_gap == pytest.approx(0.026 + 60 * 0.02 + 0.1 + 0.16)
    assert history.moved_at > moved
def test_speaker_play_returns_after_the_whole_clip_was_heard(sound_card, speech):
    clip = speech[1]

    async def main():
        rec = await asyncio.to_thread(sound_card.record_speaker)
        speaker = Speaker("pulse")
        assert not speaker.speaking
        assert speaker.status() == {"device": speaker.device.label(), "is_open": False,
                                    "speaking": False, "underflows": 0}
        played = await speaker.play(AudioClip(clip, SAMPLE_RATE))
        assert speaker.is_open and speaker.status()["is_open"] is True
        await speaker.stop()  # aborts the stream: anything not yet heard would be cut
        assert speaker.status()["is_open"] is False
        return played, await asyncio.to_thread(rec.samples), speaker

    played, recorded, speaker = run(main())
    assert played is True
    assert find_exact(recorded, clip) is not None, (
        f"the clip was cut or changed: {match_report(recorded, clip)}; underflows {speaker.underflows}")
    assert not speaker.speaking and speaker.last_audio_end <= time.monotonic()


def test_speaker_keeps_what_it_played_by_when_it_was_heard(sound_card, speech):
    clip = speech[1]

    async def main():
        history = PlaybackHistory()
        speaker = Speaker("pulse", history=history)
        before = time.monotonic()
        await speaker.play(AudioClip(clip, SAMPLE_RATE))
        heard_end = speaker.last_audio_end
        await speaker.close()
        return history, before, heard_end

    history, before, heard_end = run(main())
    window = history.read(before, round((heard_end - before + 0.5) * SAMPLE_RATE))
    offset = find_exact(window, clip)
    assert offset is not None
    # stamped with when it was heard: the clip ends where the speaker said its last sample was heard
    assert abs(before + (offset + len(clip)) / SAMPLE_RATE - heard_end) < 0.03


class WatchedHistory(PlaybackHistory):
    """A playback history that notes, at each move of the speaker's timeline, whether anything
    had been played (and so read by an echo canceller) on it already."""

    def __init__(self) -> None:
        super().__init__()
        self.played_before_each_move: list[bool] = []

    def restamp(self, since: float, shift: float) -> None:
        self.played_before_each_move.append(self.last_end > 0.0)
        super().restamp(since, shift)


def test_a_fresh_stream_settles_its_timeline_before_her_first_sound(sound_card, speech):
    """Her first sound on a fresh stream (the first ring's chime) waits until the timeline is
    settled: played before, it was read by the echo canceller where the first callbacks put it,
    then moved under it, and the canceller learnt the wrong echo."""
    clip = speech[1]

    async def main():
        history = WatchedHistory()
        speaker = Speaker("pulse", history=history)
        rec = await asyncio.to_thread(sound_card.record_speaker)
        played = await speaker.play(AudioClip(clip, SAMPLE_RATE))
        await speaker.close()
        return played, history, await asyncio.to_thread(rec.samples)

    played, history, recorded = run(main())
    assert played is True
    assert history.played_before_each_move == [False]  # settled once, before anything played
    assert find_exact(recorded, clip) is not None, match_report(recorded, clip)


def test_speaker_queued_clips_play_back_to_back_and_share_one_stream(sound_card):
    clips = [noise(0.3, seed=s) for s in (1, 2, 3)]

    async def main():
        speaker = Speaker(None)
        rec = await asyncio.to_thread(sound_card.record_speaker)
        # a reply's sentences handed over before the previous one ends: gapless
        results = await asyncio.gather(*(speaker.play(AudioClip(c, SAMPLE_RATE)) for c in clips))
        first_stream = speaker._out
        # one after another: the stream stays open between them
        for c in clips:
            assert await speaker.play(AudioClip(c, SAMPLE_RATE))
            assert speaker._out is first_stream
        await speaker.close()
        return results, await asyncio.to_thread(rec.samples), speaker

    results, recorded, speaker = run(main())
    assert results == [True, True, True]
    joined = np.concatenate(clips)
    first = find_exact(recorded, joined)
    assert first is not None, f"queued clips were not played back to back: {match_report(recorded, joined)}"
    for c in clips:  # and again, each whole, after the joined run
        assert find_exact(recorded[first + len(joined):], c) is not None
    assert not speaker.is_open


def test_speaker_stop_cuts_playback_and_the_pending_play_returns(sound_card):
    long_clip = noise(4.0, seed=7)

    async def main():
        speaker = Speaker(None)
        rec = await asyncio.to_thread(sound_card.record_speaker)
        task = asyncio.create_task(speaker.play(AudioClip(long_clip, SAMPLE_RATE)))
        deadline = time.monotonic() + 5
        while not (speaker.speaking and speaker.is_open) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert speaker.speaking
        await asyncio.sleep(0.3)
        await speaker.stop()
        played = await asyncio.wait_for(task, 2)  # returns at once, well before the 4 s clip ends
        assert not speaker.speaking and not speaker.is_open
        await asyncio.sleep(0.3)
        return played, await asyncio.to_thread(rec.samples)

    played, recorded = run(main())
    assert played is False
    assert find_exact(recorded, long_clip[:800]) is not None  # it did start
    assert find_exact(recorded, long_clip[-16_000:]) is None  # the last second never played


def test_a_paused_speaker_holds_its_place_and_one_kept_open_stays_open(sound_card):
    """Echo cancellation keeps the speaker open (one timeline for the reference) until it was
    quiet for `keep_open_idle_seconds`; a pause (she checks whether she was told to stop) is
    silence, and the clip goes on where it was."""
    clip = noise(2.0, seed=9)

    async def main():
        speaker = Speaker(None, idle_close_seconds=0.2, keep_open=True, keep_open_idle_seconds=1.5)
        rec = await asyncio.to_thread(sound_card.record_speaker)
        task = asyncio.create_task(speaker.play(AudioClip(clip, SAMPLE_RATE)))
        deadline = time.monotonic() + 5
        while not (speaker.speaking and speaker.is_open) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        speaker.pause()
        await asyncio.sleep(0.6)
        speaker.resume()
        played = await asyncio.wait_for(task, 5)
        await asyncio.sleep(0.5)  # past idle_close_seconds
        still_open = speaker.is_open
        await speaker.stop()
        after_stop = speaker.is_open
        deadline = time.monotonic() + 10
        while speaker.is_open and time.monotonic() < deadline:  # quiet past keep_open_idle_seconds
            await asyncio.sleep(0.05)
        closed_when_quiet = not speaker.is_open
        await speaker.close()
        return played, still_open and after_stop, closed_when_quiet, await asyncio.to_thread(rec.samples)

    played, kept_open, closed_when_quiet, recorded = run(main())
    assert played and kept_open and closed_when_quiet
    start, end = find_exact(recorded, clip[:4000]), find_exact(recorded, clip[-8000:])
    assert start is not None and end is not None, match_report(recorded, clip)
    # every sample played, in order, with the pause as a silent gap of about 0.6 s inside
    gap = (end + 8000 - start - len(clip)) / SAMPLE_RATE
    assert 0.4 < gap < 0.9, gap


def test_a_pause_longer_than_the_stall_slack_is_not_a_stalled_speaker(sound_card):
    """She holds her reply while a "stop" is checked, which on a busy machine may take longer than
    a stalled device is given: the clip still plays to its end."""
    async def main():
        speaker = Speaker(None, keep_open=True, stall_slack_seconds=0.3)
        task = asyncio.create_task(speaker.play(AudioClip(noise(0.6, seed=3), SAMPLE_RATE)))
        deadline = time.monotonic() + 5
        while not speaker.speaking and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        speaker.pause()
        await asyncio.sleep(1.5)
        speaker.resume()
        played = await asyncio.wait_for(task, 5)
        await speaker.stop()
        await speaker.close()
        return played

    assert run(main())


def test_speaker_reopens_for_another_rate_and_closes_when_idle(sound_card, speech):
    raw, clip16 = speech  # 22 050 Hz espeak output, and 16 kHz

    async def main():
        speaker = Speaker(None, idle_close_seconds=0.3)
        rec = await asyncio.to_thread(sound_card.record_speaker)
        assert await speaker.play(AudioClip(clip16, SAMPLE_RATE))
        assert speaker._out.stream_rate == SAMPLE_RATE
        assert await speaker.play(AudioClip(raw, 22_050))
        assert speaker._out.stream_rate == 22_050
        deadline = time.monotonic() + 5
        while speaker.is_open and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return speaker, await asyncio.to_thread(rec.samples)

    speaker, recorded = run(main())
    assert not speaker.is_open, "the stream stayed open while idle"
    assert find_exact(recorded, clip16) is not None, match_report(recorded, clip16)
    # PulseAudio resampled the 22 050 Hz clip into the 16 kHz sink
    offset, score = best_offset(recorded, resample(raw, 22_050, SAMPLE_RATE))
    assert score > 0.97


def test_cancelling_play_takes_the_rest_of_the_clip_off(sound_card):
    long_clip = noise(3.0, seed=8)

    async def main():
        speaker = Speaker(None, idle_close_seconds=0.2)
        rec = await asyncio.to_thread(sound_card.record_speaker)
        task = asyncio.create_task(speaker.play(AudioClip(long_clip, SAMPLE_RATE)))
        deadline = time.monotonic() + 5
        while not speaker.is_open and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline = time.monotonic() + 5
        while speaker.is_open and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not speaker.is_open and not speaker.speaking
        return await asyncio.to_thread(rec.samples)

    recorded = run(main())
    assert find_exact(recorded, long_clip[:800]) is not None
    assert find_exact(recorded, long_clip[-16_000:]) is None


# -- the harness itself, and recovery -----------------------------------------------------------


def test_a_subprocess_with_the_card_env_sees_its_devices(sound_card):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULSE_")}
    env.update(sound_card.env)
    code = ("from elara.audio.devices import find_device\n"
            "print(find_device(None, 'input').name, find_device('pulse', 'output').name)")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    assert done.stdout.split() == ["default", "pulse"], done.stderr


def test_the_harness_runs_standalone_and_stops_on_sigterm():
    process = subprocess.Popen([sys.executable, "-m", "tests.rig.pulse"], cwd=TESTS.parent,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = [process.stdout.readline() for _ in range(4)]
        env = dict(line.removeprefix("export ").strip().split("=", 1) for line in lines[:3])
        assert set(env) == {"PULSE_SERVER", "PULSE_SINK", "PULSE_SOURCE"}
        socket = Path(env["PULSE_SERVER"].removeprefix("unix:"))
        assert socket.exists()
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
        assert not socket.parent.exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)


def test_microphone_comes_back_after_the_sound_server_restarts(sound_card, speech, tmp_path, caplog):
    clip = speech[1]
    wav = write_wav(tmp_path / "hello.wav", clip)

    async def main():
        async with Microphone(None, stall_seconds=1.0, retry_initial_seconds=0.2) as mic:
            frames = []

            async def collect():
                async for frame in mic.frames():
                    frames.append(frame)

            task = asyncio.create_task(collect())
            while not frames:
                await asyncio.sleep(0.02)
            await asyncio.to_thread(sound_card.restart)  # the device goes away and comes back
            deadline = time.monotonic() + 15
            while mic.reopens == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert mic.reopens >= 1 and mic.is_open
            assert mic.status()["reopens"] == mic.reopens and mic.status()["is_open"]
            before = len(frames)
            await asyncio.to_thread(sound_card.play_into_mic, wav)
            deadline = time.monotonic() + 10
            found = None
            while found is None and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                found = find_exact(np.concatenate([f.samples for f in frames[before:]] or [[]]), clip)
            task.cancel()
            return found

    with caplog.at_level(logging.WARNING, logger="elara.audio.capture"):
        found = run(main())
    assert found is not None, "the clip played after the restart was not captured"
    messages = [r.getMessage() for r in caplog.records]
    assert any("reopening" in m for m in messages) and any("back on" in m for m in messages)


def test_speaker_fails_the_clip_when_the_device_goes_away_then_plays_again(sound_card, caplog):
    long_clip, short_clip = noise(3.0, seed=9), noise(0.4, seed=10)

    async def main():
        speaker = Speaker(None)
        task = asyncio.create_task(speaker.play(AudioClip(long_clip, SAMPLE_RATE)))
        deadline = time.monotonic() + 5
        while not speaker.is_open and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        await asyncio.to_thread(sound_card.restart)
        with pytest.raises(AudioDeviceError, match="Audio.OutputDevice"):
            await asyncio.wait_for(task, 10)
        rec = await asyncio.to_thread(sound_card.record_speaker)
        assert await speaker.play(AudioClip(short_clip, SAMPLE_RATE))
        await speaker.close()
        return await asyncio.to_thread(rec.samples)

    with caplog.at_level(logging.WARNING, logger="elara.audio.playback"):
        recorded = run(main())
    assert find_exact(recorded, short_clip) is not None, match_report(recorded, short_clip)
    assert any("stopped" in r.getMessage() for r in caplog.records)
