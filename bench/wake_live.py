#!/usr/bin/env python3
"""The wake word exactly as shipped, run live over bench/wake.py's clips and negatives.

bench/wake.py sweeps thresholds offline from the model's scores; this runs the configured detector
itself (`elara.service.engines.load_wake_word` on the packaged settings or `--set Section__Key=VALUE`
overrides) with the Whisper check on doubtful scores wired as the daemon wires it
(`elara.service.listening.wire_wake_check`), frame by frame, resetting after each wake as the daemon
does. Recall by group, false wakes in the ordinary audio, sound-alike sentences woken, and how
often Whisper was asked. Reuses bench/wake.py's cache (run it first).

`--rules` adds a second pass (as long again) in which no checked score wakes (the doubtful ones,
and the confident ones with `WakeWord.ConfirmConfident`), keeping every window Whisper is asked
about, then decides them by each rule for the check (`elara.voice.wake.phrase_confirmed` at other
odds, the older transcript match): one table of rules over the same windows. It ignores that a wake resets the detector, so its row for the shipped rule
may differ a little from the live figure above it.

`--keep-windows FILE.npz` keeps every window checked in the negative stream with its decision;
`--second-reading FILE.npz` (same `--negative-scale` and `--negative-seed`) then only reads the ones
turned down again with `WakeWord.ConfirmSecondModel` and tables the false wakes it would add at
each log odds (with `--confident-only`, the confident scores' windows alone, at their own odds). `--negative-seed` picks an independent negative stream (bench/wake.py's).
`--held-out` measures recall alone on bench/wake.py's held-out clips: voices, paces, pitches, words
around the phrase and noises that no setting was chosen on; `--held-out 2`, `3` and `4` on more
such sets, each made once a setting had been tried on the ones before.

    .venv/bin/python -m bench.wake_live [--cache DIR] [--set WakeWord__ConfirmFrom=0] [--rules]
        [--confirm-before SECONDS] [--negative-scale 3] [--negative-seed 1] [--keep-windows FILE.npz]
    .venv/bin/python -m bench.wake_live --held-out [2|3|4]
    .venv/bin/python -m bench.wake_live --negative-scale 10 --negative-seed 1 --second-reading FILE.npz
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import wake as bw
from bench.common import CACHE, keep_clips, log, percentile, table
from elara.config import load_settings
from elara.service import listening
from elara.service.engines import load_second_check, load_wake_word, load_whisper
from elara.service.listening import WAKE_CHECK_NOISE_SUPPRESSION, wire_wake_check
from elara.service.slices import SecondCheckSlice, SpeechToTextSlice, WakeWordSlice
from elara.voice import wake as wake_module
from elara.voice.denoise import NoiseSuppressor
from elara.voice.stt import PhraseCheck, Transcriber
from elara.voice.wake import CONFIRM_AFTER_FRAMES, WakeWordDetector, phrase_confirmed
from elara.voice.wake_phrase import names_wake_word, spoken_wake_phrase
from tests.rig.voice_clips import frames


@dataclass
class Asked:
    """A window Whisper was asked about: where (a clip's index, or None in the negatives), when the
    score crossed, whether it crossed the threshold, and how Whisper read it."""

    clip: int | None
    at: float
    confident: bool
    check: PhraseCheck


class Recorder:
    """Wraps the daemon's confirmer and keeps every window it is asked about in the negative
    stream, with what it decided, so another check can decide the same windows later."""

    def __init__(self, confirmer: Callable[[np.ndarray, str, bool], bool]) -> None:
        self.confirmer = confirmer
        self.now = 0.0
        self.on = False
        self.windows: list[np.ndarray] = []
        self.at: list[float] = []
        self.confident: list[bool] = []
        self.decided: list[bool] = []

    def __call__(self, audio: np.ndarray, name: str, confident: bool = False) -> bool:
        decided = self.confirmer(audio, name, confident)
        if self.on:
            self.windows.append(np.asarray(audio, dtype=np.int16).copy())
            self.at.append(self.now - CONFIRM_AFTER_FRAMES * bw.FRAME_SECONDS)
            self.confident.append(confident)
            self.decided.append(decided)
        return decided

    def save(self, path: Path) -> None:
        """The windows and their decisions as one .npz file."""
        arrays: dict[str, Any] = {f"w{i}": w for i, w in enumerate(self.windows)}
        arrays.update(at=np.array(self.at), confident=np.array(self.confident), decided=np.array(self.decided))
        np.savez_compressed(path, **arrays)


class Keeper:
    """A confirmer that keeps each window with Whisper's phrase check of it and never wakes, so the
    detector goes on as if every doubtful score were turned down."""

    def __init__(self, transcriber: Transcriber) -> None:
        self.transcriber = transcriber
        self.asked: list[Asked] = []
        self.clip: int | None = None
        self.now = 0.0

    def __call__(self, audio: np.ndarray, name: str, confident: bool = False) -> bool:
        check = self.transcriber.check_phrase(audio, spoken_wake_phrase(name))
        self.asked.append(Asked(self.clip, self.now - CONFIRM_AFTER_FRAMES * bw.FRAME_SECONDS, confident, check))
        return False


def detections(detector: WakeWordDetector, samples: np.ndarray, keeper: Keeper | Recorder | None = None,
               peaks: list[float] | None = None, span: tuple[float, float] | None = None,
               late: list[float] | None = None) -> list[float]:
    """Feed a clip from a fresh state; the time of each wake. With `peaks` and `span`, the highest
    score within the span (and the tolerance after it) is appended to `peaks`; with `late` too,
    how long after the phrase's end the first wake in it was known."""
    detector.reset()
    found = []
    peak = 0.0
    done = 0.0  # when the daemon would have scored the frame, frames coming in real time
    for frame in frames(samples):
        if keeper is not None:
            keeper.now = frame.captured_at
        hit = detector.process(frame)
        # As in the daemon, a frame waits for the one before it, and a check runs inline.
        done = max(done, frame.captured_at) + detector.last_seconds
        if hit is not None:
            if late is not None and span is not None and not found and \
                    span[0] <= hit.at <= span[1] + bw.TOLERANCE:
                late.append(done - span[1])
            found.append(hit.at)
        if span is not None and span[0] <= frame.captured_at <= span[1] + bw.TOLERANCE:
            peak = max(peak, detector.last_scores.get(bw.WAKE_MODEL, 0.0))
    if peaks is not None:
        peaks.append(peak)
    return found


def name_confirmed(check: PhraseCheck, name: str, log_odds: float) -> bool:
    """The rule before the shipped one (`phrase_confirmed`): the name alone, spelled right, will do."""
    def says(text: str) -> bool:
        return names_wake_word(text, name, similarity=1.0)

    return says(check.heard) or (says(check.prompted) and check.log_odds >= log_odds)


def _rule(odds: float, whole: bool) -> Callable[[PhraseCheck], bool]:
    return functools.partial(phrase_confirmed if whole else name_confirmed, name=bw.WAKE_MODEL, log_odds=odds)


def confident_rule(odds: float | None, whole: bool = True) -> Callable[[PhraseCheck], bool]:
    """How a confident score's window is decided: unchecked (None) or the phrase check at `odds`,
    the phrase whole (as the daemon decides it) or the name alone (the rule before)."""
    if odds is None:
        return lambda c: True
    return _rule(odds, whole)


def doubtful_rule(odds: float, whole: bool = True) -> Callable[[PhraseCheck], bool]:
    """How a doubtful score's window is decided: the phrase check at `odds`, the phrase whole
    ("Hey Jarvis", as shipped) or the name alone."""
    return _rule(odds, whole)


#: (rule for a doubtful score's window, rule for a confident one's, which the detector asks about
#: only with `WakeWord.ConfirmConfident`; without it those wake directly and every row's is unused).
RULES: dict[str, tuple[Callable[[PhraseCheck], bool], Callable[[PhraseCheck], bool]]] = {
    "transcript names it (≥ 0.7 alike; the first check), confident unchecked":
        (lambda c: names_wake_word(c.heard, bw.WAKE_MODEL), confident_rule(None)),
    **{f"phrase check, log odds ≥ {odds:g}, confident unchecked":
       (doubtful_rule(odds), confident_rule(None)) for odds in (-3.0, -4.0, -6.0)},
    **{f"phrase check, log odds ≥ {odds:g}, confident ≥ {confident:g}":
       (doubtful_rule(odds), confident_rule(confident))
       for odds, confident in ((-3.0, -10.0), (-4.0, -10.0), (-6.0, -6.0), (-6.0, -10.0), (-6.0, -99.0))},
    "phrase check, log odds ≥ -6, confident naming the name alone ≥ -10 (the rule before)":
        (doubtful_rule(-6.0), confident_rule(-10.0, whole=False)),
    "phrase check naming the name alone, log odds ≥ -6, confident ≥ -10 (the rule before that)":
        (doubtful_rule(-6.0, whole=False), confident_rule(-10.0, whole=False)),
}


def rule_table(detector: WakeWordDetector, transcriber: Transcriber, positives: list[bw.Positive],
               stream: np.ndarray, analysis: bw.Analysis) -> str:
    """A second pass in which doubtful scores never wake, keeping every window Whisper is asked
    about; then recall, ordinary false wakes and sound-alikes woken for each rule, a wake
    followed by another within the refractory time counted once."""
    keeper = Keeper(transcriber)
    detector.confirm_with(keeper)
    direct = []
    for i, clip in enumerate(positives):
        keeper.clip = i
        direct.append(detections(detector, clip.samples, keeper))
    keeper.clip = None
    direct_negative = detections(detector, stream, keeper)

    def in_span(i: int, at: float) -> bool:
        return positives[i].span[0] <= at <= positives[i].span[1] + bw.TOLERANCE

    rows = []
    for label, (doubtful, confident) in RULES.items():
        found = [any(in_span(i, at) for at in hits) for i, hits in enumerate(direct)]
        fired = list(direct_negative)
        for asked in keeper.asked:
            if (confident if asked.confident else doubtful)(asked.check):
                if asked.clip is None:
                    fired.append(asked.at)
                elif in_span(asked.clip, asked.at):
                    found[asked.clip] = True
        wakes: list[float] = []
        for at in sorted(fired):
            if not wakes or at - wakes[-1] > detector.refractory_seconds:
                wakes.append(at)
        owners = [analysis.owner_of(min(int(round(at / bw.FRAME_SECONDS)) - 1, len(analysis.traces.stream) - 1))
                  for at in wakes]
        ordinary = sum(bw.charged(analysis.segments[j], True) for j in owners)
        alike = set(owners) & set(analysis.sound_alike_sentences)
        rows.append([label, bw.rate(sum(found), len(found)), str(ordinary),
                     f"{len(alike)}/{len(analysis.sound_alike_sentences)}"])
    return (f"### The check's rules on the {len(keeper.asked)} windows Whisper was asked about\n\n"
            + table(["rule for the doubtful scores, and the confident ones", "recall", "false wakes, ordinary audio",
                        "sound-alike sentences woken"], rows))


SECOND_ODDS = (-1.0, -2.0, -3.0, -4.0, -6.0, -8.0)
# … and the confident scores' alone, the doubtful ones' at listening.SECOND_LOG_ODDS (`--second-odds`)
SECOND_CONFIDENT_ODDS = (-4.0, -5.0, -6.0, -8.0, -10.0)


def second_reading_table(kept: Path, settings_env: dict[str, str], stream_hours: float,
                         segments: list[bw.Segment], confident_only: bool = False) -> str:
    """The windows a run kept (`--keep-windows`) that its check turned down, read again by
    `WakeWord.ConfirmSecondModel` as the daemon reads them (beam, noise suppression); the false
    wakes and sound-alikes its reading would add at each log odds. With `confident_only`, only the
    confident scores' windows, at each of their own odds (the run's second reading already turned
    the doubtful ones down at `--second-odds`). A wake within the refractory time of another counts
    once."""
    settings = load_settings(env=settings_env)
    model = settings.wake_word.confirm_second_model
    second = load_second_check(SecondCheckSlice.of(settings))
    if second is None:
        raise SystemExit("no second model to read with: WakeWord.ConfirmSecondModel is not set, or is "
                         "SpeechToText.Model")
    reader = second.cleaned_by(NoiseSuppressor(WAKE_CHECK_NOISE_SUPPRESSION))
    data = np.load(kept)
    at, decided = data["at"], data["decided"]
    woken = [float(t) for t, d in zip(at, decided, strict=True) if d]
    checks: list[tuple[float, PhraseCheck]] = []
    seconds = []
    asked = ~decided & data["confident"] if confident_only else ~decided
    for i in np.flatnonzero(asked):
        check = reader.check_phrase(data[f"w{i}"], spoken_wake_phrase(bw.WAKE_MODEL))
        seconds.append(check.seconds)
        checks.append((float(at[i]), check))
    trace_len = int(stream_hours * 3600 / bw.FRAME_SECONDS)
    confident = [bool(c) for c in data["confident"][asked]]
    rules: list[tuple[str, float | None, float | None]] = [
        ("as the run decided" if confident_only else "first reading only", None, None)]
    if not confident_only:
        rules += [(f"{model} again, log odds ≥ {odds:g}", odds, odds) for odds in SECOND_ODDS]
    doubtful = listening.SECOND_LOG_ODDS  # `--second-odds`
    rules += [(f"{model} again, doubtful ≥ {doubtful:g}, confident ≥ {odds:g}",
               None if confident_only else doubtful, odds) for odds in SECOND_CONFIDENT_ODDS]
    rows = []
    for label, doubtful_odds, confident_odds in rules:
        fired = list(woken)
        for (t, c), sure in zip(checks, confident, strict=True):
            odds = confident_odds if sure else doubtful_odds
            if odds is not None and phrase_confirmed(c, bw.WAKE_MODEL, log_odds=odds):
                fired.append(t)
        trace = np.zeros(trace_len, dtype=np.float32)
        last = -1e9
        for t in sorted(fired):
            if t - last > settings.wake_word.refractory_seconds:
                trace[min(int(round(t / bw.FRAME_SECONDS)) - 1, trace_len - 1)] = 1.0
                last = t
        analysis = bw.Analysis([], bw.VariantTraces([], trace, 0.0, 0.0), segments)
        ordinary = analysis.false_wakes(1.0, 1, ordinary=True)
        rows.append([label,
                     f"{len(ordinary)} ({len(ordinary) / analysis.hours[True]:.2f}/h)",
                     f"{len(analysis.sound_alikes_woken(1.0, 1))}/{len(analysis.sound_alike_sentences)}"])
        for _, seg in ordinary:
            rows[-1].append(f"{seg.category}: {bw.excerpt(seg, seg.end)}")
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    return (f"### {model} reading again the {len(checks)} windows the first reading turned down "
            f"({len(at)} kept; {model} ≈{np.median(seconds):.2f} s each, median)\n\n"
            + table(["rule", "false wakes, ordinary audio", "sound-alike sentences woken"]
                       + ["false wake"] * (width - 3), rows))


def lateness(late: list[float]) -> str:
    """Median and 90th percentile of how long after the phrase's end wakes were known."""
    if not late:
        return "–"
    return f"{np.median(late):.2f} / {percentile(late, 90):.2f} s (max {max(late):.2f} s)"


def held_out_report(positives: list[bw.Positive], found: list[bool], peaks: list[float], asked: int,
                    seconds: float, late: list[float], held_out: int) -> str:
    """Recall on the held-out clips: overall, by voice, pace, noise and layout, and each miss."""
    lines = [f"## The wake word as shipped, on held-out clips (bench/wake_live.py --held-out {held_out})\n",
             f"{len(positives)} clips; recall **{bw.rate(sum(found), len(found))}**; Whisper asked {asked} times; "
             f"phrase end → wake known, median / p90 {lateness(late)}; wall time {seconds / 60:.1f} min.\n"]
    for title, key in (("voice", lambda c: c.voice), ("pace", lambda c: c.speed), ("noise", lambda c: c.noise),
                       ("layout", lambda c: c.layout)):
        groups: dict[str, list[bool]] = defaultdict(list)
        for clip, ok in zip(positives, found, strict=True):
            groups[key(clip)].append(ok)
        lines.append(table([title, "recall"], [[k, bw.rate(sum(v), len(v))] for k, v in groups.items()]))
    lines += [f"- missed: {c.source}, {c.layout}, {c.noise}: highest score {peak:.4f}"
              for c, ok, peak in zip(positives, found, peaks, strict=True) if not ok]
    return "\n".join(lines)


def main() -> int:
    """Run the shipped detector over the bench material; markdown on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--set", action="append", default=[], metavar="Section__Key=VALUE")
    parser.add_argument("--negative-scale", type=float, default=1.0,
                        help="bench/wake.py's negative stream at this scale (1 ≈ 1.4 h; built and cached on first use)")
    parser.add_argument("--negative-seed", type=int, default=0,
                        help="another seed builds an independent negative stream of the same recipe")
    parser.add_argument("--keep-windows", type=Path, default=None, metavar="FILE.npz",
                        help="keep every window checked in the negative stream, and the decision")
    parser.add_argument("--second-reading", type=Path, default=None, metavar="FILE.npz",
                        help="only read again, by WakeWord.ConfirmSecondModel, the windows a run kept "
                             "(--keep-windows, with the same --negative-scale and --negative-seed)")
    parser.add_argument("--confident-only", action="store_true",
                        help="with --second-reading: only the confident scores' windows, at their own odds")
    parser.add_argument("--rules", action="store_true", help="also decide the asked windows by other rules")
    parser.add_argument("--held-out", type=int, nargs="?", const=1, default=0, choices=tuple(bw.HELD_OUT_SETS),
                        metavar="SET", help="recall only, on bench/wake.py's held-out clips (set 1 to 4): voices, paces, words "
                             "and noises no setting was chosen on")
    parser.add_argument("--second-odds", type=float, default=listening.SECOND_LOG_ODDS, metavar="LOG_ODDS",
                        help="the odds the second model's reading of a doubtful score needs (default: %(default)s)")
    parser.add_argument("--second-confident-odds", type=float, default=listening.SECOND_CONFIDENT_LOG_ODDS,
                        metavar="LOG_ODDS", help="the odds the second model's reading of a confident score "
                        "needs (default: %(default)s)")
    parser.add_argument("--confirm-before", type=float, default=wake_module.CONFIRM_BEFORE_SECONDS,
                        metavar="SECONDS", help="audio before the crossing that Whisper checks (default: %(default)s)")
    args = parser.parse_args()
    keep_clips(args.cache / "clips")
    wake_module.CONFIRM_BEFORE_SECONDS = args.confirm_before  # read when the detector is built
    listening.SECOND_CONFIDENT_LOG_ODDS = args.second_confident_odds  # read at each check
    listening.SECOND_LOG_ODDS = args.second_odds
    env = {f"ELARA__{k}": v for k, v in (item.split("=", 1) for item in args.set)}
    if args.second_reading is not None:
        stream, segments = bw.cached_negatives(args.cache, args.negative_scale, args.negative_seed)
        print(second_reading_table(args.second_reading, env, len(stream) / bw.SAMPLE_RATE / 3600, segments,
                                   args.confident_only))
        return 0
    settings = load_settings(env=env)
    wake = settings.wake_word
    detector = load_wake_word(WakeWordSlice.of(settings).without_verifiers())
    transcriber = load_whisper(SpeechToTextSlice.of(settings)) if wake.confirm_from > 0 else None
    recorder = None
    second = None
    if transcriber is not None:
        second = load_second_check(SecondCheckSlice.of(settings))
        wire_wake_check(detector, settings, transcriber, second)
        if args.keep_windows is not None and detector.confirmer is not None:
            recorder = Recorder(detector.confirmer)
            detector.confirm_with(recorder)
    started = time.monotonic()
    positives = bw.build_positives(held_out=args.held_out)
    log("positives")
    peaks: list[float] = []
    late: list[float] = []
    found = [any(c.span[0] <= at <= c.span[1] + bw.TOLERANCE
                 for at in detections(detector, c.samples, peaks=peaks, span=c.span, late=late))
             for c in positives]
    asked_positive = detector.confirmations["asked"]
    if args.held_out:
        print(held_out_report(positives, found, peaks, asked_positive, time.monotonic() - started, late,
                              args.held_out))
        return 0
    stream, segments = bw.cached_negatives(args.cache, args.negative_scale, args.negative_seed)
    log("negatives")
    before = dict(detector.confirmations)
    if recorder is not None:
        recorder.on = True
    fired = detections(detector, stream, recorder)
    if recorder is not None:
        recorder.on = False
        recorder.save(args.keep_windows)
    asked = detector.confirmations["asked"] - before["asked"]
    # Reuse bench/wake.py's accounting: a trace that is 1 at each wake frame and 0 elsewhere.
    trace = np.zeros(int(len(stream) / bw.SAMPLE_RATE / bw.FRAME_SECONDS), dtype=np.float32)
    for at in fired:
        trace[min(int(round(at / bw.FRAME_SECONDS)) - 1, len(trace) - 1)] = 1.0
    analysis = bw.Analysis(positives, bw.VariantTraces([], trace, 0.0, 0.0), segments)
    ordinary = analysis.false_wakes(1.0, 1, ordinary=True)
    groups: dict[str, list[bool]] = defaultdict(list)
    for clip, ok in zip(positives, found, strict=True):
        for key in (clip.voice, clip.noise, clip.layout):
            groups[key].append(ok)
    print("## The wake word as shipped (bench/wake_live.py)\n")
    print(f"threshold {wake.threshold:g} × {wake.trigger_level}, Silero gate {wake.vad_threshold:g}, "
          f"Whisper check from {wake.confirm_from:g} on {args.confirm_before:g} s before the crossing "
          f"({settings.speech_to_text.model}, beam {wake.confirm_beam_size}, "
          f"{'read again by ' + str(wake.confirm_second_model) if second is not None else 'no second model'}, "
          f"noise suppression {WAKE_CHECK_NOISE_SUPPRESSION}); {len(positives)} clips, {analysis.hours[True]:.2f} h of "
          f"ordinary audio; wall time {(time.monotonic() - started) / 60:.1f} min.\n")
    rows = [["recall", bw.rate(sum(found), len(found))],
            ["phrase end → wake known, median / p90", lateness(late)],
            ["false wakes, ordinary audio", f"{len(ordinary)} ({len(ordinary) / analysis.hours[True]:.2f}/h)"],
            ["sound-alike sentences woken",
             f"{len(analysis.sound_alikes_woken(1.0, 1))}/{len(analysis.sound_alike_sentences)}"],
            ["Whisper checks", f"{asked_positive} on the clips; {asked} in the negatives "
                               f"({asked / (len(stream) / bw.SAMPLE_RATE / 3600):.1f}/h)"]]
    print(table(["", "result"], rows))
    print(table(["group", "recall"], [[k, bw.rate(sum(v), len(v))] for k, v in groups.items()]))
    for _, seg in ordinary:
        print(f"- false wake: {seg.category}: {bw.excerpt(seg, seg.end)}")
    for clip, ok, peak in zip(positives, found, peaks, strict=True):
        if not ok:
            print(f"- missed: {clip.source}, {clip.layout}, {clip.noise}: highest score {peak:.4f}")
    if args.rules and transcriber is not None:
        log("the rules' pass")
        checker = transcriber.with_beam_size(wake.confirm_beam_size)  # as transcript_confirmer makes it
        print("\n" + rule_table(detector, checker, positives, stream, analysis))
    return 0


if __name__ == "__main__":
    sys.exit(main())
