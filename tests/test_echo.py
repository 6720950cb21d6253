"""Echo cancellation on a simulated room with the real cancellers (speexdsp's and WebRTC's AEC3),
and the barge-in decision on numbers."""

import numpy as np
import pytest

from elara.audio.frames import FRAME_SAMPLES, SAMPLE_RATE, AudioFrame
from elara.audio.reference import PlaybackHistory
from elara.skills.announcements import chime
from elara.voice.barge_in import WAKE_WINDOW_FRAMES
from elara.voice.echo import (
    CANCELLERS,
    FAR_ACTIVE_RMS,
    RESIDUAL_MIN_FRAMES,
    SETTLE_FRAMES,
    EchoFilter,
    HeardPlayback,
    LearningCanceller,
    SpeexCanceller,
    could_be_her_voice,
    echo_likeness,
    is_barge_in,
    is_speech_over_playback,
    make_canceller,
)
from tests.rig import voice_clips

FRAME = FRAME_SAMPLES / SAMPLE_RATE


def room(far: np.ndarray, delay_ms: int, gain: float, seed: int = 0) -> np.ndarray:
    """The far end as a microphone across the room hears it: late, quieter, with reflections."""
    rng = np.random.default_rng(seed)
    taps = np.exp(-np.arange(2400) / 800.0) * rng.standard_normal(2400) * 0.05
    taps[:48] = 0.0
    taps[0] = 1.0
    lag = delay_ms * SAMPLE_RATE // 1000
    echo = np.convolve(np.concatenate([np.zeros(lag), far.astype(float)]), taps)[: len(far)]
    return echo * gain


def run_filter(far: np.ndarray, mic: np.ndarray, kind: str, played_at: float = 100.0):
    """Feed `mic` frame by frame to an EchoFilter whose speaker played `far` from `played_at`."""
    history = PlaybackHistory(seconds=30)
    for i in range(0, len(far), 320):
        history.write(played_at + i / SAMPLE_RATE, far[i:i + 320], SAMPLE_RATE)
    echo = EchoFilter(make_canceller(kind), history)
    out = []
    for i in range(0, len(mic) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        captured_at = played_at + (i + FRAME_SAMPLES) / SAMPLE_RATE  # its last sample, just now
        out.append(echo.clean(AudioFrame(mic[i:i + FRAME_SAMPLES].astype(np.int16), captured_at)).samples)
    return echo, np.concatenate(out)


def run_speexdsp(played: np.ndarray, mic: np.ndarray) -> EchoFilter:
    """An EchoFilter on speexdsp alone whose speaker played `played` from 100 s, fed `mic` (clipped
    to 16 bits) frame by frame."""
    history = PlaybackHistory(seconds=60)
    for i in range(0, len(played), 320):
        history.write(100.0 + i / SAMPLE_RATE, played[i:i + 320], SAMPLE_RATE)
    echo = EchoFilter(SpeexCanceller(), history)
    for i in range(0, len(mic) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        echo.clean(AudioFrame(np.clip(mic[i:i + FRAME_SAMPLES], -32768, 32767).astype(np.int16),
                              100.0 + (i + FRAME_SAMPLES) / SAMPLE_RATE))
    return echo


def level(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x.astype(float)))))


@pytest.fixture(scope="module")
def far() -> np.ndarray:
    return voice_clips.concat(*[voice_clips.piper_speech(t) for t in (
        "Paris is the capital of France, and it is a lovely city on the Seine.",
        "Jarvis is the name of a butler in many stories, and of a famous assistant.",
        "The weather tomorrow will be sunny with a light breeze from the west.")])


@pytest.mark.parametrize("kind", CANCELLERS)
@pytest.mark.parametrize("delay_ms", [40, 120])
def test_her_own_voice_is_taken_out_of_the_microphone(far, delay_ms, kind):
    mic = np.clip(room(far, delay_ms, 0.5) + np.random.default_rng(2).standard_normal(len(far)) * 30,
                  -32768, 32767)
    echo, out = run_filter(far, mic, kind)
    settled = slice(3 * SAMPLE_RATE, len(out))
    erle = 20 * np.log10(level(mic[settled]) / level(out[settled]))
    assert erle > 15, erle
    assert echo.erle_db > 10
    assert echo.delay_ms is not None and abs(echo.delay_ms - delay_ms) <= 3
    assert echo.counters.processed > 0


@pytest.mark.parametrize("kind", CANCELLERS)
def test_the_users_voice_over_hers_comes_through(far, kind):
    user = voice_clips.espeak_speech("Hey Jarvis, what is the capital of Germany?", voice="en-us")
    start = 4 * SAMPLE_RATE
    near = np.zeros(len(far))
    near[start:start + len(user)] = user[: len(far) - start]
    mic = np.clip(room(far, 60, 0.5) + near, -32768, 32767)
    _, out = run_filter(far, mic, kind)
    spoken = slice(start, start + len(user))
    alone = slice(start + len(user) + SAMPLE_RATE // 2, len(out))  # her voice alone again
    assert level(out[spoken]) > 0.5 * level(near[spoken])  # the user's words come through …
    assert level(out[spoken]) > 10 * level(out[alone])  # … far above what is left of hers


def test_a_microphone_that_does_not_hear_her_lets_the_person_over_her_through_untouched(far):
    """A headset, or a speaker the microphone hardly hears: there is no echo to take, so nothing
    of the person talking over her may be taken either (AEC3 standing in took 7-20 dB of a
    thinking pause's last words and Whisper heard none), and the delay their voice seems to
    have behind hers in one second of it moves nothing."""
    person = voice_clips.piper_speech("to Berlin and back again by train, please")
    near = np.zeros(len(far))
    spans = []
    for start in (3 * SAMPLE_RATE, 6 * SAMPLE_RATE):
        near[start:start + len(person)] = person[: len(far) - start]
        spans.append(slice(start, min(start + len(person), len(far))))
    echo, out = run_filter(far, near.astype(np.int16), "speex")
    for span in spans:
        assert level(out[span]) == pytest.approx(level(near[span]), rel=0.05)
    assert echo.counters.realigned == 0


def test_with_nothing_played_frames_pass_untouched():
    history = PlaybackHistory()
    echo = EchoFilter(make_canceller(), history)
    frame = AudioFrame(np.arange(FRAME_SAMPLES, dtype=np.int16), 50.0)
    assert echo.clean(frame) is frame
    assert echo.counters.passed == 1 and echo.counters.processed == 0


def test_a_frame_passes_only_well_after_she_last_played():
    """`passes` (the loop then cleans the frame on the event loop) only where `clean` would give
    the frame back as it is, with a margin: never while she plays or within her echo's tail."""
    history = PlaybackHistory(seconds=60)
    echo = EchoFilter(make_canceller(), history, tail_seconds=1.0)
    assert echo.passes(AudioFrame(np.zeros(FRAME_SAMPLES, dtype=np.int16), 50.0))
    history.write(100.0, np.full(SAMPLE_RATE, 3000, dtype=np.int16), SAMPLE_RATE)  # 100-101 s
    for captured_at in (99.0, 100.5, 101.0, 102.0, 102.5):  # before it is heard, too: it was written
        frame = AudioFrame(np.zeros(FRAME_SAMPLES, dtype=np.int16), captured_at)
        assert not echo.passes(frame), captured_at
    for captured_at in (102.7, 110.0):
        frame = AudioFrame(np.zeros(FRAME_SAMPLES, dtype=np.int16), captured_at)
        assert echo.passes(frame), captured_at
        assert echo.clean(frame) is frame
    shown = echo.status()
    assert shown["frames_passed"] == 2 and shown["frames_cancelled"] == 0
    assert shown["playback_blocks"] == 1  # what `elara status` shows the soak: the blocks kept


@pytest.mark.parametrize("near, far, erle, expected", [
    (500.0, 0.0, 0.0, True),  # she is silent: any wake is the user's
    (500.0, 4000.0, 25.0, True),  # 4000 lowered 25 dB leaves 225; 500 is 7 dB above it
    (300.0, 4000.0, 25.0, False),  # only 2.5 dB above: could be her own "Jarvis"
    (3000.0, 4000.0, 0.0, False),  # nothing cancelled yet: her voice is all there is
    (9000.0, 4000.0, 0.0, True),  # someone shouting over her
])
def test_the_barge_in_decision(near, far, erle, expected):
    assert is_barge_in(near, far, erle) is expected


def two_replies_reopened(far: np.ndarray) -> tuple[np.ndarray, PlaybackHistory, int]:
    """`far` played twice with a second of silence between, the second time by a reopened
    stream whose stamps are 15 ms off: what was played, its history, and where the second starts."""
    gap = np.zeros(SAMPLE_RATE, dtype=np.int16)
    played = np.concatenate([far, gap, far])
    history = PlaybackHistory(seconds=60)
    second = len(far) + len(gap)
    for i in range(0, len(played), 320):
        off = -0.015 if i >= second else 0.0  # the reopened stream's stamps say "heard earlier"
        history.write(100.0 + i / SAMPLE_RATE + off, played[i:i + 320], SAMPLE_RATE)
    return played, history, second


def test_a_jittery_microphone_and_a_reopened_speaker_keep_the_echo_where_the_filter_learnt_it(far):
    """Frames stamped by callbacks that jitter by ±8 ms, and a second reply whose output stream
    opened with stamps 15 ms off (the speaker stays open with echo cancellation on, so this is a
    reopened device): the canceller still takes her voice out of both."""
    rng = np.random.default_rng(5)
    played, history, second = two_replies_reopened(far)
    mic = np.clip(room(played, 60, 0.5) + rng.standard_normal(len(played)) * 30, -32768, 32767)
    echo = EchoFilter(SpeexCanceller(), history)
    out = []
    for i in range(0, len(mic) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        stamp = 100.0 + (i + FRAME_SAMPLES) / SAMPLE_RATE + rng.uniform(-0.008, 0.008)
        out.append(echo.clean(AudioFrame(mic[i:i + FRAME_SAMPLES].astype(np.int16), stamp)).samples)
    cleaned = np.concatenate(out)
    # Each reply once the filter has learnt (and, for the second, relearnt a little) the room.
    for begin in (3 * SAMPLE_RATE, second + 4 * SAMPLE_RATE):
        span = slice(begin, begin + 5 * SAMPLE_RATE)
        assert 20 * np.log10(level(mic[span]) / level(cleaned[span])) > 15, begin
    assert echo.counters.realigned >= 1 and echo.counters.resyncs == 0
    # 60 ms, and 15 ms off; the reference runs on from the first frame's stamp, whose ±8 ms of
    # jitter the delay measured behind the stamps carries
    assert echo.delay_ms is not None and abs(echo.delay_ms - 75) <= 8 + 3


def test_after_a_realignment_what_is_left_of_her_voice_is_measured_again(far):
    """The echo path moved (here, a reopened stream's stamps 15 ms off): the filter relearns it,
    and until what cancelling leaves of her voice is measured anew, nothing over her voice may be
    taken for the person (a CI run took her first words after such a shift for the person going on)."""
    played, history, _ = two_replies_reopened(far)
    mic = room(played, 60, 0.5)
    echo = EchoFilter(SpeexCanceller(), history)
    seen = []  # per frame: realignments so far, settled, residual measured
    for i in range(0, len(mic) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        stamp = 100.0 + (i + FRAME_SAMPLES) / SAMPLE_RATE
        echo.clean(AudioFrame(mic[i:i + FRAME_SAMPLES].astype(np.int16), stamp))
        seen.append((echo.counters.realigned, echo.settled(stamp), echo.residual_ratio() is not None))
    assert seen[len(far) // FRAME_SAMPLES - 1][1:] == (True, True)  # the first reply: learnt
    moved = next(n for n, (realigned, _, _) in enumerate(seen) if realigned)
    assert seen[moved][1:] == (False, False)
    back = next(n for n in range(moved, len(seen)) if seen[n][1])
    # settled again once her voice was heard long enough to measure (a frame of hers at most 80 ms)
    assert seen[back][2] and back - moved >= RESIDUAL_MIN_FRAMES - 1
    assert all(settled for _, settled, _ in seen[back:])


class Scaled:
    """A canceller that leaves `gain` of the microphone (set by the test as it "learns")."""

    stream_delay_ms = 0

    def __init__(self, gain: float) -> None:
        self.gain = gain
        self.resets = 0

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        return (near * self.gain).astype(np.int16)

    def reset(self) -> None:
        self.resets += 1


def test_aec3_answers_until_speexdsp_has_learnt_the_room_and_stopped_getting_better():
    quick, learner = Scaled(0.0), Scaled(1.0)
    canceller = LearningCanceller(quick, learner)
    near = np.full(FRAME_SAMPLES, 8000, dtype=np.int16)
    far = np.full(FRAME_SAMPLES, 8000, dtype=np.int16)
    outputs = []
    # speexdsp's residual falls 1 dB a frame to -30 dB (past LEARNT_ERLE_DB, still improving), then holds
    for frame in range(200):
        learner.gain = 10 ** (-min(frame, 30) / 20)
        outputs.append(int(np.abs(canceller.process(near, far)).max()))
        if canceller.learnt:
            break
    assert canceller.learnt
    assert 50 < frame < 100  # not at the first 20 dB (frame 20): once it held for a while
    assert set(outputs[:-1]) == {0}  # AEC3's until then
    assert canceller.process(near, far).max() == int(8000 * learner.gain)  # speexdsp's after
    # A reset (a new device) starts over with AEC3, and frames where she is silent teach nothing.
    canceller.reset()
    assert not canceller.learnt and quick.resets == learner.resets == 1
    for _ in range(200):
        assert canceller.process(near, np.zeros(FRAME_SAMPLES, dtype=np.int16)).max() == 0
    assert not canceller.learnt


@pytest.mark.parametrize("heard, learnt_at", [(0.0, SETTLE_FRAMES), (0.01, SETTLE_FRAMES), (0.1, None)])
def test_a_microphone_that_hardly_hears_her_has_speexdsp_at_the_first_look(heard, learnt_at):
    """Nothing (or -40 dB) of her voice in the microphone: speexdsp takes over at the first look,
    having no echo to learn; -20 dB of her still needs speexdsp to learn it away."""
    canceller = LearningCanceller(Scaled(0.0), Scaled(1.0))
    far = np.full(FRAME_SAMPLES, 8000, dtype=np.int16)
    near = np.full(FRAME_SAMPLES, round(8000 * heard), dtype=np.int16)
    frames = 0
    while not canceller.learnt and frames < 4 * SETTLE_FRAMES:
        canceller.process(near, far)
        frames += 1
    assert (frames if canceller.learnt else None) == learnt_at


@pytest.mark.parametrize("near, far, erle, ratio, expected", [
    (500.0, 0.0, 0.0, 0.5, True),  # she is silent
    (200.0, 4000.0, 0.0, 0.0, True),  # the microphone doesn't hear her at all: any speech is theirs
    (200.0, 4000.0, 0.0, None, False),  # not measured yet: her echo might be as loud as she is
    (2000.0, 4000.0, 20.0, 0.1, True),  # 400 left of her; 2000 is 14 dB above it
    (1000.0, 4000.0, 20.0, 0.1, False),  # 8 dB above what is left of her: could be her
    (3000.0, 4000.0, 0.0, 1.0, False),  # nothing cancelled: her voice is all there is
])
def test_speech_over_her_stands_above_what_is_left_of_her_voice(near, far, erle, ratio, expected):
    assert is_speech_over_playback(near, far, erle, ratio) is expected


@pytest.mark.parametrize("gain, most", [(0.0, 0.01), (0.5, 0.1)])
def test_what_cancelling_leaves_of_her_voice_is_measured(far, gain, most):
    """A microphone that doesn't hear the speaker leaves nothing of her; one across a room
    (speexdsp having learnt it) a small part."""
    mic = room(far, 60, gain)
    history = PlaybackHistory(seconds=30)
    for i in range(0, len(far), 320):
        history.write(100.0 + i / SAMPLE_RATE, far[i:i + 320], SAMPLE_RATE)
    echo = EchoFilter(make_canceller("speex"), history)
    ratios = []
    for i in range(0, len(mic) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        frame = AudioFrame(mic[i:i + FRAME_SAMPLES].astype(np.int16), 100.0 + (i + FRAME_SAMPLES) / SAMPLE_RATE)
        echo.clean(frame)
        ratios.append(echo.residual_ratio())
    assert ratios[0] is None  # too few of her frames yet: the worst case rules
    assert ratios[-1] is not None and ratios[-1] <= most
    echo.reset()
    assert echo.residual_ratio() is None


@pytest.mark.parametrize("delays", [(40, 100, 40), (60, 63, 60)])
def test_her_echo_path_moving_between_replies_is_seen_at_her_first_frames(far, delays):
    """Between replies her echo path moved from 40 to 100 ms (a CI run's stalled sound server did
    this), or by 3 ms (a live run's loopback, which the check let pass when it looked for 4 ms), and
    back: each reply after a move, uncancelled, would pass for the person going on. The filter sees
    each move before three frames of it (the going-on check's 200 ms) pass for the person, and
    listens again only once what cancelling leaves of her voice is measured anew."""
    gap = np.zeros(2 * SAMPLE_RATE, dtype=np.int16)
    played = np.concatenate([far, gap, far, gap, far])
    starts = [0, len(far) + len(gap), 2 * (len(far) + len(gap))]
    history = PlaybackHistory(seconds=60)
    for i in range(0, len(played), 320):
        history.write(100.0 + i / SAMPLE_RATE, played[i:i + 320], SAMPLE_RATE)
    mic = np.concatenate([room(played, delay, 0.5)[start:end]
                          for delay, start, end in zip(delays, starts, starts[1:] + [len(played)])])
    mic += np.random.default_rng(3).standard_normal(len(mic)) * 30
    echo = EchoFilter(SpeexCanceller(), history)
    in_a_row, most_in_a_row, moves = 0, 0, []
    for i in range(0, len(mic) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        stamp = 100.0 + (i + FRAME_SAMPLES) / SAMPLE_RATE
        seen = echo.counters.moved
        echo.clean(AudioFrame(np.clip(mic[i:i + FRAME_SAMPLES], -32768, 32767).astype(np.int16), stamp))
        # as the going-on check asks of each frame of speech; where she is silent it is the person's
        person = echo.person_over_playback(stamp) and echo.recent_levels(1)[1] >= FAR_ACTIVE_RMS
        if echo.counters.moved > seen:
            assert not person and not echo.settled(stamp)
            moves.append((i, echo.delay_ms))
        in_a_row = in_a_row + 1 if person else 0
        most_in_a_row = max(most_in_a_row, in_a_row)
    assert most_in_a_row < 3
    # each in her first second after it, as it reached her
    assert [next(start for start in starts if 0 <= at - start < SAMPLE_RATE) for at, _ in moves] == starts[1:]
    assert [round(delay_ms) for _, delay_ms in moves] == list(delays[1:])


def test_a_voice_like_hers_far_behind_her_echo_is_not_taken_for_a_move(far):
    """Over her reply, someone whose words are hers from a third of a second before (as alike as a
    voice can be: her own, late), louder than her echo: no stall moves an echo that far, so the move
    check leaves it, and the once-a-second measure still finds her echo where it is."""
    mic = room(far, 40, 0.25)
    late, begin, said = int(0.33 * SAMPLE_RATE), 5 * SAMPLE_RATE, int(0.8 * SAMPLE_RATE)
    mic[begin:begin + said] += far[begin - late:begin - late + said] * 1.0
    mic += np.random.default_rng(0).standard_normal(len(mic)) * 30
    echo = run_speexdsp(far, mic)
    assert echo.counters.moved == 0
    assert echo.delay_ms is not None and abs(echo.delay_ms - 40) <= 2


@pytest.mark.parametrize("late_ms", [120, 180])
def test_a_voice_like_hers_as_she_falls_silent_is_not_taken_for_a_move(far, late_ms):
    """As her sentence ends, someone whose words are hers from a moment before (her own voice,
    late, as loud as her echo) goes on into the hush between her sentences: where the filter learns
    her echo she then plays next to nothing, so her echo missing there says nothing, and the move
    check leaves it (the serial echo test's wake word, in her voice over such a pause, was once taken
    for a move, and then for her own voice)."""
    ms = SAMPLE_RATE // 1000
    words = far[:np.flatnonzero(np.abs(far) > 200)[-1] + 1]  # to her last word's end
    hush = (np.random.default_rng(5).standard_normal(300 * ms) * 150).astype(np.int16)
    played = np.concatenate([words, hush, words])
    mic = room(played, 40, 1.0)
    said = slice(len(words) - 100 * ms, len(words) + 250 * ms)
    mic[said] += played[said.start - late_ms * ms:said.stop - late_ms * ms]
    mic += np.random.default_rng(0).standard_normal(len(mic)) * 30
    echo = run_speexdsp(played, mic)
    assert echo.counters.moved == 0
    assert echo.delay_ms is not None and abs(echo.delay_ms - 40) <= 2


@pytest.mark.parametrize("delay_ms", [40, 100])
def test_a_person_talking_over_her_is_not_taken_for_her_echo_moving(far, delay_ms):
    """People of several voices and loudnesses over her reply, her echo path where it was: the
    frames that stand above what is left of her voice are never put down to her echo having moved."""
    users = [voice_clips.espeak_speech("and what about the weather in Berlin tomorrow morning", voice=v, speed=s)
             for v, s in (("en-us", 150), ("en-gb", 180))]
    heard = 0
    for n, user in enumerate(users):
        for gain, start in ((0.25, 3.0), (0.5, 5.0), (1.0, 7.5), (1.0, 5.0)):
            history = PlaybackHistory(seconds=30)
            for i in range(0, len(far), 320):
                history.write(100.0 + i / SAMPLE_RATE, far[i:i + 320], SAMPLE_RATE)
            mic = room(far, delay_ms, 0.5, seed=n)
            begin = int(start * SAMPLE_RATE)
            said = min(len(user), len(mic) - begin)
            mic[begin:begin + said] += user[:said] * gain * 20000 / np.abs(user).max()
            mic += np.random.default_rng(n).standard_normal(len(mic)) * 30
            echo = EchoFilter(SpeexCanceller(), history)
            for i in range(0, len(mic) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
                stamp = 100.0 + (i + FRAME_SAMPLES) / SAMPLE_RATE
                echo.clean(AudioFrame(np.clip(mic[i:i + FRAME_SAMPLES], -32768, 32767).astype(np.int16), stamp))
                if begin <= i < begin + said and echo.recent_levels(1)[1] >= FAR_ACTIVE_RMS:
                    heard += echo.person_over_playback(stamp)
            assert echo.counters.moved == 0, (n, gain, start)
    assert heard > 100  # the person was heard over her voice


def test_when_speexdsp_takes_over_what_it_leaves_of_her_voice_is_measured_anew():
    """AEC3 left nothing of her voice; speexdsp, once it takes over, leaves more: the residual
    measured under AEC3 no longer holds, and until it is measured again nothing over her voice
    passes for the person (a simulated room had her voice pass right after the hand-over)."""
    learner = Scaled(1.0)
    canceller = LearningCanceller(Scaled(0.0), learner)
    history = PlaybackHistory(seconds=60)
    tone = np.full(320, 8000, dtype=np.int16)
    for i in range(0, 40 * SAMPLE_RATE, 320):
        history.write(100.0 + i / SAMPLE_RATE, tone, SAMPLE_RATE)
    echo = EchoFilter(canceller, history, delay_window_seconds=1000.0)  # a tone has no delay to measure
    near = np.full(FRAME_SAMPLES, 8000, dtype=np.int16)
    handed_over = None
    for n in range(300):
        learner.gain = 10 ** (-min(n, 30) / 20)  # speexdsp learns down to -30 dB, then holds
        stamp = 103.0 + n * FRAME
        echo.clean(AudioFrame(near, stamp))
        if canceller.learnt:
            handed_over = n
            break
        assert n < RESIDUAL_MIN_FRAMES or echo.residual_ratio() == 0.0  # AEC3 left nothing
    assert handed_over is not None
    assert echo.residual_ratio() is None and not echo.settled(stamp)
    assert echo.trusted_erle_db == echo.erle_db  # her echo did not move: the ERLE still holds
    for _ in range(RESIDUAL_MIN_FRAMES):
        stamp += FRAME
        echo.clean(AudioFrame(near, stamp))
    assert echo.settled(stamp) and echo.residual_ratio() == pytest.approx(10 ** (-30 / 20), rel=0.01)


@pytest.mark.parametrize("underrun, move_ms, jump_ms", [(True, 0, 0), (True, 8, 0), (False, 0, 40)])
def test_after_a_gap_in_her_voice_nothing_over_it_is_the_person_until_her_echo_is_confirmed(
        far, underrun, move_ms, jump_ms):
    """An underrun while she was silent started the speaker on a new timeline, anchored 8 ms off
    (a CI run: her next reply, uncancelled, passed for the person going on and was dropped) or
    right; or a stalled capture's stamps jumped 40 ms. Two seconds later her next reply begins:
    until her first frames show her echo where the filter learns it (or it is realigned), nothing
    over her voice is the person's."""
    gap = np.zeros(2 * SAMPLE_RATE, dtype=np.int16)
    played = np.concatenate([far, gap, far])
    second = len(far) + len(gap)
    history = PlaybackHistory(seconds=60)
    for i in range(0, len(played), 320):
        late = move_ms / 1000 if i >= second else 0.0  # stamped early: her echo comes later
        history.write(100.0 + i / SAMPLE_RATE - late, played[i:i + 320], SAMPLE_RATE)
    mic = room(played, 60, 0.5) + np.random.default_rng(4).standard_normal(len(played)) * 30
    echo = EchoFilter(SpeexCanceller(), history)
    confirmed_at, in_a_row, most_in_a_row = None, 0, 0
    for i in range(0, len(mic) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        stamp = 100.0 + (i + FRAME_SAMPLES) / SAMPLE_RATE + (jump_ms / 1000 if i >= len(far) + SAMPLE_RATE else 0.0)
        if len(far) <= i < len(far) + FRAME_SAMPLES:
            assert echo.settled(stamp)  # the first reply: learnt
            if underrun:
                history.moved_at = stamp  # the gap's new timeline, settled long before the next reply
        realigned = echo.counters.realigned
        echo.clean(AudioFrame(np.clip(mic[i:i + FRAME_SAMPLES], -32768, 32767).astype(np.int16), stamp))
        if echo.counters.realigned > realigned:  # learnt where her echo no longer is
            assert echo.trusted_erle_db == 0.0
        if i >= second and echo.recent_levels(1)[1] >= FAR_ACTIVE_RMS:
            # her own voice, as the going-on check asks of each frame of speech
            in_a_row = in_a_row + 1 if echo.person_over_playback(stamp) else 0
            most_in_a_row = max(most_in_a_row, in_a_row)
            if confirmed_at is None and echo.settled(stamp):
                confirmed_at = (i - second) // FRAME_SAMPLES
    assert most_in_a_row < 3 and confirmed_at is not None
    assert echo.trusted_erle_db == echo.erle_db  # measured again by her reply's end
    if move_ms or jump_ms:
        assert echo.counters.moved + echo.counters.realigned >= 1
    else:  # no move: confirmed at her first frames, without a realignment
        assert echo.counters.realigned == 0 and 0 < confirmed_at <= 6, confirmed_at


@pytest.mark.parametrize("likeness, clarity, silent, since, hers", [
    (1.0, 300.0, False, 0.0, True),  # her echo through a loopback
    (0.35, 9.0, False, 0.0, True),  # across a reverberant room
    (0.15, 20.0, False, 0.0, True),  # … a plain echo, little alike at any one lag
    (0.1, 8.0, False, 0.0, False),  # like nothing she played: a person alone
    (1.0, 300.0, True, 0.27, False),  # silent through a frame while she spoke: it does not hear her
    (0.5, 90.0, True, 0.9, True),  # … unless her echo is plain since: the silence was a dropout
])
def test_whether_her_voice_could_be_in_the_microphone(likeness, clarity, silent, since, hers):
    assert could_be_her_voice(likeness, clarity, silent, since) is hers


def test_echo_likeness_finds_her_voice_at_any_lag_in_the_range(far):
    near, lead = far[20_000:30_000], 6400
    for lag in (0, 960, 6400):  # what she played, `lead` before `near` on, heard `lag` late
        played = far[20_000 - lead + lag:30_000 + lag]
        assert echo_likeness(played, near, 0, lead)[0] > 0.999, lag
    person = voice_clips.espeak_speech("Stop. Hey Jarvis, stop.", voice="en-gb")[:len(near)]
    assert echo_likeness(far[20_000 - lead:20_000 + len(person)], person, 0, lead)[0] < 0.2


def heard(far_played: np.ndarray, mic: np.ndarray, frames: int) -> bool:
    """Whether her voice could be in the last `frames` frames of `mic`, kept frame by frame as
    the echo filter keeps them while `far_played` plays."""
    history = PlaybackHistory(seconds=60)
    for i in range(0, len(far_played), 320):
        history.write(100.0 + i / SAMPLE_RATE, far_played[i:i + 320], SAMPLE_RATE)
    kept = HeardPlayback(history, 6400)
    for i in range(0, len(mic) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        kept.keep(100.0 + i / SAMPLE_RATE, mic[i:i + FRAME_SAMPLES].astype(np.int16))
    return kept.could_be_her(frames, 0)


@pytest.fixture(scope="module")
def ring() -> np.ndarray:
    """A timer ringing: the chime, then her voice."""
    return voice_clips.concat(chime(SAMPLE_RATE).samples, voice_clips.piper_speech("Your timer for three seconds is done."))


@pytest.mark.parametrize("voice", ["piper", "en-gb", "en-us+f3"])
@pytest.mark.parametrize("at", [0.3, 1.0, 1.8])
@pytest.mark.parametrize("text", ["Stop.", "Hey Jarvis."])
def test_a_phrase_over_her_in_a_microphone_that_does_not_hear_her_is_not_hers(ring, voice, at, text):
    """A headset: "Stop." or "Hey Jarvis." over a ringing timer, from its first frames (nothing
    measured yet), and the frames spoken over plus three before (what the "stop" reader checks)."""
    person = voice_clips.piper_speech(text) if voice == "piper" else voice_clips.espeak_speech(text, voice=voice)
    begin = int(at * SAMPLE_RATE)
    mic = np.zeros(begin + len(person) + FRAME_SAMPLES)
    mic[begin:begin + len(person)] = person
    mic += np.random.default_rng(1).standard_normal(len(mic)) * 30
    frames = len(person) // FRAME_SAMPLES + 4
    assert not heard(ring, mic[:len(ring)], frames)


@pytest.mark.parametrize("path", ["loopback", "room"])
@pytest.mark.parametrize("frames", [1, 2, 4])
def test_her_own_voice_after_a_dropout_of_the_microphone_could_still_be_hers(path, frames):
    """A stall of the sound server leaves the microphone silent for a few frames while she speaks:
    her own wake phrase, heard plainly in it a little later, is still hers."""
    reply = voice_clips.piper_speech("Hey Jarvis, you might say, and I would answer. Jarvis is a name from the "
                                     "stories. Hey Jarvis, what is the weather?")
    echo = np.concatenate([np.zeros(960), reply[:-960]]) * 0.5 if path == "loopback" else room(reply, 60, 0.5)
    echo += np.random.default_rng(1).standard_normal(len(echo)) * 30
    for gap in range(8, len(reply) // FRAME_SAMPLES - 20, 2):
        mic = echo.copy()
        mic[gap * FRAME_SAMPLES:(gap + frames) * FRAME_SAMPLES] = np.random.default_rng(2).standard_normal(
            frames * FRAME_SAMPLES) * 30
        for after in (8, 12, 16):  # frames since it: PLAIN_ECHO_FRAMES and more
            assert heard(reply, mic[:(gap + frames + after) * FRAME_SAMPLES], WAKE_WINDOW_FRAMES), (gap, after)


@pytest.mark.parametrize("path", ["loopback", "room"])
@pytest.mark.parametrize("at", [0.3, 1.0, 1.8])
def test_her_own_voice_in_the_microphone_could_be_hers_with_or_without_a_person_over_it(ring, path, at):
    """Through a loopback, or a room: her echo alone, or a person over it (then it is the level of
    what stands above her echo that says whose it is)."""
    echo = (np.concatenate([np.zeros(960), ring[:-960]]) * 0.5 if path == "loopback" else room(ring, 60, 0.5))
    person = voice_clips.espeak_speech("Stop.", voice="en-gb")
    begin = int(at * SAMPLE_RATE)
    frames = len(person) // FRAME_SAMPLES + 4
    end = begin + len(person) + FRAME_SAMPLES
    over = echo.copy()
    over[begin:begin + len(person)] += person
    assert heard(ring, echo[:end], frames)
    assert heard(ring, over[:end], frames)


@pytest.mark.parametrize("delay_ms", [60, 120, 160])
def test_a_microphone_that_hears_her_late_hears_her_all_through_her_replies(delay_ms):
    """Her echo 120 ms late: the first frame of each of her words is then silent against its own
    reference, and a tenth of her frames seemed not heard at all, so her own "Hey Jarvis" passed
    for the person's. Once her voice fills the wake phrase's window, it could always be hers."""
    reply = voice_clips.piper_speech("Hey Jarvis, you might say, and I would answer. Jarvis is a name from the "
                                     "stories. Hey Jarvis, what is the weather?")
    gap = np.zeros(SAMPLE_RATE, dtype=np.int16)
    played = np.concatenate([reply, gap] * 3)
    history = PlaybackHistory(seconds=60)
    for i in range(0, len(played), 320):
        history.write(100.0 + i / SAMPLE_RATE, played[i:i + 320], SAMPLE_RATE)
    lag = delay_ms * SAMPLE_RATE // 1000
    mic = np.concatenate([np.zeros(lag), played[:-lag]]) * 0.5
    mic += np.random.default_rng(1).standard_normal(len(mic)) * 30
    echo = EchoFilter(SpeexCanceller(), history)
    filled = WAKE_WINDOW_FRAMES * FRAME_SAMPLES
    not_hers = []
    for i in range(0, len(mic) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        echo.clean(AudioFrame(mic[i:i + FRAME_SAMPLES].astype(np.int16), 100.0 + (i + FRAME_SAMPLES) / SAMPLE_RATE))
        if i % (len(reply) + len(gap)) >= filled and i % (len(reply) + len(gap)) < len(reply) \
                and not echo.could_be_her(WAKE_WINDOW_FRAMES):
            not_hers.append(i // FRAME_SAMPLES)
    assert echo.delay_ms == pytest.approx(delay_ms, abs=2)
    assert not_hers == []


def over_her_in_a_row(echo: EchoFilter, mic: np.ndarray, begin: int = 0) -> int:
    """The most frames in a row the going-on watch would take for the person over her voice, in
    `mic` from sample `begin` on."""
    in_a_row, most = 0, 0
    for i in range(begin, len(mic) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        stamp = 100.0 + (i + FRAME_SAMPLES) / SAMPLE_RATE
        echo.clean(AudioFrame(np.clip(mic[i:i + FRAME_SAMPLES], -32768, 32767).astype(np.int16), stamp))
        person = echo.person_over_playback(stamp) and echo.recent_levels(1)[1] >= FAR_ACTIVE_RMS
        in_a_row = in_a_row + 1 if person else 0
        most = max(most, in_a_row)
    return most


def two_replies(far: np.ndarray) -> tuple[PlaybackHistory, np.ndarray, int]:
    """Her reply played twice, two seconds apart: the history, all she played, where the second starts."""
    played = np.concatenate([far, np.zeros(2 * SAMPLE_RATE, dtype=np.int16), far])
    history = PlaybackHistory(seconds=60)
    for i in range(0, len(played), 320):
        history.write(100.0 + i / SAMPLE_RATE, played[i:i + 320], SAMPLE_RATE)
    return history, played, len(played) - len(far)


def late(samples: np.ndarray, lag: int) -> np.ndarray:
    """Through a loopback `lag` samples late at half volume, with a little noise."""
    return np.concatenate([np.zeros(lag), samples[:len(samples) - lag].astype(float)]) * 0.5


@pytest.mark.parametrize("moved", [2, 8, 16, 31])
def test_her_echo_path_moved_by_a_few_samples_is_not_taken_for_the_person(far, moved):
    """Her echo 0.1-2 ms later in her next reply (after an underrun): too little to realign for,
    but enough that the learnt filter leaves her voice as loud as the microphone hears it, and
    the going-on watch took it for the person going on. What is left is like her voice: the filter
    follows her echo to where it is now."""
    history, played, second = two_replies(far)
    mic = np.concatenate([late(played, 960)[:second], late(played, 960 + moved)[second:]])
    mic += np.random.default_rng(3).standard_normal(len(mic)) * 30
    echo = EchoFilter(SpeexCanceller(), history)
    assert over_her_in_a_row(echo, mic) < 3
    assert echo.residual_ratio() is not None and echo.residual_ratio() < 0.05  # cancelling again


def test_her_voice_uncancelled_before_its_delay_is_measured_is_judged(far):
    """Her first frames, louder in the microphone than what she played and not cancelled at all,
    before the once-a-second measure has found her echo's delay: nothing learnt to lose yet (a
    CI run's daemon stopped listening on an error here)."""
    history = PlaybackHistory(seconds=30)
    for i in range(0, len(far), 320):
        history.write(100.0 + i / SAMPLE_RATE, far[i:i + 320], SAMPLE_RATE)
    echo = EchoFilter(Scaled(1.0), history)
    mic = np.clip(far.astype(float) * 5, -32768, 32767)
    for i in range(0, 12 * FRAME_SAMPLES, FRAME_SAMPLES):
        stamp = 100.0 + (i + FRAME_SAMPLES) / SAMPLE_RATE
        echo.clean(AudioFrame(mic[i:i + FRAME_SAMPLES].astype(np.int16), stamp))
        echo.person_over_playback(stamp)
    assert echo.delay_ms is None
