#!/usr/bin/env python3
"""The wake word exactly as shipped, run live over scripts/bench_wake.py's clips and negatives.

bench_wake.py sweeps thresholds offline from the model's scores; this runs the configured detector
itself (`elara.voice.engines.load_wake` on the packaged settings or `--set Section__Key=VALUE`
overrides) with the Whisper check on doubtful scores wired as the daemon wires it
(`elara.runtime.transcript_confirmer`), frame by frame, resetting after each wake as the daemon
does. Recall by group, false wakes in the ordinary audio, sound-alike sentences woken, and how
often Whisper was asked. Reuses bench_wake's cache (run it first).

    .venv/bin/python scripts/bench_wake_live.py [--cache DIR] [--set WakeWord__ConfirmFrom=0]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "scripts"), str(REPO)]
os.environ.setdefault("ELARA_CLIP_CACHE", str(Path.home() / ".cache" / "elara-bench" / "clips"))

import bench_wake as bw  # noqa: E402
from voice_clips import frames  # noqa: E402

from elara.config import load_settings  # noqa: E402
from elara.runtime import transcript_confirmer  # noqa: E402
from elara.voice.engines import load_transcriber, load_wake  # noqa: E402
from elara.voice.wake import WakeWordDetector  # noqa: E402


def detections(detector: WakeWordDetector, samples: np.ndarray) -> list[float]:
    """Feed a clip from a fresh state; the time of each wake."""
    detector.reset()
    return [hit.at for frame in frames(samples) if (hit := detector.process(frame)) is not None]


def main() -> int:
    """Run the shipped detector over the bench material; markdown on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "elara-bench")
    parser.add_argument("--set", action="append", default=[], metavar="Section__Key=VALUE")
    args = parser.parse_args()
    env = {f"ELARA__{k}": v for k, v in (item.split("=", 1) for item in args.set)}
    settings = load_settings(env=env)
    wake = settings.wake_word
    detector = load_wake(settings, verifiers=False)
    if wake.confirm_from > 0:
        detector.confirm_with(transcript_confirmer(load_transcriber(settings)))
    started = time.monotonic()
    positives = bw.build_positives()
    stream, segments = bw.cached_negatives(args.cache, 1.0)
    bw.log("positives")
    found = [any(c.span[0] <= at <= c.span[1] + bw.TOLERANCE for at in detections(detector, c.samples))
             for c in positives]
    asked_positive = detector.confirmations["asked"]
    bw.log("negatives")
    before = dict(detector.confirmations)
    fired = detections(detector, stream)
    asked = detector.confirmations["asked"] - before["asked"]
    # Reuse bench_wake's accounting: a trace that is 1 at each wake frame and 0 elsewhere.
    trace = np.zeros(int(len(stream) / bw.SAMPLE_RATE / bw.FRAME_SECONDS), dtype=np.float32)
    for at in fired:
        trace[min(int(round(at / bw.FRAME_SECONDS)) - 1, len(trace) - 1)] = 1.0
    analysis = bw.Analysis(positives, bw.VariantTraces([], trace, 0.0, 0.0), segments)
    ordinary = analysis.false_wakes(1.0, 1, ordinary=True)
    groups: dict[str, list[bool]] = defaultdict(list)
    for clip, ok in zip(positives, found, strict=True):
        for key in (clip.voice, clip.noise, clip.layout):
            groups[key].append(ok)
    print("## The wake word as shipped (scripts/bench_wake_live.py)\n")
    print(f"threshold {wake.threshold:g} × {wake.trigger_level}, Silero gate {wake.vad_threshold:g}, "
          f"Whisper check from {wake.confirm_from:g} ({settings.speech_to_text.model}, beam "
          f"{settings.speech_to_text.beam_size}); {len(positives)} clips, {analysis.hours[True]:.2f} h of "
          f"ordinary audio; wall time {(time.monotonic() - started) / 60:.1f} min.\n")
    rows = [["recall", bw.rate(sum(found), len(found))],
            ["false wakes, ordinary audio", f"{len(ordinary)} ({len(ordinary) / analysis.hours[True]:.2f}/h)"],
            ["sound-alike sentences woken",
             f"{len(analysis.sound_alikes_woken(1.0, 1))}/{len(analysis.sound_alike_sentences)}"],
            ["Whisper checks", f"{asked_positive} on the clips; {asked} in the negatives "
                               f"({asked / (len(stream) / bw.SAMPLE_RATE / 3600):.1f}/h)"]]
    print(bw.table(["", "result"], rows))
    print(bw.table(["group", "recall"], [[k, bw.rate(sum(v), len(v))] for k, v in groups.items()]))
    for _, seg in ordinary:
        print(f"- false wake: {seg.category}: {bw.excerpt(seg, seg.end)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
