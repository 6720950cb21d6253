#!/usr/bin/env python3
"""Benchmark the per-user wake-word verifier (`elara wake enroll`) with synthetic "users".

Each user is one voice. It enrolls as `elara wake enroll` does — five takes of "Hey Jarvis." at
varied speeds and two stretches of other speech, through `elara.voice.enroll.enroll`, with and
without the near misses Elara's own voice adds (`NEAR_MISSES`, none of them among bench/wake.py's
sound-alikes) — and the
verifier it trains is then judged on bench/wake.py's material (its cache is reused): recall
on that voice's 28 positive clips and on every other voice's, false wakes in 1.21 h of ordinary
audio and sound-alike sentences woken, at the shipped detector settings (Silero gate 0.5).

One detector pass keeps, for every frame scoring ≥ VERIFY_FROM, the feature window the verifier
would see; each user's verifier then rescores those frames offline, exactly as the live detector
would (its probability replaces the score).

    .venv/bin/python -m bench.verifier [--cache DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import numpy as np

from bench import wake as bw
from bench.common import CACHE, keep_clips, log, table
from elara.voice.enroll import NEAR_MISSES, enroll
from elara.voice.models import resolve_wake_word
from elara.voice.verifier import VERIFY_FROM, WakeVerifier
from elara.voice.wake import WakeWordDetector
from tests.rig.voice_clips import concat, espeak_speech, frames, piper_speech, silence

GATE = 0.5  # WakeWord.VadThreshold as shipped
SETTINGS = ((0.5, 1), (0.3, 1))
OTHER_SPEECH = ("I left my umbrella at the office again, so I got soaked on the way home.",
                "The garden needs weeding before the weekend, and the fence wants painting too.")
#: (bench/wake.py's voice name, how the user speaks: a function of a variation index 0..4)
USERS = {
    "Piper joe": lambda text, i: piper_speech(text, length_scale=(0.9, 0.95, 1.05, 1.1, 1.15)[i]),
    "espeak en-gb": lambda text, i: espeak_speech(text, voice="en-gb", speed=140 + 12 * i),
    "espeak en-us+m3": lambda text, i: espeak_speech(text, voice="en-us+m3", speed=140 + 12 * i),
    "espeak en-029": lambda text, i: espeak_speech(text, voice="en-029", speed=140 + 12 * i),
}


class Scripted:
    """A recorder answering with prepared clips (the user at the microphone)."""

    def __init__(self, clips: list[np.ndarray]) -> None:
        self.clips = list(clips)

    async def say(self, text: str) -> None:
        """Nobody needs to hear the prompts."""

    async def record(self, seconds: float) -> np.ndarray:
        """The next prepared answer."""
        return self.clips.pop(0)


def trace(detector: WakeWordDetector, samples: np.ndarray) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Every frame's score, and the feature window of each frame the verifier would be asked about."""
    detector.reset()
    scores, windows = [], {}
    for i, frame in enumerate(frames(samples)):
        detector.process(frame)
        score = detector.last_scores.get(bw.WAKE_MODEL, 0.0)
        scores.append(score)
        if score >= VERIFY_FROM:
            windows[i] = detector._model.preprocessor.get_features(16)[0].copy()
    return np.array(scores, dtype=np.float32), windows


def traces_with_windows(cache: Path, positives: list, stream: np.ndarray) -> tuple[list, tuple]:
    """`trace` of every positive clip and of the negative stream, kept in the cache after the first run."""
    path = cache / f"verifier-traces-v{bw.BENCH_VERSION}-gate{GATE:g}.npz"
    if path.exists():
        data = np.load(path)

        def unpack(tag: str) -> tuple[np.ndarray, dict[int, np.ndarray]]:
            return data[f"{tag}s"], dict(zip(data[f"{tag}i"].tolist(), data[f"{tag}f"], strict=True))

        return [unpack(f"p{i}") for i in range(len(positives))], unpack("n")
    detector = WakeWordDetector([resolve_wake_word(bw.WAKE_MODEL).path], threshold=bw.NEVER, vad_threshold=GATE)
    log("scoring the positives")
    pos = [trace(detector, clip.samples) for clip in positives]
    log("scoring the negative stream")
    neg = trace(detector, stream)
    arrays: dict[str, np.ndarray] = {}
    for tag, (scores, windows) in [*((f"p{i}", p) for i, p in enumerate(pos)), ("n", neg)]:
        arrays[f"{tag}s"] = scores
        arrays[f"{tag}i"] = np.array(list(windows), dtype=np.int64)
        arrays[f"{tag}f"] = np.array(list(windows.values()), dtype=np.float32).reshape(len(windows), 16, 96)
    np.savez_compressed(path, **arrays)
    return pos, neg


def rescored(scores: np.ndarray, windows: dict[int, np.ndarray], verifier: WakeVerifier | None) -> np.ndarray:
    """The scores the live detector would have with `verifier`."""
    out = scores.copy()
    if verifier is not None:
        for i, features in windows.items():
            out[i] = verifier.probability(features)
    return out


def main() -> int:
    """Run the bench; markdown on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    keep_clips(args.cache / "clips")
    started = time.monotonic()
    positives = bw.build_positives()
    stream, segments = bw.cached_negatives(args.cache, 1.0)
    pos, neg = traces_with_windows(args.cache, positives, stream)
    enroller = WakeWordDetector([resolve_wake_word(bw.WAKE_MODEL).path], vad_threshold=GATE)
    # As `elara wake enroll` does: the near misses in Elara's own voice (Piper joe) as other speech.
    near = [concat(silence(0.5), piper_speech(text), silence(0.5)) for text in NEAR_MISSES]

    rows = []
    for user, voice, misses in [("nobody (no verifier)", None, []),
                                *((u, v, m) for u, v in USERS.items() for m in ([], near))]:
        verifier = None
        if voice is not None:
            takes = [concat(silence(0.5), voice("Hey Jarvis.", i), silence(0.8)) for i in range(5)]
            others = [voice(text, 2) for text in OTHER_SPEECH]
            verifier = asyncio.run(enroll(enroller, Scripted(takes + others), bw.WAKE_MODEL,
                                          near_misses=misses)).verifier
        traces = bw.VariantTraces([rescored(s, w, verifier) for s, w in pos], rescored(*neg, verifier), 0.0, 0.0)
        analysis = bw.Analysis(positives, traces, segments)
        own = [i for i, c in enumerate(positives) if c.voice == user]
        others_idx = [i for i, c in enumerate(positives) if c.voice != user]
        for threshold, level in SETTINGS:
            rows.append([
                user, "yes" if misses else "no", f"{threshold:g} / {level}",
                bw.rate(*analysis.recall(threshold, level, own)) if own else "–",
                bw.rate(*analysis.recall(threshold, level, others_idx)),
                str(len(analysis.false_wakes(threshold, level, ordinary=True))),
                f"{len(analysis.sound_alikes_woken(threshold, level))}/{len(analysis.sound_alike_sentences)}",
            ])
        log(f"{user} (near misses: {bool(misses)}): done")
    print("## Per-user verifier (bench/verifier.py)\n")
    print(f"Silero gate {GATE}; each user enrolled with five takes and two sentences of other speech. "
          f"{len(positives)} positive clips, {analysis.hours[True]:.2f} h of ordinary audio, "
          f"{len(analysis.sound_alike_sentences)} sound-alike sentences. Wall time "
          f"{(time.monotonic() - started) / 60:.1f} min.\n")
    print(table(["enrolled user", "near misses", "threshold / trigger", "recall, the user's clips", "recall, other voices",
                    "false wakes, ordinary audio", "sound-alike sentences woken"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
