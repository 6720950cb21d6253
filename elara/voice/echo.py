"""Echo cancellation: Elara's own voice taken out of the microphone, with what she played as the
far-end reference.

The speaker records every block it plays by when it is heard (`PlaybackHistory`); for each
80 ms microphone frame, `EchoFilter` reads back what was playing while that frame was captured
and hands both to the canceller. Two cancellers sit behind one Protocol (`Audio.EchoCanceller`):
speexdsp's MDF filter with its residual-echo suppressor (`speex`, the default), through ctypes on
Debian's libspeexdsp1, and WebRTC's AEC3 (`webrtc`, pywebrtc-audio). Measured by
`bench/echo.py`: both take her echo down by 25–50 dB, but AEC3 also crushes a person
talking over her (7 of 36 "stop"s heard through it, against 29 of 36 through speexdsp), and
hearing the person over her is what echo cancellation is for here.

An adaptive filter learns the echo at one delay behind its reference, but the time stamps that
line the two up move by ten or twenty milliseconds each time the output stream opens. So the
echo's delay is measured as she speaks (GCC-PHAT, `estimate_delay`, every second of her voice),
and the reference is shifted to keep the echo at the delay the filter learnt it at (within
`TARGET_LAG_SECONDS`); the microphone's frames, stamped by jittery callbacks, are read as one
continuous stream. The delay is shown in `elara status`. Frames captured while nothing has
played for `tail_seconds` pass through untouched.

`is_barge_in` is the pure decision whether a wake word (or a "stop") heard while Elara speaks is
the user: the cleaned microphone must be louder than what could be left of her own voice — unless
her own voice can't be in the microphone at all (`could_be_her_voice`: it was silent while she
spoke, or what it heard is not like what she played at any lag in the echo's delay range), as in a
headset, where it is the user's from the first frame after start-up.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import logging
import math
import threading
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

from elara.audio.frames import SAMPLE_RATE, AudioFrame
from elara.audio.reference import PlaybackHistory, estimate_delay

log = logging.getLogger(__name__)

#: how much longer than the filter's tail nothing must have played for `EchoFilter.passes`: the
#: microphone's stamps may stray from where the reference is read by tens of milliseconds
PASS_MARGIN_SECONDS = 0.5
#: far-end level (RMS of int16) below which a frame counts as Elara being silent
FAR_ACTIVE_RMS = 100.0
#: the delay behind its reference the filter is kept learning the echo at (the first one measured,
#: held inside these bounds so it stays inside the filter and never goes negative)
TARGET_LAG_SECONDS = (0.02, 0.12)
#: a change of the measured delay smaller than this is noise, not a new alignment
REALIGN_SECONDS = 0.002
#: how far a frame's stamp may stray from where the reference goes on before it is followed
RESYNC_SECONDS = 0.03
#: how long after the speaker moved its timeline (a gap heard in her voice) her echo may be
#: uncancelled: the reference slipped under the filter, and it measures and relearns over seconds
TIMELINE_SETTLE_SECONDS = 2.0
#: how far the cleaned microphone must rise above the echo left after cancellation, in dB, for a
#: wake word heard while she speaks to count as the user's
BARGE_IN_MARGIN_DB = 6.0
#: the same for a frame to count as someone speaking over her (the start of a possible "stop"):
#: what is left of her voice comes and goes around its average, so a frame needs more
SPEECH_OVER_PLAYBACK_MARGIN_DB = 12.0


#: her latest frames lined up against what she played when a frame stands above what cancelling
#: leaves of her voice (`EchoFilter.moved`): few enough to see a move of her echo path at once,
#: before the once-a-second measure does, and at least `MOVED_MIN_FRAMES` of them
MOVED_FRAMES = 4
MOVED_MIN_FRAMES = 3
#: how far from where the filter learns it that look must find her echo to count as moved: as far
#: as the reference is realigned for. A live loopback moved 3 ms between replies, which undid
#: speexdsp's cancelling and, at 4 ms, passed for the person going on at every such move
#: (`bench/echo.py --moving-path --move-echo-ms 3`); a room's reflections a millisecond or
#: two from the direct sound are kept from passing for a move by the likeness below
MOVED_SECONDS = REALIGN_SECONDS
#: how clearly: `estimate_delay`'s peak over the rest (the once-a-second measure asks 5 of a
#: second; a person talking over her blurs it, so a move is only believed where it is plain). 10
#: kept people over her in a reverberant room (8.3, 8.5) from passing for a move, but missed her
#: first frames after live moves: 7 of 38 replies taken for the person going on, against 0 of 39
MOVED_CLARITY = 8.0
#: … and the microphone must be more like her voice at the new delay than at the old, by this much
#: (a person talking over her in a short window puts GCC-PHAT's peak anywhere, mostly where it
#: found nothing alike)
MOVED_LIKENESS = 2.0
#: … and at least this much (people over her measured at most 0.07 in a reverberant room, her
#: moved echo there 0.2–0.55, and 1.0 through a loopback: `bench/echo.py --moving-path`)
MOVED_MIN_LIKENESS = 0.15
#: … over her latest frames alone (a move in the window's middle leaves its start alike at the old)
MOVED_LIKENESS_FRAMES = 2
#: … where she played at least this share (RMS) at the learnt delay of what she played at the new:
#: her echo missing where she played next to nothing says nothing. A person's "Hey Jarvis" in her
#: own voice, said into the hush between two of her sentences, was 0.16 alike 115 ms late and 0.00
#: where the filter learns her echo: taken for a move, her echo then went uncancelled and the wake
#: word over it was judged hers (the serial echo test, about 1 run in 10)
MOVED_PLAYED_SHARE = 0.5
#: … and by no more than this: a stall re-times her echo by 3–93 ms (seen live), while a voice like
#: hers over her reply once looked like her echo 332 ms late (the soak: her echo then went
#: uncancelled and the wake word over it was judged hers). A larger move waits for the
#: once-a-second measure, which a few words over her don't sway.
MOVED_MAX_SECONDS = 0.15


#: whether her own voice can be in a stretch of the microphone (`could_be_her_voice`): it is as
#: much like what she played, at its best lag in the echo's delay range, as this (normalized
#: correlation; her echo alone measured 1.0 through a loopback, 0.6-0.9 across a simulated room,
#: 0.2-0.85 in a very reverberant one, and a person alone over her at most 0.27, mostly under 0.13)
HEARD_LIKENESS = 0.2
#: … or her echo is this plain in it (`estimate_delay`'s clarity: her echo alone 15 and more, a
#: person alone over her mostly under 9, at most 19)
HEARD_CLARITY = 12.0
#: the microphone frames kept, before cancelling, to tell whether it hears her (≈2.5 s)
HEARD_FRAMES = 32
#: her echo this alike in the frames kept since the microphone was silent while she spoke says it
#: hears her after all: a stall of the sound server, or a dropout of the microphone, left that
#: silence (over 8 frames or more after a dropout of 1-4 frames, her echo alone measured 0.64 and
#: up across a simulated room, 0.99 through a loopback; a person alone over her at most 0.27, see
#: above)
PLAIN_ECHO_LIKENESS = 0.5
#: … over at least this many frames (fewer, a pause in her words may be most of them)
PLAIN_ECHO_FRAMES = 8


#: what cancelling left in her latest frames (`MOVED_LIKENESS_FRAMES`), where it stands above what
#: it leaves of her voice, says the filter has lost her echo if this much like what she played
#: (`echo_likeness` of their sample-to-sample changes). With speexdsp learnt on Piper's voice
#: through a loopback, her echo path moved by 2-32 samples between replies (under a realignment's
#: `REALIGN_SECONDS`) left 0.56-0.88 alike a frame, as loud as the microphone heard her, and was
#: taken for the person going on over her; a person over her first frames left 0.08-0.17, but in
#: a reverberant room up to 0.67 (what is left of her echo under them), so the filter then follows
#: only a move her latest frames show plainly (`_realign_if_nudged`)
LEFT_LIKENESS = 0.4


#: far-active frames over which what cancelling leaves of her voice is measured (≈5 s of her voice)
RESIDUAL_FRAMES = 64
#: … and how many it takes before the measure is trusted over the ERLE's worst case
RESIDUAL_MIN_FRAMES = 25


class Canceller(Protocol):
    """An acoustic echo canceller on 16 kHz mono int16 audio."""

    stream_delay_ms: int

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        """The microphone audio `near` without the echo of `far` (same length)."""

    def reset(self) -> None:
        """Forget the room (a new device)."""


#: `Audio.EchoCanceller` values, and what each needs installed (scripts/setup installs both)
CANCELLER_NEEDS = {"speex": "Debian's libspeexdsp1", "webrtc": "pywebrtc-audio==0.2.0"}
CANCELLERS = tuple(CANCELLER_NEEDS)
#: speexdsp's filter counts as having learnt the room once it takes at least this much of her echo
#: away and has stopped getting better: by less than `SETTLED_DB` over `SETTLE_FRAMES` frames of
#: her voice (switched over sooner, what is left of her voice is loud enough for Whisper to hear)
LEARNT_ERLE_DB = 20.0
SETTLED_DB = 1.5
SETTLE_FRAMES = 25
#: … or, stopped getting better, leaves this little of her voice (dB under her own level, the median
#: over those frames): a microphone that hardly hears her at all has no echo for AEC3 to take, and
#: AEC3 would take most of a person talking over her (a thinking pause's last words, gone on over
#: her reply, lost: 7 to 20 dB of them, and Whisper heard none)
UNHEARD_PLAYBACK_DB = -30.0


def make_canceller(kind: str = "speex") -> Canceller:
    """The canceller `Audio.EchoCanceller` names; ImportError or OSError when it can't load.
    "speex" starts on WebRTC's AEC3 while it learns the room, when pywebrtc-audio is there."""
    if kind == "speex":
        speex = SpeexCanceller()
        try:
            return LearningCanceller(webrtc_canceller(), speex)
        except (ImportError, OSError) as exc:
            log.info("echo cancellation: speexdsp alone (WebRTC's AEC3 for its first seconds did not "
                     "load: %s)", exc)
            return speex
    if kind == "webrtc":
        return webrtc_canceller()
    raise ValueError(f"Audio.EchoCanceller: unknown canceller {kind!r} ({' or '.join(CANCELLERS)})")


class LearningCanceller:
    """speexdsp's canceller, with WebRTC's AEC3 standing in while it learns the room.

    AEC3 takes her echo away within half a second but also most of a person talking over her;
    speexdsp's adaptive filter lets the person through but needs several seconds of her voice to
    learn the room. Both run on every frame; the output is AEC3's until speexdsp has
    taken `LEARNT_ERLE_DB` away over a stretch of her voice (or leaves less than `UNHEARD_PLAYBACK_DB` of
    it: a microphone that hardly hears her) and stopped getting better, and speexdsp's from then on
    (again AEC3's after `reset`, a new device)."""

    def __init__(self, first: Canceller, learner: Canceller) -> None:
        self.first, self.learner = first, learner
        self.learnt = False
        self._erle_db = 0.0
        self._frames = 0
        self._stream_delay_ms = 0
        self._last_erle_db = 0.0  # at the last look, SETTLE_FRAMES frames of her voice ago
        #: what speexdsp left of her voice per unit of her level, over her last frames
        self._left: collections.deque[float] = collections.deque(maxlen=SETTLE_FRAMES)

    @property
    def stream_delay_ms(self) -> int:
        """The echo's delay behind the reference, as the EchoFilter keeps it (a hint to AEC3)."""
        return self._stream_delay_ms

    @stream_delay_ms.setter
    def stream_delay_ms(self, value: int) -> None:
        self._stream_delay_ms = self.first.stream_delay_ms = self.learner.stream_delay_ms = value

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        """AEC3's output until speexdsp has learnt the room, then speexdsp's."""
        learnt = self.learner.process(near, far)
        if self.learnt:
            return learnt
        quick = self.first.process(near, far)
        far_rms = _rms(far)
        if far_rms >= FAR_ACTIVE_RMS:
            left_rms = _rms(learnt)
            erle = 10 * math.log10((_rms(near) ** 2 + 1) / (left_rms ** 2 + 1))
            self._erle_db += 0.1 * (erle - self._erle_db)  # ≈ 0.8 s of her voice
            self._left.append(left_rms / far_rms)
            self._frames += 1
            if self._frames % SETTLE_FRAMES == 0:
                left_db = 20 * math.log10(float(np.median(self._left)) + 1e-6)
                log.debug("echo cancellation: speexdsp learning, %.1f dB (%.0f dB of her voice left)",
                          self._erle_db, left_db)
                if (self._erle_db >= LEARNT_ERLE_DB or left_db <= UNHEARD_PLAYBACK_DB) \
                        and self._erle_db - self._last_erle_db < SETTLED_DB:
                    self.learnt = True
                    log.info("echo cancellation: speexdsp has learnt the room (%.0f dB taken away, "
                             "%.0f dB of her voice left)", self._erle_db, left_db)
                self._last_erle_db = self._erle_db
        return quick

    def reset(self) -> None:
        """Forget the room: AEC3 again until speexdsp has relearnt it."""
        self.first.reset()
        self.learner.reset()
        self.learnt, self._erle_db, self._last_erle_db = False, 0.0, 0.0
        self._left.clear()


def webrtc_canceller(stream_delay_ms: int = 0) -> Canceller:
    """WebRTC's AEC3 (with its high-pass filter), from pywebrtc-audio."""
    from pywebrtc_audio import AudioProcessor

    return AudioProcessor(sample_rate=SAMPLE_RATE, num_channels=1, echo_cancellation=True,
                          stream_delay_ms=stream_delay_ms)


class SpeexCanceller:
    """speexdsp's echo canceller (the MDF adaptive filter) and its residual-echo suppressor, on
    10 ms steps, through ctypes on libspeexdsp (Debian's libspeexdsp1, which PulseAudio needs too).

    The filter covers `tail_ms` of echo after the reference's delay (the EchoFilter keeps that
    delay steady). Not thread-safe (the EchoFilter locks it)."""

    STEP = 160  # 10 ms at 16 kHz
    _ECHO_SET_SAMPLING_RATE = 24  # speex_echo.h
    _PREPROCESS_SET_DENOISE = 0  # speex_preprocess.h
    _PREPROCESS_SET_ECHO_STATE = 24

    def __init__(self, tail_ms: int = 200) -> None:
        name = ctypes.util.find_library("speexdsp") or "libspeexdsp.so.1"
        lib = ctypes.CDLL(name)  # OSError when missing: the caller falls back and says so
        lib.speex_echo_state_init.restype = ctypes.c_void_p
        lib.speex_echo_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.speex_preprocess_state_init.restype = ctypes.c_void_p
        lib.speex_preprocess_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
        samples = ctypes.POINTER(ctypes.c_int16)
        lib.speex_echo_cancellation.argtypes = [ctypes.c_void_p, samples, samples, samples]
        lib.speex_echo_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.speex_preprocess_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.speex_preprocess_run.argtypes = [ctypes.c_void_p, samples]
        lib.speex_echo_state_reset.argtypes = [ctypes.c_void_p]
        for f in (lib.speex_echo_state_destroy, lib.speex_preprocess_state_destroy):
            f.argtypes = [ctypes.c_void_p]
        self._lib = lib
        self._tail = tail_ms * SAMPLE_RATE // 1000
        self._echo = lib.speex_echo_state_init(self.STEP, self._tail)
        rate = ctypes.c_int(SAMPLE_RATE)
        lib.speex_echo_ctl(self._echo, self._ECHO_SET_SAMPLING_RATE, ctypes.byref(rate))
        self._suppressor = lib.speex_preprocess_state_init(self.STEP, SAMPLE_RATE)
        off = ctypes.c_int(0)  # echo suppression only: noise is Whisper's and the VAD's business
        lib.speex_preprocess_ctl(self._suppressor, self._PREPROCESS_SET_DENOISE, ctypes.byref(off))
        lib.speex_preprocess_ctl(self._suppressor, self._PREPROCESS_SET_ECHO_STATE, self._echo)
        self.stream_delay_ms = 0  # unused: the filter finds the delay within its tail itself
        self._near_rest = np.zeros(0, dtype=np.int16)  # less than a step, to the next call
        self._far_rest = np.zeros(0, dtype=np.int16)

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        """The microphone audio `near` without the echo of `far` (same length)."""
        near_all = np.concatenate([self._near_rest, np.asarray(near, dtype=np.int16)])
        far_all = np.concatenate([self._far_rest, np.asarray(far, dtype=np.int16)])
        steps = len(near_all) // self.STEP
        out = np.empty(steps * self.STEP, dtype=np.int16)
        pointer = ctypes.POINTER(ctypes.c_int16)
        for i in range(steps):
            n = np.ascontiguousarray(near_all[i * self.STEP:(i + 1) * self.STEP])
            f = np.ascontiguousarray(far_all[i * self.STEP:(i + 1) * self.STEP])
            o = out[i * self.STEP:(i + 1) * self.STEP]
            self._lib.speex_echo_cancellation(self._echo, n.ctypes.data_as(pointer),
                                              f.ctypes.data_as(pointer), o.ctypes.data_as(pointer))
            self._lib.speex_preprocess_run(self._suppressor, o.ctypes.data_as(pointer))
        self._near_rest = near_all[steps * self.STEP:]
        self._far_rest = far_all[steps * self.STEP:]
        # 80 ms frames are whole steps, so nothing is held over in practice; keep lengths equal.
        return np.concatenate([np.zeros(len(near) - len(out), dtype=np.int16), out])[-len(near):]

    def reset(self) -> None:
        """Forget the room (a new device)."""
        self._lib.speex_echo_state_reset(self._echo)
        self._near_rest = self._far_rest = np.zeros(0, dtype=np.int16)

    def close(self) -> None:
        """Free the C state."""
        if self._echo:
            self._lib.speex_echo_state_destroy(self._echo)
            self._lib.speex_preprocess_state_destroy(self._suppressor)
            self._echo = self._suppressor = None

    def __del__(self) -> None:
        self.close()


def is_barge_in(near_rms: float, far_rms: float, erle_db: float,
                margin_db: float = BARGE_IN_MARGIN_DB) -> bool:
    """Is a wake word heard while Elara spoke the user's? Yes when the cleaned microphone level
    `near_rms` stands `margin_db` above the echo cancellation can leave of the far end
    (`far_rms` lowered by the measured ERLE); always when she was silent."""
    if far_rms < FAR_ACTIVE_RMS:
        return True
    residual = far_rms * 10 ** (-max(erle_db, 0.0) / 20)
    return near_rms > residual * 10 ** (margin_db / 20)


def is_speech_over_playback(near_rms: float, far_rms: float, erle_db: float, residual_ratio: float | None,
                            margin_db: float = SPEECH_OVER_PLAYBACK_MARGIN_DB) -> bool:
    """Is a frame of speech while she talks the person's? Yes when the cleaned level `near_rms`
    stands `margin_db` above what cancelling has lately left of her voice (`residual_ratio`: the
    cleaned level per unit of far-end level, measured); until that is measured, `is_barge_in`'s
    worst case (her echo as loud as the far end, lowered by the ERLE)."""
    if residual_ratio is None:
        return is_barge_in(near_rms, far_rms, erle_db, margin_db)
    if far_rms < FAR_ACTIVE_RMS:
        return True
    return near_rms > max(far_rms * residual_ratio, 1.0) * 10 ** (margin_db / 20)


class _HeardEcho(NamedTuple):
    """Her latest frames (`near`, after `max_lag` zeros) against what she played (`far`), and
    where her echo is in them: `lag` behind the reference, found with `clarity`."""

    far: np.ndarray
    near: np.ndarray
    lag: int
    clarity: float


def could_be_her_voice(likeness: float, clarity: float, silent_while_she_spoke: bool,
                       likeness_since: float = 0.0) -> bool:
    """Could her own voice be what the microphone heard over a stretch? Not if it stayed silent
    through a frame while she spoke (all through the echo's delay range before it), unless what it
    heard since is plainly her echo (`likeness_since`): else it does not hear her at all (a
    headset). Nor if what it heard is not like what she played (`likeness`, normalized correlation
    at its best lag) and shows no plain echo of it (`clarity`)."""
    if silent_while_she_spoke:
        return likeness_since >= PLAIN_ECHO_LIKENESS
    return likeness >= HEARD_LIKENESS or clarity >= HEARD_CLARITY


def echo_likeness(far: np.ndarray, near: np.ndarray, min_lag: int, max_lag: int) -> tuple[float, float]:
    """How much `near` is `far` some lag late (`min_lag` … `max_lag` samples; `far` starts
    `max_lag` samples before `near` and runs on `-min_lag` after it): the largest normalized
    correlation over those lags, and how plain an echo GCC-PHAT finds (its peak over the mean of
    the rest, as `estimate_delay` measures it). Each without its mean: an offset is no echo."""
    near = near.astype(np.float64)
    far = far.astype(np.float64)
    near -= near.mean() if len(near) else 0.0
    far -= far.mean() if len(far) else 0.0
    count = len(near)
    size = 1 << (len(far) + count - 1).bit_length()
    spectrum = np.fft.rfft(far, size) * np.conj(np.fft.rfft(near, size))
    offsets = max_lag - np.arange(min_lag, max_lag + 1)  # where in `far` each lag's match starts
    if not len(offsets):
        return 0.0, 0.0
    correlation = np.fft.irfft(spectrum, size)[offsets]
    energy = np.concatenate([[0.0], np.cumsum(far * far)])
    far_energy = energy[np.minimum(offsets + count, len(far))] - energy[offsets]
    alike = np.abs(correlation) / np.sqrt(float(np.dot(near, near)) * far_energy + 1e-9)
    magnitude = np.abs(spectrum)
    phat = np.fft.irfft(spectrum / np.where(magnitude > 1e-9, magnitude, 1.0), size)[offsets]
    best = int(np.argmax(phat))
    rest = np.delete(np.abs(phat), best)
    clarity = float(phat[best] / (rest.mean() + 1e-12)) if len(rest) else 0.0
    return float(alike.max()), clarity


class HeardPlayback:
    """The microphone's latest frames before cancelling, each with where its reference starts in
    what she played: whether her own voice can be in them, from the first frame after start-up
    (a microphone that does not hear the speaker is only known so after seconds of her voice)."""

    def __init__(self, history: PlaybackHistory, max_lag: int) -> None:
        self.history = history
        self.max_lag = max_lag
        self._frames: collections.deque[tuple[float, np.ndarray]] = collections.deque(maxlen=HEARD_FRAMES)
        self._lock = threading.Lock()  # kept from the cleaning thread, read from the event loop's
        #: the last answer, by what it was asked over (the "stop" spotter and the wake gate may
        #: both ask of one frame, and each look costs milliseconds)
        self._answered: tuple[tuple[float, int, int], bool] | None = None

    def keep(self, start: float, near: np.ndarray) -> None:
        """One more frame as the microphone heard it, its reference starting at `start`."""
        with self._lock:
            self._frames.append((start, near))

    def clear(self) -> None:
        """Forget the frames (a new microphone, or its stamps jumped)."""
        with self._lock:
            self._frames.clear()
            self._answered = None

    def could_be_her(self, frames: int, min_lag: int) -> bool:
        """Could her own voice be in the microphone over its last `frames` frames (her echo at
        `min_lag` … `max_lag` samples behind the reference)? See `could_be_her_voice`."""
        with self._lock:
            kept = list(self._frames)
        window = kept[-frames:]
        if not window:
            return True
        asked = (window[-1][0], len(window), min_lag)
        if self._answered is not None and self._answered[0] == asked:
            return self._answered[1]
        answer = self._could_be_her(kept, window, min_lag)
        self._answered = (asked, answer)
        return answer

    def _could_be_her(self, kept: list[tuple[float, np.ndarray]], window: list[tuple[float, np.ndarray]],
                      min_lag: int) -> bool:
        far, near = self.played_and_heard(window, min_lag)
        if _rms(far) < FAR_ACTIVE_RMS:
            return False  # she was silent all through: her echo can't be there
        silent = self._last_silent_while_she_spoke(kept, min_lag)
        if silent is None:
            return could_be_her_voice(*echo_likeness(far, near, min_lag, self.max_lag), False)
        since = kept[silent + 1:]
        likeness = 0.0
        if len(since) >= PLAIN_ECHO_FRAMES:
            likeness = echo_likeness(*self.played_and_heard(since, min_lag), min_lag, self.max_lag)[0]
        answer = could_be_her_voice(0.0, 0.0, True, likeness)
        log.debug("the microphone was silent while she spoke %d frames ago; %.2f like her since: %s",
                  len(since), likeness, "a dropout" if answer else "it does not hear her")
        return answer

    def played_and_heard(self, frames: list[tuple[float, np.ndarray]], min_lag: int) -> tuple[np.ndarray, np.ndarray]:
        """What she played over `frames` (from `max_lag` before them to `min_lag` after), and the
        frames as heard, joined: `echo_likeness`'s two."""
        near = np.concatenate([n for _, n in frames])
        return self.history.read(frames[0][0] - self.max_lag / SAMPLE_RATE,
                                 self.max_lag + len(near) - min(min_lag, 0)), near

    def _last_silent_while_she_spoke(self, kept: list[tuple[float, np.ndarray]], min_lag: int) -> int | None:
        """The last of its kept frames the microphone was silent through, under
        `UNHEARD_PLAYBACK_DB` of her level, while she spoke all through the echo's delay range
        before it (its quietest 80 ms there), if any: her echo, at any delay in the range, would
        have been heard."""
        count = len(kept[0][1])
        if any(len(near) != count for _, near in kept):
            return None
        # what she played, a frame at a time, from the echo's longest delay before the first
        # frame kept to its shortest after the last (the frames follow on: `clean` clears them
        # where its reference does not)
        before = -(-self.max_lag // count)
        after = -(-max(-min_lag, 0) // count)
        far = self.history.read(kept[0][0] - before * count / SAMPLE_RATE, (before + len(kept) + after) * count)
        levels = np.sqrt(np.mean(np.square(far.reshape(-1, count).astype(np.float64)), axis=1))
        span = before + 1 + after  # the far frames each microphone frame's echo may come from
        least = np.lib.stride_tricks.sliding_window_view(levels, span).min(axis=1)[:len(kept)]
        heard = np.array([_rms(near) for _, near in kept])
        silent = np.flatnonzero((least >= FAR_ACTIVE_RMS) & (heard < least * 10 ** (UNHEARD_PLAYBACK_DB / 20)))
        return int(silent[-1]) if len(silent) else None


@dataclass
class EchoCounters:
    """What the echo filter has done (for `elara status`)."""

    processed: int = 0  # frames that went through the canceller
    passed: int = 0  # frames passed through (nothing played lately)
    resyncs: int = 0  # the reference put back on the frames' stamps
    realigned: int = 0  # the reference shifted to keep the echo where the filter learnt it
    moved: int = 0  # … of those, at once: her echo path seen to have moved under the filter


class EchoFilter:
    """Takes Elara's own voice out of each microphone frame (one instance per microphone)."""

    def __init__(self, canceller: Canceller, history: PlaybackHistory, *,
                 input_latency: float = 0.0, tail_seconds: float = 1.0,
                 delay_window_seconds: float = 1.0, max_delay_seconds: float = 0.4) -> None:
        self.canceller = canceller
        self.history = history
        self.input_latency = input_latency
        self.tail_seconds = tail_seconds
        self.counters = EchoCounters()
        #: echo return loss enhancement: how much quieter the echo got, in dB (smoothed)
        self.erle_db = 0.0
        #: the echo's delay behind the reference, measured (ms), or None before any echo
        self.delay_ms: float | None = None
        self._lock = threading.Lock()  # the canceller is not thread-safe
        self._max_lag = round(max_delay_seconds * SAMPLE_RATE)
        #: the microphone's latest frames before cancelling, for `could_be_her`
        self.heard = HeardPlayback(history, self._max_lag)
        self._window = round(delay_window_seconds * SAMPLE_RATE)
        self._far: collections.deque[np.ndarray] = collections.deque()
        self._near: collections.deque[np.ndarray] = collections.deque()
        self._collected = 0
        #: her latest frames through the canceller (where their reference starts, the microphone,
        #: what cancelling left), for `moved` and `_left_is_hers`
        self._recent: collections.deque[tuple[float, np.ndarray, np.ndarray]] = collections.deque(maxlen=MOVED_FRAMES)
        #: per recent frame: cleaned level and far-end level (RMS), for `recent_levels`
        self._levels: collections.deque[tuple[float, float]] = collections.deque(maxlen=25)
        #: cleaned level / far-end level of recent frames she spoke in, for `residual_ratio`
        self._residuals: collections.deque[float] = collections.deque(maxlen=RESIDUAL_FRAMES)
        #: microphone level (before cancelling) / the level of what her echo in it comes from, over
        #: recent frames she spoke in: how loud the microphone hears her (`_hears_playback`)
        self._heard: collections.deque[float] = collections.deque(maxlen=RESIDUAL_FRAMES)
        # Set when the reference is realigned (the echo path moved): what cancelling left of her
        # voice before no longer holds, and until it is measured again it may be as loud as a person.
        self._remeasuring = False
        self._realigned_unmeasured = False  # … and the reason was a realignment
        #: whether a `LearningCanceller` had handed over to speexdsp at the last frame
        self._switched = False
        # Cleared when the speaker's timeline moves (a gap in her voice, an underrun) after the
        # echo was learnt: her echo may then come milliseconds from where the filter learns it,
        # uncancelled and as loud as a person, and nothing is known of it until she speaks again.
        # Set once her voice shows her echo where the filter learns it (or it is realigned).
        self._confirmed = True
        self._timeline = history.moved_at  # the speaker's last timeline move, as last seen
        self._mic_rms = 0.0  # the last frame's level before cancelling, for the log
        self._cursor: float | None = None  # where the last frame's reference started
        self._shift = 0.0  # seconds the reference is read behind the frame's stamps
        self._target: float | None = None  # the delay behind its reference the filter learns at

    def passes(self, frame: AudioFrame) -> bool:
        """Will `clean` give `frame` back as it is, nothing having played for `tail_seconds` (and
        `PASS_MARGIN_SECONDS` more) before it? Then cleaning it is cheap enough for the event loop."""
        start = frame.captured_at - len(frame.samples) / SAMPLE_RATE - self.input_latency - self._shift
        return self.history.last_end < start - self.tail_seconds - PASS_MARGIN_SECONDS

    def clean(self, frame: AudioFrame) -> AudioFrame:
        """The frame without Elara's echo (the same frame when nothing played lately)."""
        near = frame.samples
        count = len(near)
        self._follow_timeline()
        start = self._reference_start(frame.captured_at - count / SAMPLE_RATE - self.input_latency,
                                      count) - self._shift
        self.heard.keep(start, near)
        if not self.history.playing_between(start - self.tail_seconds, start + count / SAMPLE_RATE):
            # Her next reply is confirmed before anything over it is the person's: between
            # replies her echo path may move unseen (a loopback re-timed after an underrun in
            # the sound server moved it 35 ms, with no gap in our own timeline).
            self._unconfirm("she fell silent")
            self.counters.passed += 1
            self._mic_rms = _rms(near)
            self._levels.append((self._mic_rms, 0.0))
            self._recent.clear()
            return frame
        far = self.history.read(start, count)
        with self._lock:
            cleaned = self.canceller.process(near, far)
            switched = getattr(self.canceller, "learnt", False)
        if switched != self._switched:
            # AEC3 handed over to speexdsp, which leaves her voice differently: measure it again
            self._switched = switched
            self._residuals.clear()
            self._remeasuring = True
        self.counters.processed += 1
        self._recent.append((start, near, cleaned))
        far_rms, near_rms, out_rms = _rms(far), _rms(near), _rms(cleaned)
        self._levels.append((out_rms, far_rms))
        self._mic_rms = near_rms
        # A frame that would pass for someone over her voice may be her own, the path moved.
        speech_over_playback = (far_rms >= FAR_ACTIVE_RMS and not self._remeasuring
                                and is_speech_over_playback(out_rms, far_rms, self.erle_db, self.residual_ratio()))
        if far_rms >= FAR_ACTIVE_RMS:
            self._residuals.append(out_rms / far_rms)
            self._keep_heard(start, count, near_rms, far_rms)
            self._remeasuring = self._remeasuring and len(self._residuals) < RESIDUAL_MIN_FRAMES
            self._realigned_unmeasured = self._realigned_unmeasured and self._remeasuring
            if near_rms > 0:
                self.erle_db += 0.05 * (frame_erle_db(near_rms, out_rms) - self.erle_db)  # ≈1.5 s of frames
            # A microphone that doesn't hear her has no echo delay: all a second of her voice
            # correlates with is someone talking over her (28-355 ms measured, each realignment
            # keeping a person going on over her unheard until her residual was measured again).
            if self._hears_playback():
                self._measure_delay(far, near, far_rms)
        if speech_over_playback and not self.moved() and self._left_is_hers():
            self._realign_if_nudged()
        if not self._confirmed and far_rms >= FAR_ACTIVE_RMS:
            self._confirm()
        if self.counters.processed % 25 == 0:
            log.debug("echo: ERLE %.1f dB, delay %s ms, reference %.1f ms behind the stamps",
                      self.erle_db, None if self.delay_ms is None else round(self.delay_ms),
                      self._shift * 1000)
        return AudioFrame(np.asarray(cleaned, dtype=np.int16), frame.captured_at)

    def _keep_heard(self, start: float, count: int, near_rms: float, far_rms: float) -> None:
        """Keep how loud the microphone heard her in this frame, against what her echo in it comes
        from: what she played the echo's delay before (`_target`, once measured). Against the frame's
        own reference, the first frame of each of her words is silent at an echo's delay of 100 ms or
        more: a loopback 120 ms late seemed not to hear her in a tenth of her frames, and her own
        "Hey Jarvis" was then taken for the person's."""
        if self._target is not None:
            far_rms = _rms(self.history.read(start - self._target, count))
        if far_rms >= FAR_ACTIVE_RMS:
            self._heard.append(near_rms / far_rms)

    def _reference_start(self, stamped: float, count: int) -> float:
        """Where in what was played this frame's reference starts. A frame's stamp jitters by
        milliseconds with the audio callbacks, and an adaptive filter fed a reference that slips by
        even a sample unlearns the room: so the reference goes on sample by sample from the first
        stamp, and is put back on the stamps only when they stray more than `RESYNC_SECONDS` (a
        reopened microphone). Slow drift between the two devices' clocks shows as a change of the
        measured echo delay, which realigns the reference."""
        if self._cursor is not None:
            expected = self._cursor + count / SAMPLE_RATE
            if abs(stamped - expected) <= RESYNC_SECONDS:
                self._cursor = expected
                return expected
            self.counters.resyncs += 1
            self._recent.clear()  # its frames no longer follow on from these
            self.heard.clear()
            self._unconfirm("the microphone's stamps jumped")
        self._cursor = stamped
        return stamped

    def settled(self, at: float) -> bool:
        """Has her echo path held still: the speaker's timeline for `TIMELINE_SETTLE_SECONDS`
        before `at`, her echo seen where the filter learns it since the timeline last moved, and
        since the reference was last realigned, long enough to measure again what cancelling leaves
        of her voice? Until then that can be as loud as a person."""
        return (self._confirmed and not self._remeasuring
                and at - self.history.moved_at >= TIMELINE_SETTLE_SECONDS)

    def _follow_timeline(self) -> None:
        """A move of the speaker's timeline (a gap heard, a restarted stream) unconfirms her echo
        path: a new timeline is anchored on its first callbacks, and where a busy machine's
        callbacks put it, her echo may come 8 or 35 ms from where the filter learnt it (as may a
        jump of the microphone's stamps, `_reference_start`). Nothing plays while she is silent,
        so the move is only seen at her next reply's first frames."""
        moved_at = self.history.moved_at
        if moved_at == self._timeline:
            return
        self._timeline = moved_at
        # heard on the old timeline
        self._recent.clear()
        self.heard.clear()
        self._far.clear()
        self._near.clear()
        self._collected = 0
        self._unconfirm("the speaker's timeline moved")

    def _unconfirm(self, why: str) -> None:
        """Her echo may have moved under the filter: confirm it again before anything over her
        voice is taken for the person."""
        if self._target is not None and self._confirmed:
            self._confirmed = False
            log.debug("echo: %s; her echo path is confirmed again before anything over her voice "
                      "is taken for the person", why)

    def _confirm(self) -> None:
        """Is her echo, in her latest frames, plainly where the filter learns it? Then her echo
        path is confirmed after a move of the speaker's timeline. (If it is plainly elsewhere,
        `moved` realigns the reference, which confirms it too.)"""
        if not self._hears_playback():
            self._confirmed = True  # no echo to have moved
            return
        heard = self._recent_echo()
        if heard is None:
            return
        assert self._target is not None
        if heard.clarity >= MOVED_CLARITY and abs(heard.lag / SAMPLE_RATE - self._target) <= MOVED_SECONDS:
            self._confirmed = True
            log.debug("echo: her echo path confirmed where the filter learns it (clarity %.1f)", heard.clarity)
        else:
            self._realign_if_moved(heard)

    def _recent_echo(self) -> _HeardEcho | None:
        """Her latest frames against what she played, and where her echo is in them (a lag
        behind the reference as read) and how clearly (`estimate_delay`); None with too few
        frames or her voice too quiet."""
        if self._target is None or len(self._recent) < MOVED_MIN_FRAMES:
            return None
        near = np.concatenate([n for _, n, _ in self._recent])
        # what she played from `_max_lag` before the first of these frames on: near sample t
        # is far sample `_max_lag` + t, so that a lag of k is a delay of k samples
        far = self.history.read(self._recent[0][0] - self._max_lag / SAMPLE_RATE, self._max_lag + len(near))
        if _rms(far[self._max_lag:]) < FAR_ACTIVE_RMS:
            return None
        padded = np.concatenate([np.zeros(self._max_lag, dtype=near.dtype), near])
        return _HeardEcho(far, padded, *estimate_delay(far, padded, self._max_lag, self._least_lag()))

    def person_over_playback(self, at: float) -> bool:
        """Is the speech in the last frame cleaned (captured at `at`) the person's, over her voice?
        Only where her echo path has held still (`settled`: a move seen by `clean` unsettles
        it); then where she is silent, or standing above what cancelling leaves of her voice."""
        near, far = self.recent_levels(1)
        settled, residual = self.settled(at), self.residual_ratio()
        theirs = settled and is_speech_over_playback(near, far, self.erle_db, residual)
        log.debug("over her? level %.0f (%.0f before cancelling) over hers %.0f (left of her: %s, settled: %s): %s",
                  near, self._mic_rms, far, "unmeasured" if residual is None else f"{residual:.3f}", settled, theirs)
        return theirs

    def _left_is_hers(self) -> bool:
        """Is what cancelling left in her latest frames as much like what she played as
        `LEFT_LIKENESS`, at its best lag in the echo's range: has the filter lost her echo (her echo
        path moved by less than a realignment is made for)?"""
        if self._target is None or len(self._recent) < MOVED_LIKENESS_FRAMES:
            return False  # nothing learnt to lose
        least = self._least_lag()
        far, left = self.heard.played_and_heard(
            [(start, cleaned) for start, _, cleaned in list(self._recent)[-MOVED_LIKENESS_FRAMES:]], least)
        # sample to sample changes: a level that only steps with hers (no voice does) is not her
        likeness = echo_likeness(_changes(far), _changes(left), least, self._max_lag)[0]
        log.debug("echo: what cancelling left is %.2f like her voice", likeness)
        return likeness >= LEFT_LIKENESS

    def _realign_if_nudged(self) -> None:
        """The filter lost her echo (`_left_is_hers`): if her latest frames show it plainly a
        sample or more from where the filter learns it, and no further than `moved` looks from,
        read the reference where it is now (and measure again what cancelling leaves of her voice:
        `settled` is False until then)."""
        heard = self._recent_echo()
        if heard is None or heard.clarity < MOVED_CLARITY:
            return
        assert self._target is not None  # `_recent_echo` finds none before it is measured
        off = heard.lag - round(self._target * SAMPLE_RATE)
        if off == 0 or abs(off) > MOVED_SECONDS * SAMPLE_RATE:
            return
        delay = heard.lag / SAMPLE_RATE + self._shift
        log.info("echo delay %.1f ms, nudged %+.1f ms (clarity %.1f)", delay * 1000,
                 (heard.lag / SAMPLE_RATE - self._target) * 1000, heard.clarity)
        self.delay_ms = delay * 1000
        self._realign(delay, least=0.5 / SAMPLE_RATE)

    def moved(self) -> bool:
        """Has her echo path just moved (a stalled sound server, a speaker rebuffered)? Asked by
        `clean` of each frame that stands above what cancelling leaves of her voice: her latest
        frames show a plain echo of what she played, but not where the filter learns it, so the
        frame is her voice uncancelled. The reference is then realigned at once, and what
        cancelling leaves of her voice measured again (`settled` is False until it is)."""
        heard = self._recent_echo() if self._hears_playback() else None
        return heard is not None and self._realign_if_moved(heard)

    def _realign_if_moved(self, heard: _HeardEcho) -> bool:
        far, padded, lag, clarity = heard
        assert self._target is not None
        off = abs(lag / SAMPLE_RATE - self._target)
        if clarity < MOVED_CLARITY or off <= MOVED_SECONDS or off > MOVED_MAX_SECONDS:
            return False
        last = MOVED_LIKENESS_FRAMES * len(self._recent[-1][1])
        learnt = round(self._target * SAMPLE_RATE)
        (there, played_there), (here, played_here) = (_echo_at(far, padded, k, last) for k in (lag, learnt))
        log.debug("echo moved? %.2f alike %.0f ms on, %.2f where learnt (she played %.0f and %.0f RMS there)",
                  there, (lag / SAMPLE_RATE - self._target) * 1000, here, played_there, played_here)
        if (played_here < max(FAR_ACTIVE_RMS, MOVED_PLAYED_SHARE * played_there)  # next to nothing of her to miss
                or there < MOVED_LIKENESS * here or there < MOVED_MIN_LIKENESS):
            return False
        delay = lag / SAMPLE_RATE + self._shift
        log.info("echo delay %.0f ms, moved %+.0f ms (clarity %.1f)", delay * 1000,
                 (lag / SAMPLE_RATE - self._target) * 1000, clarity)
        self.delay_ms = delay * 1000
        self._realign(delay)
        self.counters.moved += 1
        return True

    def could_be_her(self, frames: int) -> bool:
        """Could her own voice be in what the microphone heard over its last `frames` frames?
        Not where it was measured not to hear her at all (`_hears_playback`), nor where those
        frames (and the ones kept before them) show it can't (`HeardPlayback`): then whatever
        is heard over her is the person's, however loud she is. Always while her echo path is
        unconfirmed after a move (`settled`): what she played is then read at the wrong time, and
        a microphone that hears her may seem silent while she spoke (a wake over her own reply,
        just after the microphone's stamps jumped)."""
        if not self._confirmed:
            return True
        return self._hears_playback() and self.heard.could_be_her(frames, self._least_lag())

    @property
    def trusted_erle_db(self) -> float:
        """The ERLE a level heard over her voice is judged by: none after the reference was
        realigned until what cancelling leaves of her is measured again (the filter learnt her echo
        where it no longer is, and a "stop" was read in what it left)."""
        return 0.0 if self._realigned_unmeasured else self.erle_db

    def recent_levels(self, frames: int) -> tuple[float, float]:
        """The loudest cleaned level and the loudest far-end level over the last `frames` frames."""
        recent = list(self._levels)[-frames:]
        if not recent:
            return 0.0, 0.0
        return max(n for n, _ in recent), max(f for _, f in recent)

    def residual_ratio(self) -> float | None:
        """What cancelling leaves of her voice per unit of far-end level: the median over her
        recent frames (someone talking over her in fewer than half of them doesn't move it), or
        None until enough were heard. 0 where the microphone doesn't hear the speaker at all."""
        if len(self._residuals) < RESIDUAL_MIN_FRAMES:
            return None
        return float(np.median(self._residuals))

    def _hears_playback(self) -> bool:
        """Does the microphone hear her voice at all: louder than `UNHEARD_PLAYBACK_DB` under her own
        level, before cancelling, in the quietest tenth of her recent frames (someone talking
        over her, even most of the time, only adds to the rest)? True until measured."""
        if len(self._heard) < RESIDUAL_MIN_FRAMES:
            return True
        return float(np.percentile(self._heard, 10)) > 10 ** (UNHEARD_PLAYBACK_DB / 20)

    def reset(self) -> None:
        """Start over (a new microphone or speaker)."""
        self._residuals.clear()
        self._heard.clear()
        self._recent.clear()
        self.heard.clear()
        self._remeasuring = self._switched = self._realigned_unmeasured = False
        self._confirmed, self._timeline = True, self.history.moved_at
        with self._lock:
            self.canceller.reset()
        self.erle_db, self.delay_ms = 0.0, None
        self._cursor, self._target, self._shift = None, None, 0.0
        self._far.clear()
        self._near.clear()
        self._collected = 0

    def status(self) -> dict[str, object]:
        """The echo filter's part of `elara status`."""
        return {"erle_db": round(self.erle_db, 1),
                "delay_ms": None if self.delay_ms is None else round(self.delay_ms),
                "frames_cancelled": self.counters.processed, "frames_passed": self.counters.passed,
                "realigned": self.counters.realigned, "moved": self.counters.moved,
                "resyncs": self.counters.resyncs, "playback_blocks": len(self.history)}

    def _measure_delay(self, far: np.ndarray, near: np.ndarray, far_rms: float) -> None:
        if far_rms < FAR_ACTIVE_RMS:
            return
        self._far.append(far)
        self._near.append(near)
        self._collected += len(far)
        if self._collected < self._window:
            return
        far_all, near_all = np.concatenate(self._far), np.concatenate(self._near)
        self._far.clear()
        self._near.clear()
        self._collected = 0
        lag, clarity = estimate_delay(far_all, near_all, self._max_lag, self._least_lag())
        if clarity < 5:
            return  # no clear echo in this stretch (the user talking over her, or a quiet room)
        delay = lag / SAMPLE_RATE + self._shift  # behind the stamps of what was played
        if self.delay_ms is None or abs(delay * 1000 - self.delay_ms) > 5:
            log.info("echo delay %.0f ms (clarity %.1f)", delay * 1000, clarity)
        self.delay_ms = delay * 1000
        if self._target is None:
            self._target = min(max(delay, TARGET_LAG_SECONDS[0]), TARGET_LAG_SECONDS[1])
            self.canceller.stream_delay_ms = round(self._target * 1000)
            self._heard.clear()  # measured before her echo's delay was known
        self._realign(delay)

    def _least_lag(self) -> int:
        """The least lag behind the reference as read (`_shift` behind the stamps) at which her
        echo can be: none behind the stamps, where a path that grew and then shrank puts it."""
        return -max(round(self._shift * SAMPLE_RATE), 0)

    def _realign(self, delay: float, least: float = REALIGN_SECONDS) -> None:
        """Read the reference so that an echo `delay` behind the stamps stays where the filter
        learns it, if that moves it by more than `least` seconds; what cancelling left of her
        voice before no longer holds. Her echo path is confirmed: it was measured where it is now."""
        assert self._target is not None
        self._confirmed = True
        shift = delay - self._target
        if abs(shift - self._shift) > least:
            log.debug("echo reference shifted by %.1f ms", (shift - self._shift) * 1000)
            self._shift = shift
            self.counters.realigned += 1
            self._residuals.clear()
            self._heard.clear()  # measured where her echo no longer is
            self._recent.clear()
            self.heard.clear()  # its frames no longer follow on from the next
            self._remeasuring = self._realigned_unmeasured = True
            # what the once-a-second measure has gathered was read at the old alignment
            self._far.clear()
            self._near.clear()
            self._collected = 0


def _echo_at(far: np.ndarray, near: np.ndarray, lag: int, last: int) -> tuple[float, float]:
    """How much the `last` samples of `near` (those with `far` to match, for a negative lag) are
    `far` `lag` samples late (the two of a length, `far` reaching back at least `lag` before them):
    their normalized correlation at that lag, and the RMS of what `far` played there."""
    end = len(near) - max(-lag, 0)
    a = near[end - last:end].astype(np.float64)
    b = far[end - last - lag:end - lag].astype(np.float64)
    energy = math.sqrt(float(np.dot(a, a)) * float(np.dot(b, b)))
    return (abs(float(np.dot(a, b))) / energy if energy > 0 else 0.0), _rms(b)


def frame_erle_db(near_rms: float, out_rms: float) -> float:
    """How much quieter cancelling made one frame (its level before, `near_rms`, and after), in dB."""
    return 10 * math.log10((near_rms ** 2 + 1) / (out_rms ** 2 + 1))


def _changes(samples: np.ndarray) -> np.ndarray:
    """Each sample less the one before (the first less itself)."""
    values = samples.astype(np.float64)
    return np.diff(values, prepend=values[:1])


def _rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples.astype(np.float64))))) if len(samples) else 0.0
