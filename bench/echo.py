#!/usr/bin/env python3
"""Benchmark echo cancellation and "stop" over Elara's voice (issue: interrupt her).

Offline (the default, ≈5 min): Elara's Piper voice reads a long reply; her echo reaches the
microphone through a room — the speaker's audio resampled to 16 kHz as the sound server does,
`--delay-ms` late, at `--echo-db`, and either as the virtual sound card's loopback does it (a pure
delay) or through a simulated room (an exponentially decaying impulse response, RT60 0.3 s). Over
it, people say "stop" and other short words in several voices, at several loudnesses against her
echo. Each canceller runs on the same frames as the daemon feeds it (80 ms, with the reference
read back from the speaker's playback history), and the daemon's own "stop" path runs on what it
leaves (Silero VAD → the spotter → Whisper → `heard_stop`). Reported per canceller and room:
ERLE on her echo alone, how many "stop"s were heard through double talk, false stops and
candidates over her echo alone, and CPU per frame.

    .venv/bin/python -m bench.echo [--minutes 2] [--cancellers webrtc,speex,none]

Live (`--live`, on the virtual sound card with module-loopback routing the speaker back into the
microphone): the daemon itself, her reaction from the end of "stop" / the wake word to silence,
measured on the microphone's own recording (see tests/test_echo_e2e.py), over `--trials`; and
`--self-talk MIN` minutes of her long replies heard back, counting false stops, wakes and turns.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.common import listening_daemon, log, source_name, speech
from elara.audio.frames import FRAME_SAMPLES, SAMPLE_RATE, AudioFrame
from elara.audio.reference import PlaybackHistory
from elara.audio.streams import resample
from elara.voice.echo import (
    FAR_ACTIVE_RMS,
    LEFT_LIKENESS,
    Canceller,
    EchoFilter,
    SpeexCanceller,
    _changes,
    echo_likeness,
    frame_erle_db,
    is_barge_in,
    make_canceller,
    webrtc_canceller,
)
from elara.voice.stop import StopSpotter, heard_stop
from elara.voice.stt import phantom_reason
from tests.rig import voice_clips

REPO = Path(__file__).resolve().parents[1]

STORY = ("Once upon a time there was a lighthouse keeper who lived on a small rocky island. Every "
         "evening she climbed the stairs and lit the lamp, and every morning she put it out again. "
         "One stormy night a ship came too close to the rocks, and she rang the bell until her arms "
         "ached. Stop me if you have heard this one before. The captain saw the light just in time. "
         "Years later he came back with his whole crew to thank her, and they stayed for supper. ")
#: what people say over her: "stop" (she must stop), the wake word (she must listen), and other
#: words (she must go on)
WORDS = [("Stop.", "stop"), ("Hey Jarvis.", "wake"), ("Stop it.", "stop"), ("That's enough.", "stop"),
         ("Thank you.", "other"), ("Never mind.", "stop"), ("Hey Jarvis.", "wake"), ("Be quiet.", "stop"),
         ("Really?", "other"), ("OK, stop.", "stop"), ("Wow.", "other"), ("Hey Jarvis.", "wake")]
STOPS = [text for text, kind in WORDS if kind == "stop"]
#: `--other-words`: short things people say over her that are neither (she must go on), some of
#: them near a stop command in sound or words ("Quite.", "Stop by later.", "Enough said.")
OTHER_WORDS = [(text, "other") for text in (
    "Yes.", "No.", "Okay.", "Hmm.", "Right.", "Go on.", "Interesting.", "What?", "Tell me more.", "Thanks.",
    "Cool.", "I see.", "That is it.", "Start over.", "Shut the door.", "Top of the morning.", "Say that again.",
    "Never.", "Be careful.", "Cancel my meeting.", "Hey John.", "Stop by later.", "Quite.", "Nice.", "Oh no.",
    "Excuse me.", "Wait.", "Sorry?", "Enough said.", "Got it.")]
VOICES = [("espeak", "en-us", 150), ("espeak", "en-gb", 150), ("espeak", "en-us+f3", 150), ("piper", 1.1)]
BLOCK = 0.02  # the speaker's callback block
DEBUG = False


# -- cancellers ---------------------------------------------------------------------------------


class NoCanceller:
    """The microphone as it is."""

    stream_delay_ms = 0

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        """Unchanged."""
        return near

    def reset(self) -> None:
        """Nothing to forget."""


CANCELLERS: dict[str, Callable[[], Canceller]] = {
    "webrtc": webrtc_canceller,
    "speex": SpeexCanceller,
    "shipped": lambda: make_canceller("speex"),  # AEC3 while speexdsp learns the room, then speexdsp
    "none": NoCanceller,
}


# -- the scene -----------------------------------------------------------------------------------


@dataclass
class Scene:
    """Her voice as played, the microphone, and where people spoke over her."""

    played: np.ndarray  # what the speaker played, at `rate`
    rate: int
    mic: np.ndarray  # 16 kHz: her echo plus the people
    words: list[tuple[int, int, str, str, float]]  # start, end (16 kHz samples), text, kind, level dB
    near: np.ndarray  # the people alone (16 kHz), to tell the canceller's harm from Whisper's


def room_response(rt60: float, seed: int = 7) -> np.ndarray:
    """A room's impulse response: the direct sound, then exponentially decaying reflections."""
    n = int(rt60 * SAMPLE_RATE)
    rng = np.random.default_rng(seed)
    t = np.arange(n) / SAMPLE_RATE
    tail = rng.standard_normal(n) * np.exp(-6.9 * t / rt60) * 0.25
    tail[: int(0.005 * SAMPLE_RATE)] = 0.0  # the first reflection comes 5 ms after the direct sound
    tail[0] = 1.0
    return tail / np.sqrt(np.sum(tail ** 2))


def her_reading(minutes: float) -> tuple[np.ndarray, int]:
    """Minutes of her reading the story, as the speaker plays it, and its rate."""
    synthesizer = voice_clips.synthesizer()
    sentence_audio = []
    rate = synthesizer.sample_rate
    while sum(len(a) for a in sentence_audio) < minutes * 60 * rate:
        for text in STORY.split(". "):
            sentence_audio.append(synthesizer.synthesize(text.strip(" .") + ".").samples)
            sentence_audio.append(np.zeros(int(0.15 * rate), dtype=np.int16))
    return np.concatenate(sentence_audio)[: int(minutes * 60 * rate)], rate


def her_echo(played: np.ndarray, rate: int, room: str, delay_ms: float, echo_db: float) -> np.ndarray:
    """What the microphone hears of `played` (16 kHz): through `room`, `delay_ms` late, at `echo_db`."""
    at_mic = resample(played, rate, SAMPLE_RATE).astype(np.float64)
    if room == "room":
        at_mic = np.convolve(at_mic, room_response(0.3))[: len(at_mic)]
    at_mic *= 10 ** (echo_db / 20)
    shift = int(delay_ms * SAMPLE_RATE / 1000)
    return np.concatenate([np.zeros(shift), at_mic])[: len(at_mic)]


def said_over_her(voice: tuple, text: str, echo_level: float, level_db: float) -> np.ndarray:
    """`text` in `voice`, its voiced part `level_db` against her echo's level (RMS) at the microphone."""
    said = speech(voice, text).astype(np.float64)
    voiced = said[np.abs(said) > 50]
    return said * echo_level * 10 ** (level_db / 20) / max(np.sqrt(np.mean(voiced ** 2)), 1.0)


def loud_span(said: np.ndarray) -> tuple[int, int]:
    """The first and last sample of `said` above a twentieth of its peak."""
    loud = np.flatnonzero(np.abs(said) > 0.05 * np.abs(said).max())
    return int(loud[0]), int(loud[-1])


def make_scene(minutes: float, room: str, delay_ms: float, echo_db: float, seed: int = 1,
               words_said: list[tuple[str, str]] = WORDS) -> Scene:
    """Minutes of her reading, and a person speaking over her every few seconds (`words_said`, in turn)."""
    played, rate = her_reading(minutes)
    echo = her_echo(played, rate, room, delay_ms, echo_db)
    rng = np.random.default_rng(seed)
    mic = echo + rng.standard_normal(len(echo)) * 3.0  # a quiet room's noise floor (≈ -80 dBFS)
    words = []
    near = np.zeros(len(mic))
    echo_level = np.sqrt(np.mean(echo[echo != 0] ** 2))
    # Nobody speaks in the first 4 s (the canceller converges), then every 4.5–7 s.
    position, n = int(4 * SAMPLE_RATE), 0
    while True:
        text, kind = words_said[n % len(words_said)]
        voice = VOICES[(n // len(words_said) + n) % len(VOICES)]
        level = (-6.0, 0.0, 6.0)[n % 3]  # the person against her echo at the microphone
        said = said_over_her(voice, text, echo_level, level)
        if position + len(said) >= len(mic) - SAMPLE_RATE:
            break
        mic[position:position + len(said)] += said
        near[position:position + len(said)] += said
        first, last = loud_span(said)
        words.append((position + first, position + last, text, kind, level))
        position += len(said) + int(rng.uniform(4.5, 7.0) * SAMPLE_RATE)
        n += 1
    return Scene(played, rate, np.clip(mic, -32768, 32767).astype(np.int16), words,
                 np.clip(near, -32768, 32767).astype(np.int16))


# -- running a canceller over the scene ----------------------------------------------------------


@dataclass
class Result:
    """What one canceller did with one scene."""

    erle_db: float
    heard: list[bool]  # per word of the scene: stopped her (a stop) or woke her (the wake word)
    false_stops: int  # a stop where nobody said one
    false_wakes: int  # a wake where nobody said the wake word
    candidates_over_echo: int  # "stop" checks while only her echo was there
    ms_per_frame: float
    heard_plain: list[bool]  # `heard`'s stops by Whisper's own reading alone, of the same audio
    false_stops_plain: int


def hand_over(history: PlaybackHistory, played: np.ndarray, rate: int, start: float, written: int,
              captured: float) -> int:
    """The speaker hands over everything due by `captured` (it runs ahead of what is heard), from
    `written` samples on, in its blocks; how many it has handed over now."""
    block = int(BLOCK * rate)
    while written < len(played) and start + written / rate < captured + 0.1:
        history.write(start + written / rate, played[written:written + block], rate)
        written += block
    return written


def run(scene: Scene, canceller: Canceller, transcriber, vad, wake, plain) -> Result:
    """Feed the scene frame by frame as the daemon does; the wake word and the "stop" path on what
    comes out, each with the daemon's level check against her echo. Each "stop" check is also read
    by `plain` (Whisper's own reading, not told the stop commands), for a comparison on the same audio."""
    history = PlaybackHistory(seconds=10.0)
    start = 100.0  # the monotonic time her first sample is heard
    echo = EchoFilter(canceller, history)
    spotter = StopSpotter()
    vad.reset()
    wake.reset()
    written = 0
    cleaned_frames: list[np.ndarray] = []
    seconds = 0.0
    stops: list[tuple[int, bool]] = []  # (sample, said stop) per candidate checked
    stops_plain: list[tuple[int, bool]] = []
    wakes: list[int] = []
    frames = len(scene.mic) // FRAME_SAMPLES
    for i in range(frames):
        captured = start + (i + 1) * FRAME_SAMPLES / SAMPLE_RATE
        written = hand_over(history, scene.played, scene.rate, start, written, captured)
        frame = AudioFrame(scene.mic[i * FRAME_SAMPLES:(i + 1) * FRAME_SAMPLES], captured)
        began = time.process_time()
        cleaned = echo.clean(frame)
        seconds += time.process_time() - began
        cleaned_frames.append(cleaned.samples)
        detection = wake.process(cleaned)
        if detection is not None:
            near, far = echo.recent_levels(12)
            if is_barge_in(near, far, echo.erle_db):
                wakes.append((i + 1) * FRAME_SAMPLES)
            wake.reset()
        candidate = spotter.feed(frame.duration, vad.speech_probability(cleaned) >= 0.5)
        if candidate is None:
            continue
        first = max(0, int(candidate.start / frame.duration) - 3)
        audio = np.concatenate(cleaned_frames[first:i + 1])
        transcript = transcriber.transcribe(audio)
        near, far = echo.recent_levels(i + 1 - int(candidate.start / frame.duration))
        during_playback = is_barge_in(near, far, echo.erle_db)
        said_stop = phantom_reason(transcript) is None and heard_stop(transcript.text) and during_playback
        stops.append(((i + 1) * FRAME_SAMPLES, said_stop))
        own = plain.transcribe(audio)
        stops_plain.append(((i + 1) * FRAME_SAMPLES, phantom_reason(own) is None and heard_stop(own.text) and during_playback))
        if DEBUG:
            log(f"  candidate {candidate.start:.2f}-{candidate.end:.2f}: {transcript.text!r} "
                f"no-speech {transcript.no_speech_prob:.2f} levels {near:.0f}/{far:.0f} stop={said_stop}")
    mic_all = scene.mic[: frames * FRAME_SAMPLES].astype(np.float64)
    out_all = np.concatenate(cleaned_frames).astype(np.float64)
    quiet = np.ones(len(mic_all), dtype=bool)
    quiet[: 4 * SAMPLE_RATE] = False
    for begin, end, *_ in scene.words:
        quiet[max(0, begin - SAMPLE_RATE // 2):end + SAMPLE_RATE] = False
    erle = 10 * np.log10(np.sum(mic_all[quiet] ** 2) / max(np.sum(out_all[quiet] ** 2), 1.0))
    after = int(1.0 * SAMPLE_RATE)  # how late a reaction may come and still count for the word

    def near_word(at: int, kind: str) -> bool:
        return any(b <= at <= e + after for b, e, _, k, _ in scene.words if k == kind)

    heard = [any(b <= at <= e + after and ok for at, ok in stops) if kind == "stop"
             else any(b <= at <= e + after for at in wakes) if kind == "wake" else False
             for b, e, _, kind, _ in scene.words]
    heard_plain = [kind == "stop" and any(b <= at <= e + after and ok for at, ok in stops_plain)
                   for b, e, _, kind, _ in scene.words]
    return Result(
        erle_db=float(erle), heard=heard,
        false_stops=sum(1 for at, ok in stops if ok and not near_word(at, "stop")),
        false_wakes=sum(1 for at in wakes if not near_word(at, "wake")),
        candidates_over_echo=sum(1 for at, _ in stops
                                 if not any(b - SAMPLE_RATE // 2 <= at <= e + after for b, e, *_ in scene.words)),
        ms_per_frame=1000 * seconds / frames, heard_plain=heard_plain,
        false_stops_plain=sum(1 for at, ok in stops_plain if ok and not near_word(at, "stop")))


def share(result: Result, scene: Scene, kind: str, level: float | None = None, *, plain: bool = False) -> str:
    """How many of the words of `kind` (at `level`) were heard, as "n/m"."""
    hits = [h for h, w in zip(result.heard_plain if plain else result.heard, scene.words, strict=True)
            if w[3] == kind and (level is None or w[4] == level)]
    return f"{sum(hits)}/{len(hits)}"


def offline(args: argparse.Namespace) -> None:
    """The table of cancellers × rooms."""
    from elara.config import load_settings
    from elara.service.engines import load_wake_word, load_whisper
    from elara.service.listening import stop_reader, wire_wake_check
    from elara.service.slices import SpeechToTextSlice, WakeWordSlice
    from elara.voice.vad import SileroVad

    settings = load_settings(env={})
    whisper = load_whisper(SpeechToTextSlice.of(settings))
    vad = SileroVad()
    wake = load_wake_word(WakeWordSlice.of(settings))
    transcriber = stop_reader(whisper, wake.names) or whisper  # reads "stop" as the daemon does
    wire_wake_check(wake, settings, whisper)  # as the daemon wires it
    print("| room | canceller | ERLE, her echo alone | \"stop\" heard over her (person −6 / 0 / +6 dB vs her echo) "
          "| wake word heard over her | false stops | false wakes | \"stop\" checks over her echo alone "
          "| CPU per 80 ms frame | Whisper's own reading alone: \"stop\" heard, false stops |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for room in args.rooms.split(","):
        scene = make_scene(args.minutes, room, args.delay_ms, args.echo_db,
                           words_said=OTHER_WORDS if args.other_words else WORDS)
        for name in (args.cancellers or "webrtc,speex,none").split(","):
            result = run(scene, CANCELLERS[name](), transcriber, vad, wake, whisper)

            levels = " / ".join(share(result, scene, "stop", level) for level in (-6.0, 0.0, 6.0))
            print(f"| {room} | {name} | {result.erle_db:.1f} dB | {share(result, scene, 'stop')} ({levels}) "
                  f"| {share(result, scene, 'wake')} "
                  f"| {result.false_stops} | {result.false_wakes} | {result.candidates_over_echo} "
                  f"| {result.ms_per_frame:.2f} ms | {share(result, scene, 'stop', plain=True)}, "
                  f"{result.false_stops_plain} |", flush=True)


# -- the going-on check over her voice, offline --------------------------------------------------

#: frames of speech in a row the going-on check takes for the person going on (`Listening.MinSpeechMs`
#: 200 ms of 80 ms frames)
GOING_ON_FRAMES = 3


@dataclass
class OverHer:
    """What the going-on check's test (`EchoFilter.person_over_playback`) made of one scene."""

    speech_frames: int = 0  # frames of speech (Silero) over her voice
    theirs: int = 0  # … taken for the person's
    moves_seen: int = 0  # her echo path seen to have moved, and the reference realigned at once
    went_on: int = 0  # runs of `GOING_ON_FRAMES` taken for the person: the check would drop her reply


def cleaned_frames(echo: EchoFilter, played: np.ndarray, rate: int,
                   mic: np.ndarray) -> Iterator[tuple[int, float, AudioFrame]]:
    """`mic` through `echo` frame by frame, her speaker playing `played` from 100 s as the daemon's
    does (`hand_over`): each frame's index, capture time and what cancelling left."""
    written = 0
    for i in range(len(mic) // FRAME_SAMPLES):
        captured = 100.0 + (i + 1) * FRAME_SAMPLES / SAMPLE_RATE
        written = hand_over(echo.history, played, rate, 100.0, written, captured)
        yield i, captured, echo.clean(AudioFrame(mic[i * FRAME_SAMPLES:(i + 1) * FRAME_SAMPLES], captured))


def speex_filter() -> EchoFilter:
    """The shipped echo filter (AEC3 while speexdsp learns) on an empty playback history."""
    return EchoFilter(make_canceller("speex"), PlaybackHistory(seconds=10.0))


def during_playback(played: np.ndarray, rate: int, mic: np.ndarray, vad, *, check_moves: bool = True) -> OverHer:
    """Feed `mic` frame by frame; ask the going-on check's test of each frame of speech over her."""
    echo = speex_filter()
    if not check_moves:
        echo.moved = lambda: False  # type: ignore[method-assign]  # as before the check
    vad.reset()
    seen, in_a_row = OverHer(), 0
    for _, captured, cleaned in cleaned_frames(echo, played, rate, mic):
        theirs = False
        if vad.speech_probability(cleaned) >= 0.5 and echo.recent_levels(1)[1] >= FAR_ACTIVE_RMS:
            seen.speech_frames += 1
            theirs = echo.person_over_playback(captured)
            seen.theirs += theirs
        in_a_row = in_a_row + 1 if theirs else 0
        seen.went_on += in_a_row == GOING_ON_FRAMES
    seen.moves_seen = echo.counters.moved
    return seen


def moving_echo(played: np.ndarray, rate: int, room: str, args: argparse.Namespace) -> tuple[np.ndarray, int, float]:
    """Her echo alone at the microphone (with a quiet room's noise), its path `--move-echo-ms` later
    and back every `--move-every` seconds; how many samples apart the moves are, and her echo's
    level (RMS) where it is unmoved."""
    echoes = [her_echo(played, rate, room, args.delay_ms + move, args.echo_db) for move in (0, args.move_echo_ms)]
    every = int(args.move_every * SAMPLE_RATE)
    late = (np.arange(len(echoes[0])) // every) % 2 == 1
    noise = np.random.default_rng(1).standard_normal(len(late)) * 3.0
    return np.where(late, echoes[1], echoes[0]) + noise, every, float(np.sqrt(np.mean(echoes[0][echoes[0] != 0] ** 2)))


def moving_path(args: argparse.Namespace) -> None:
    """The going-on check over her voice: people talking over her (a move must not be seen), and
    her voice alone with its echo path moving (her voice must not pass for the person going on)."""
    from elara.voice.vad import SileroVad

    vad = SileroVad()
    print("| room | people over her: frames of speech over her, taken for the person; moves seen (none happened) "
          "| … heard going on: with the check / without "
          f"| her voice alone, the path {args.move_echo_ms:+.0f} ms and back every {args.move_every} s: "
          "moves, seen at once | her voice taken for the person going on: with the check / without |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for room in args.rooms.split(","):
        scene = make_scene(args.minutes, room, args.delay_ms, args.echo_db, words_said=OTHER_WORDS)
        people = during_playback(scene.played, scene.rate, scene.mic, vad)
        people_unchecked = during_playback(scene.played, scene.rate, scene.mic, vad, check_moves=False)
        played, rate = her_reading(args.minutes)
        her, every, _ = moving_echo(played, rate, room, args)
        mic = np.clip(her, -32768, 32767).astype(np.int16)
        moved = during_playback(played, rate, mic, vad)
        unchecked = during_playback(played, rate, mic, vad, check_moves=False)
        print(f"| {room} | {people.speech_frames}, {people.theirs}, {people.moves_seen} "
              f"| {people.went_on} / {people_unchecked.went_on} "
              f"| {len(her) // every - 1}, {moved.moves_seen} | {moved.went_on} / {unchecked.went_on} |", flush=True)


# -- the wake word's gate just after a move, offline ---------------------------------------------

#: when, after her echo path moved, the people's "Hey Jarvis" ends (`--gate-after-move`), in turn
GATE_AFTER_MOVE_SECONDS = (0.6, 1.0, 1.5, 2.0, 2.6)


def wake_gates(echo: EchoFilter, since: list[tuple[float, float]], window: list[tuple[float, np.ndarray]]) -> dict[str, bool]:
    """Whether each way of judging a wake word by level calls it the person's at this frame: as
    shipped (no ERLE trusted until what cancelling leaves is measured again), by the smoothed ERLE,
    by the mean ERLE or the 80th percentile of what cancelling left since the last realignment (`since`:
    per frame of her voice, ERLE in dB and cleaned over far-end level; 8 frames or more), and by
    what is left over the wake's frames (`window`: start, cleaned) being unlike her voice."""
    near, far = echo.recent_levels(12)
    shipped = is_barge_in(near, far, echo.trusted_erle_db)
    fresh = len(since) >= 8 and echo.trusted_erle_db == 0.0
    least = echo._least_lag()
    played, left = echo.heard.played_and_heard(window, least)
    likeness = echo_likeness(_changes(played), _changes(left), least, echo._max_lag)[0]
    return {"shipped": shipped, "smoothed ERLE": is_barge_in(near, far, echo.erle_db),
            "mean ERLE since": is_barge_in(near, far, float(np.mean([e for e, _ in since]))) if fresh else shipped,
            "left since, 80th percentile": (near > far * float(np.percentile([r for _, r in since], 80)) * 2
                                            if fresh else shipped),
            "left unlike her": shipped or likeness < LEFT_LIKENESS}


def gates_over(played: np.ndarray, rate: int, mic: np.ndarray, at: set[int]) -> list[dict[str, bool]]:
    """Feed `mic` frame by frame; at the frames `at`, `wake_gates`."""
    echo = speex_filter()
    realigned, since, window, judged = 0, [], [], []
    for i, _, cleaned in cleaned_frames(echo, played, rate, mic):
        window = [*window[-7:], (echo._cursor - echo._shift, cleaned.samples)] if echo._cursor is not None else []
        if echo.counters.realigned != realigned:
            realigned, since = echo.counters.realigned, []
        left, far = echo.recent_levels(1)
        if far >= FAR_ACTIVE_RMS:
            since.append((frame_erle_db(echo._mic_rms, left), left / far))
        if i in at and echo._target is not None:
            judged.append(wake_gates(echo, since, window))
    return judged


def gate_after_move(args: argparse.Namespace) -> None:
    """The wake word's gate by level in the seconds after her echo path moved: people's "Hey
    Jarvis" (four voices, −6 / 0 / +6 dB against her echo) ending 0.6–2.6 s after a move, and every
    frame of her voice alone in the 3 s after one (each one the gate calls the person's would let
    a wake word her voice set off through)."""
    played, rate = her_reading(args.minutes)
    print("| room | gate | people's wake words passed | frames of her voice alone passed |")
    print("| --- | --- | ---: | ---: |")
    for room in args.rooms.split(","):
        her, every, level = moving_echo(played, rate, room, args)
        people, ends = np.zeros(len(her)), set()
        for k, move in enumerate(range(every, len(her) - every, every)):
            said = said_over_her(VOICES[k % len(VOICES)], "Hey Jarvis.", level, (-6.0, 0.0, 6.0)[k % 3])
            end = move + int(GATE_AFTER_MOVE_SECONDS[k % len(GATE_AFTER_MOVE_SECONDS)] * SAMPLE_RATE)
            begin = end - loud_span(said)[1]
            people[begin:begin + len(said)] += said
            ends.add(end // FRAME_SAMPLES + 2)  # the engine scores the phrase a frame or two after it
        after = {m // FRAME_SAMPLES + f for m in range(every, len(her) - every, every) for f in range(int(3 / 0.08))}
        wakes = gates_over(played, rate, np.clip(her + people, -32768, 32767).astype(np.int16), ends)
        alone = gates_over(played, rate, np.clip(her, -32768, 32767).astype(np.int16), after)
        for gate in wakes[0]:
            print(f"| {room} | {gate} | {sum(j[gate] for j in wakes)}/{len(wakes)} "
                  f"| {sum(j[gate] for j in alone)}/{len(alone)} |", flush=True)


# -- live, on the virtual sound card ---------------------------------------------------------------


def live(args: argparse.Namespace) -> None:
    """Reaction times and self-talk on the daemon itself."""
    from tests.rig.daemon_process import daemon_env, daemon_status
    from tests.rig.ollama_server import FakeOllamaServer
    from tests.rig.pulse import VirtualSoundCard

    reply = {"text": " ".join([STORY] * 3)}
    log_to = REPO / "bench-results" / "echo-live-daemon.log" if args.debug else None
    with tempfile.TemporaryDirectory() as tmp_name, VirtualSoundCard() as card, \
            FakeOllamaServer(responder=lambda endpoint, body: reply["text"]) as server:
        tmp = Path(tmp_name)
        path = {"module": card.add_echo(latency_ms=round(args.delay_ms), volume=10 ** (args.echo_db / 20),
                                        adjust_seconds=10 if args.drifting else 0), "late": False}
        canceller = (args.cancellers or "speex").split(",")[0]
        settings = {"Listening__Mode": "wake_word", "Audio__EchoCanceller": canceller,
                    "Logging__Level": "DEBUG" if args.debug else "INFO"}
        settings.update(item.split("=", 1) for item in args.set)
        env = daemon_env(card.env, server.url, tmp, **settings)
        try:
            with listening_daemon(env, log_to) as daemon:
                question = voice_clips.write_wav(tmp / "q.wav", voice_clips.concat(
                    voice_clips.silence(0.3), voice_clips.piper_speech("Hey Jarvis."), voice_clips.silence(0.4),
                    voice_clips.piper_speech("Tell me a story."), voice_clips.silence(0.5)))
                wake = voice_clips.write_wav(tmp / "w.wav", voice_clips.concat(
                    voice_clips.piper_speech("Hey Jarvis."), voice_clips.silence(1.0)))
                # The first reply after start: she learns the room (an always-on daemon does this once).
                waits = daemon.count("waiting for the wake word")
                card.play_into_mic(question)
                if canceller == "speex":
                    daemon.wait_for("speexdsp has learnt the room", timeout=60)
                time.sleep(2.0)
                card.play_into_mic(wake)
                daemon.wait_for("waiting for the wake word", count=waits + 1, timeout=180)
                reactions(daemon, card, tmp, question, wake, args)
                if args.self_talk:
                    if args.short_replies:
                        # Each reply's first 1.5 s after the question is when the person may go on
                        # (Listening.GoOnMs): short replies put many of them in the minutes.
                        reply["text"] = ". ".join(STORY.split(". ")[:2]) + "."

                    def move() -> None:
                        """The echo path `--move-echo-ms` later, or back (between two replies)."""
                        path["late"] = not path["late"]
                        latency = round(args.delay_ms + (args.move_echo_ms if path["late"] else 0))
                        path["module"] = card.move_echo(int(path["module"]), latency,
                                                        volume=10 ** (args.echo_db / 20))

                    self_talk(daemon, card, server, question, args.self_talk,
                              move if args.move_echo_ms else None, round(args.move_every))
                status = daemon_status(env)
                print(f"status: echo {status.get('echo')}, counters {status['counters']}")
        finally:
            card.remove_echo(int(path["module"]))
            if log_to is not None:
                log(f"the daemon's log: {log_to}")


def reactions(daemon, card, tmp: Path, question: Path, wake: Path, args: argparse.Namespace) -> None:
    """`--trials` times, "stop" or the wake word said over her long reply: whether she heard it, and
    how soon after it she is silent at the microphone."""
    from tests.rig.recording import reaction, voiced_end

    times: dict[str, list[float]] = {"stop": [], "wake word": []}
    missed: dict[str, int] = {"stop": 0, "wake word": 0}
    for trial in range(args.trials):
        waits = daemon.count("waiting for the wake word")
        card.play_into_mic(question)
        time.sleep(2.5 + (trial % 4) * 0.7)
        kind = "wake word" if trial % 2 else "stop"
        voice = VOICES[(trial // 2) % len(VOICES)]
        text = "Hey Jarvis." if kind == "wake word" else STOPS[(trial // 2) % len(STOPS)]
        said = voice_clips.concat(voice_clips.silence(0.3), speech(voice, text), voice_clips.silence(1.2))
        pattern = r"wake word hey_jarvis \(" if kind == "wake word" else r'heard "stop"'
        before = daemon.count(pattern) - (1 if kind == "wake word" else 0)  # the question's own
        room = card.record_speaker(source=card.mic_monitor)
        card.play_into_mic(voice_clips.write_wav(tmp / "s.wav", said))
        seconds = reaction(room.samples(), said, voiced_end(said))
        heard = daemon.count(pattern) - before > (1 if kind == "wake word" else 0)
        if heard and seconds < 1.5:
            times[kind].append(seconds)
        else:
            missed[kind] += 1
        log(f"trial {trial}: {text!r} in {source_name(voice)} → {'heard' if heard else 'MISSED'}, silent after "
            f"{seconds * 1000:.0f} ms at the microphone")
        if not heard:  # let the story run out, or stop it
            card.play_into_mic(wake)
        daemon.wait_for("waiting for the wake word", count=waits + 1, timeout=120)
    for kind, got in times.items():
        if got:
            print(f"{kind}: heard {len(got)}/{len(got) + missed[kind]}; end of speech → silent at the "
                  f"microphone, median {statistics.median(got) * 1000:.0f} ms, max {max(got) * 1000:.0f} ms "
                  f"(through the {args.delay_ms:.0f} ms echo path)")


def self_talk(daemon, card, server, question: Path, minutes: float,
              move: Callable[[], None] | None = None, every: int = 2) -> None:
    """Her long replies heard back for `minutes`: what she took for the user. With `move`, the
    echo path is moved before every `every`-th reply (while she is silent)."""
    began = time.monotonic()
    turns_before = len(server.turns())
    wakes_before = daemon.count(r"wake word hey_jarvis \(")
    stops_before = daemon.count(r'heard "stop"')
    went_on_before = daemon.count("the person went on")
    asked = moves = 0
    spoken = 0.0
    while time.monotonic() - began < minutes * 60:
        if move is not None and asked and asked % every == 0:
            move()
            moves += 1
        waits = daemon.count("waiting for the wake word")
        card.play_into_mic(question)
        asked += 1
        started = time.monotonic()
        daemon.wait_for("waiting for the wake word", count=waits + 1, timeout=600)
        spoken += time.monotonic() - started
    wakes = daemon.count(r"wake word hey_jarvis \(") - wakes_before - asked
    stops = daemon.count(r'heard "stop"') - stops_before
    extra = len(server.turns()) - turns_before - asked
    print(f"self-talk: {spoken / 60:.1f} min of her voice heard back over {asked} replies "
          f"({moves} moves of the echo path, {daemon.count(r'moved [+-][0-9]')} realignments by the check): "
          f"{stops} false stops, {wakes} extra wakes, {extra} extra model requests, "
          f"{daemon.count('the person went on') - went_on_before} times her own voice was taken for "
          f"the person going on, {daemon.count('ignored a')} wakes or stops her own voice could "
          "explain, suppressed")


def main() -> int:
    """Parse the arguments; run the offline table or the live measurements."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="length of each offline scene")
    parser.add_argument("--cancellers", default=None,
                        help="offline: the cancellers compared (webrtc,speex,none); live: the daemon's "
                             "Audio.EchoCanceller (speex, as shipped)")
    parser.add_argument("--rooms", default="loopback,room")
    parser.add_argument("--delay-ms", type=float, default=60.0)
    parser.add_argument("--echo-db", type=float, default=-6.0, help="her echo's gain at the microphone")
    parser.add_argument("--other-words", action="store_true",
                        help="offline: only other short words said over her, never a stop or the wake word")
    parser.add_argument("--live", action="store_true")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--drifting", action="store_true",
                        help="live: an echo path that drifts, as between two devices' clocks")
    parser.add_argument("--self-talk", type=float, default=0.0, help="minutes of self-talk (live)")
    parser.add_argument("--short-replies", action="store_true",
                        help="self-talk with two-sentence replies: many more moments to go on in")
    parser.add_argument("--move-echo-ms", type=float, default=0.0,
                        help="live self-talk: the echo path this much later every --move-every replies, "
                             "then back (a stalled sound server's loopback grown)")
    parser.add_argument("--move-every", type=float, default=2,
                        help="live: replies between moves; --moving-path: seconds between moves")
    parser.add_argument("--gate-after-move", action="store_true",
                        help="offline: the wake word's gate by level in the seconds after her echo path "
                             "moved by --move-echo-ms (every --move-every s)")
    parser.add_argument("--moving-path", action="store_true",
                        help="offline, no Whisper: the going-on check over her voice, with people talking "
                             "over her and with her echo path moving by --move-echo-ms")
    parser.add_argument("--set", action="append", default=[], metavar="Section__Key=VALUE",
                        help="live: a setting of the daemon's (as ELARA__Section__Key)")
    parser.add_argument("--debug", action="store_true",
                        help="every word said and every candidate (live: the daemon's DEBUG log kept)")
    args = parser.parse_args()
    global DEBUG
    DEBUG = args.debug
    if args.live:
        live(args)
    elif args.gate_after_move:
        gate_after_move(args)
    elif args.moving_path:
        moving_path(args)
    else:
        offline(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
