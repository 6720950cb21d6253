#!/usr/bin/env python3
"""Benchmark end-of-turn signals offline: finished questions vs questions with a thinking pause.

Clips (synthesized on the spot, never downloaded, cached as WAV files): each question whole
(finished) and with a pause of 0.6–1.2 s inside (hesitant), spoken in one breath — espeak-ng
with an SSML `<break>`, Piper with a comma whose pause is stretched — in Piper en_US-joe-medium
(two paces) and four espeak-ng voices. Fragments are never glued: a fragment spoken alone has
the falling pitch of a finished sentence, which no turn detector should be asked to see through.

Every clip is fed to Silero VAD frame by frame as the listener would (80 ms frames, threshold
0.5). At each silence that reaches 240 ms (where the listener starts its speculative transcript)
the signals are computed once on the audio so far: Smart Turn v3.2's probability, Whisper
tiny.en's transcript and its ending (elara.voice.turn.transcript_ending), and the VAD's trajectory.
Then each strategy's thresholds are swept for the fastest median commit after finished questions
with no hesitant pause cut, and the table is printed (markdown on stdout, progress on stderr).

Smart Turn (`bench/smart_turn.py`) is not shipped: it comes in the pipecat-ai wheel, which Elara
does not install. Without it the Smart Turn variants are skipped, and the report says so; for them:

    .venv/bin/python -m pip install --no-deps pipecat-ai==1.14.0

    .venv/bin/python -m bench.turn [--cache DIR] [--json moments.json] [--check-features]
    .venv/bin/python -m bench.turn --from-json moments.json   # re-analyse, no models
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench.common import (
    PAUSES_MS,
    QUESTIONS,
    keep_clips,
    log,
    percentile,
    question,
    source_name,
    table,
    voiced_bounds,
)
from bench.smart_turn import INSTALL, TurnProbabilities, smart_turn_path, verdict_with
from elara.audio.frames import FRAME_SECONDS, SAMPLE_RATE
from elara.voice.turn import (
    UNFINISHED_WORDS,
    Ending,
    PauseSignals,
    TurnThresholds,
    Verdict,
    transcript_ending,
)
from tests.rig.voice_clips import frames, silence

WAKE = ("hey jarvis",)
FRAME_MS = round(FRAME_SECONDS * 1000)
JUDGE_AT_MS = 240  # EarlyStartMs 200 → the third silent 80 ms frame
VAD_THRESHOLD = 0.5
PRE_ROLL_MS = 300
LEAD_S, TAIL_S = 0.5, 2.6  # silence before the speech, and after it (longer than MaxPauseMs)
MAX_PAUSE_MS = 2000
FINISHED_MS = 240
END_SILENCE_MS = 600

SOURCES = (
    ("piper", 1.0), ("piper", 1.2),
    ("espeak", "en-us", 150), ("espeak", "en-us+f3", 165), ("espeak", "en-gb", 160), ("espeak", "en-us+m3", 175),
)


def voice_of(source: tuple) -> str:
    """The voice (Piper's paces are one voice)."""
    return "Piper joe" if source[0] == "piper" else f"espeak {source[1]}"


# ---------------------------------------------------------------------------------------------
# clips


@dataclass
class Clip:
    """One clip: which question, voice, and the pause inside (None: finished, no pause)."""

    name: str
    source: str
    voice: str
    text: str
    pause_ms: int | None
    samples: np.ndarray
    speech_end: float  # seconds, the last voiced sample


def build_clips() -> list[Clip]:
    """Every question × source, whole and with a pause (pauses cycle through PAUSES_MS)."""
    clips: list[Clip] = []
    k = 0
    for source in SOURCES:
        for q, (first, rest) in enumerate(QUESTIONS):
            for pause in (None, PAUSES_MS[k % len(PAUSES_MS)]):
                speech = question(source, first, rest, pause)
                samples = np.concatenate([silence(LEAD_S), speech, silence(TAIL_S)])
                name = f"q{q:02d} {source_name(source)} " + ("whole" if pause is None else f"pause {pause}")
                clips.append(Clip(name, source_name(source), voice_of(source), f"{first} {rest}", pause,
                                  samples, LEAD_S + voiced_bounds(speech)[1]))
            k += 1
        log(f"clips: {source_name(source)} ready ({len(clips)})")
    return clips


# ---------------------------------------------------------------------------------------------
# signals at each pause


@dataclass
class Moment:
    """One pause that reached JUDGE_AT_MS, and the signals there."""

    clip: str
    source: str
    voice: str
    hesitant_clip: bool
    kind: str  # "end" (after the last speech), "hesitation" (the inserted pause), "pause" (other)
    silence_ms: float  # how long this silence lasted (VAD); the end's is the tail
    onset_lag_ms: float  # VAD silence onset minus the true end of speech (end moments)
    smart_turn: float | None  # None: not measured (pipecat-ai is not installed)
    smart_turn_ms: float  # wall
    smart_turn_cpu_ms: float
    transcript: str
    whisper_ms: float
    whisper_cpu_ms: float
    ending: str
    vad_tail: float  # mean VAD probability of the last 3 speech frames before the silence
    last_run_ms: float  # length of the last stretch of speech before the silence


def vad_track(vad, samples: np.ndarray) -> np.ndarray:
    """Silero's probability for each 80 ms frame, from a fresh state."""
    vad.reset()
    return np.array([vad.speech_probability(frame) for frame in frames(samples)])


def silence_runs(speech: np.ndarray) -> list[tuple[int, int]]:
    """(first, last+1) frame indices of non-speech runs after the first speech frame."""
    runs, start = [], None
    begun = False
    for i, s in enumerate(speech):
        if s:
            if start is not None and begun:
                runs.append((start, i))
            start, begun = None, True
        elif begun and start is None:
            start = i
    if start is not None and begun:
        runs.append((start, len(speech)))
    return runs


def measure(clips: list[Clip]) -> list[Moment]:
    """Run VAD, Smart Turn (when installed) and Whisper over every clip; one Moment per judged pause."""
    from bench.smart_turn import SmartTurn
    from elara.voice.models import resolve_whisper
    from elara.voice.stt import Transcriber
    from elara.voice.vad import SileroVad

    vad = SileroVad()
    path = smart_turn_path()
    turn = SmartTurn(path, threads=1) if path is not None else None
    stt = Transcriber(resolve_whisper("tiny.en").path, window_seconds=10.0)
    if turn is None:
        log(f"Smart Turn variants skipped: pipecat-ai is not installed ({INSTALL})")
    else:
        log(f"Smart Turn loaded in {turn.load_seconds:.2f} s")
        turn.probability(silence(1.0))  # first runs are slow
    log(f"Whisper tiny.en loaded in {stt.load_seconds:.2f} s")
    stt.transcribe(silence(1.0))
    moments: list[Moment] = []
    frame_samples = int(FRAME_SECONDS * SAMPLE_RATE)
    for n, clip in enumerate(clips):
        probs = vad_track(vad, clip.samples)
        speech = probs >= VAD_THRESHOLD
        runs = silence_runs(speech)
        first_speech = int(np.argmax(speech))
        judged = [(a, b) for a, b in runs if (b - a) * FRAME_MS >= JUDGE_AT_MS]
        internal = [r for r in judged if r[1] < len(speech)]
        longest = max(internal, key=lambda r: r[1] - r[0]) if internal and clip.pause_ms else None
        for a, b in judged:
            end = b >= len(speech)
            kind = "end" if end else ("hesitation" if (a, b) == longest else "pause")
            cut = (a + JUDGE_AT_MS // FRAME_MS) * frame_samples  # the audio so far at the judgment
            start = max(0, first_speech * frame_samples - PRE_ROLL_MS * SAMPLE_RATE // 1000)
            audio = clip.samples[start:cut]
            c0, w0 = time.process_time(), time.perf_counter()
            p = turn.probability(audio) if turn is not None else None
            st_cpu, st_wall = time.process_time() - c0, time.perf_counter() - w0
            # The speculative transcript covers the speech and 200 ms of the silence (the span's tail).
            spoken = clip.samples[start: a * frame_samples + 200 * SAMPLE_RATE // 1000]
            c0, w0 = time.process_time(), time.perf_counter()
            text = stt.transcribe(spoken).text
            w_cpu, w_wall = time.process_time() - c0, time.perf_counter() - w0
            speech_frames = np.flatnonzero(speech[:a])
            run_start = a
            while run_start > 0 and speech[run_start - 1]:
                run_start -= 1
            moments.append(Moment(
                clip=clip.name, source=clip.source, voice=clip.voice, hesitant_clip=clip.pause_ms is not None,
                kind=kind, silence_ms=(b - a) * FRAME_MS,
                onset_lag_ms=(a * FRAME_SECONDS - clip.speech_end) * 1000 if end else 0.0,
                smart_turn=p, smart_turn_ms=st_wall * 1000, smart_turn_cpu_ms=st_cpu * 1000,
                transcript=text, whisper_ms=w_wall * 1000, whisper_cpu_ms=w_cpu * 1000,
                ending=transcript_ending(text, WAKE).value,
                vad_tail=float(np.mean(probs[speech_frames[-3:]])) if len(speech_frames) else 0.0,
                last_run_ms=(a - run_start) * FRAME_MS,
            ))
        if n % 20 == 19:
            log(f"measured {n + 1}/{len(clips)} clips ({len(moments)} pauses)")
    return moments


# ---------------------------------------------------------------------------------------------
# strategies and the sweep


def frame_ceil(ms: float) -> float:
    """The silence at which a wait of `ms` is met, counted in 80 ms frames."""
    return float(np.ceil(ms / FRAME_MS) * FRAME_MS)


@dataclass(frozen=True)
class Strategy:
    """A named rule: moment → verdict, with the compute it needs on the critical path."""

    name: str
    uses_smart_turn: bool
    uses_transcript: bool
    thresholds: TurnThresholds | None = None  # None: fixed silence or the VAD rule
    probabilities: TurnProbabilities | None = None  # with uses_smart_turn
    fixed_ms: int | None = None
    vad_rule: tuple[str, float, bool] | None = None  # (feature, threshold, finished when above)

    def verdict(self, m: Moment) -> Verdict:
        """The verdict this strategy gives at a moment."""
        if self.fixed_ms is not None:
            return Verdict.NO_SIGNAL
        if self.vad_rule is not None:
            feature, threshold, above = self.vad_rule
            value = getattr(m, feature)
            return Verdict.FINISHED if (value >= threshold) == above else Verdict.UNKNOWN
        assert self.thresholds is not None
        signals = PauseSignals(0.0, m.transcript if self.uses_transcript else None)
        p = m.smart_turn if self.uses_smart_turn else None
        return verdict_with(p, signals, self.thresholds, self.probabilities)[0]

    def wait_ms(self, verdict: Verdict, uncertain_ms: int) -> float:
        """Silence before committing, for a verdict."""
        if self.fixed_ms is not None:
            return float(self.fixed_ms)
        return {Verdict.FINISHED: FINISHED_MS, Verdict.UNFINISHED: MAX_PAUSE_MS}.get(verdict, uncertain_ms)

    def compute_ms(self, m: Moment) -> float:
        """Wall time to get the signals after the judgment point (run one after the other)."""
        return (m.smart_turn_ms if self.uses_smart_turn else 0.0) + (m.whisper_ms if self.uses_transcript else 0.0)


@dataclass
class Outcome:
    """How a strategy with its thresholds did over all moments."""

    strategy: Strategy
    uncertain_ms: int
    cut_hesitant: int  # hesitant clips cut at their pause
    cut_pause: int  # other pauses cut (in any clip)
    latencies: list[float]  # ms, true end of speech → commit, per end moment
    fast: int  # end moments committed at FINISHED_MS


def evaluate(strategy: Strategy, moments: list[Moment], uncertain_ms: int) -> Outcome:
    """Cut-offs and end latencies for one strategy."""
    cut_hesitant, cut_pause, latencies, fast = set(), 0, [], 0
    for m in moments:
        verdict = strategy.verdict(m)
        wait = strategy.wait_ms(verdict, uncertain_ms)
        # Signals are ready at JUDGE_AT_MS plus their compute; a commit comes no earlier.
        ready = JUDGE_AT_MS + strategy.compute_ms(m) if strategy.fixed_ms is None else 0.0
        commit = max(frame_ceil(wait), ready)
        if m.kind == "end":
            latencies.append(m.onset_lag_ms + commit)
            fast += verdict is Verdict.FINISHED
        elif frame_ceil(wait) < m.silence_ms:  # committed before speech came back
            if m.kind == "hesitation":
                cut_hesitant.add(m.clip)
            else:
                cut_pause += 1
    return Outcome(strategy, uncertain_ms, len(cut_hesitant), cut_pause, latencies, fast)


PROBS = (0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999, 1.01)
UNFINISHED_PROBS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3)
UNCERTAIN = (600, 1000, 1300, 1500, MAX_PAUSE_MS)


def candidates(moments: list[Moment]) -> dict[str, list[Strategy]]:
    """Every strategy family with its threshold grid."""
    fams: dict[str, list[Strategy]] = {
        f"fixed silence {END_SILENCE_MS} ms (today)": [Strategy("fixed", False, False, fixed_ms=END_SILENCE_MS)],
        "fixed silence, no cut-offs": [Strategy("fixed", False, False, fixed_ms=ms)
                                       for ms in range(240, 2081, 80)],
        "transcript ending alone": [Strategy("transcript", False, True, TurnThresholds(wake_phrases=WAKE))],
    }
    if smart_turn_measured(moments):
        fams["Smart Turn alone"], fams["Smart Turn + transcript ending"] = smart_turn_strategies()
    fams["VAD trajectory alone"] = [Strategy("vad", False, False, vad_rule=(feature, v, above))
                                    for feature in ("vad_tail", "last_run_ms")
                                    for v in sorted({getattr(m, feature) for m in moments})
                                    for above in (True, False)]
    return fams


def smart_turn_measured(moments: list[Moment]) -> bool:
    """Whether Smart Turn scored these pauses (pipecat-ai was installed when they were measured)."""
    return bool(moments) and all(m.smart_turn is not None for m in moments)


def smart_turn_strategies() -> tuple[list[Strategy], list[Strategy]]:
    """Smart Turn alone, and Smart Turn with the transcript's ending, over their threshold grids."""
    alone: list[Strategy] = []
    with_text: list[Strategy] = []
    for f in PROBS:
        for u in UNFINISHED_PROBS:
            if u > f:
                continue
            alone.append(Strategy("st", True, False, TurnThresholds(wake_phrases=WAKE),
                                  probabilities=TurnProbabilities(finished=f, confirmed=f, unfinished=u)))
            for c in PROBS:
                if u <= c <= f:
                    with_text.append(Strategy("st+text", True, True, TurnThresholds(wake_phrases=WAKE),
                                              probabilities=TurnProbabilities(finished=f, confirmed=c, unfinished=u)))
    return alone, with_text


def best(family: list[Strategy], moments: list[Moment], max_cuts: int = 0) -> Outcome:
    """The setting with at most `max_cuts` cut-offs and the lowest median end latency (then p90);
    the least-cut setting if none is within the budget."""
    outcomes = [evaluate(s, moments, u) for s in family for u in (UNCERTAIN if s.fixed_ms is None else (0,))]
    return min(outcomes, key=lambda o: (max(o.cut_hesitant + o.cut_pause - max_cuts, 0),
                                        float(np.median(o.latencies)), float(percentile(o.latencies, 90))))


def pause_group(clip: str) -> str:
    """Where a question's pause falls: after a function word, after a whole clause, after the wake phrase."""
    first = QUESTIONS[int(clip[1:3])][0]
    if first.lower().startswith("hey jarvis"):
        return "after the wake phrase"
    return "after a function word" if first.split()[-1].lower() in UNFINISHED_WORDS else "after a whole clause"


def describe(o: Outcome) -> str:
    """The thresholds an outcome used, in words."""
    s = o.strategy
    if s.fixed_ms is not None:
        return f"end after {s.fixed_ms} ms"
    if s.vad_rule is not None:
        feature, v, above = s.vad_rule
        return f"finished if {feature} {'≥' if above else '<'} {v:g}; else wait {o.uncertain_ms} ms"
    parts = []
    if s.uses_smart_turn:
        t = s.probabilities
        assert t is not None
        parts.append(f"p ≥ {t.finished:g} finished" if t.finished <= 1 else "p alone never finishes")
        if s.uses_transcript:
            parts.append(f"p ≥ {t.confirmed:g} with a finished sentence")
        parts.append(f"p < {t.unfinished:g} unfinished")
    parts.append(f"undecided waits {o.uncertain_ms} ms")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# report


def report(moments: list[Moment], clips_info: dict) -> str:
    """The markdown report."""
    ends = [m for m in moments if m.kind == "end"]
    hes = [m for m in moments if m.kind == "hesitation"]
    others = [m for m in moments if m.kind == "pause"]
    out = ["# End-of-turn signals\n",
           f"{clips_info['finished']} finished and {clips_info['hesitant']} hesitant clips "
           f"({len(QUESTIONS)} questions × {len(SOURCES)} sources: {', '.join(source_name(s) for s in SOURCES)}); "
           f"pauses {', '.join(map(str, PAUSES_MS))} ms (hesitant clips: {len(hes)} pauses judged, silence by VAD "
           f"{min((m.silence_ms for m in hes), default=0):.0f}–{max((m.silence_ms for m in hes), default=0):.0f} ms); "
           f"{len(others)} other pauses ≥ {JUDGE_AT_MS} ms; {len(ends)} question ends. Signals measured once, "
           f"{JUDGE_AT_MS} ms into each silence. A commit after a finished question waits {FINISHED_MS} ms; "
           f"unfinished waits {MAX_PAUSE_MS} ms (MaxPauseMs). Latency = true end of speech → commit "
           "(VAD onset lag + the wait, no earlier than the judgment point plus the signals' wall time).\n"]
    rows = []
    for name, family in candidates(moments).items():
        o = best(family, moments)
        lat = np.array(o.latencies)
        cuts = o.cut_hesitant + o.cut_pause
        rows.append([name, describe(o), f"{o.cut_hesitant}/{clips_info['hesitant']}", str(o.cut_pause),
                     f"{np.median(lat):.0f}", f"{percentile(lat, 90):.0f}",
                     f"{o.fast}/{len(ends)}", "yes" if cuts == 0 else "**no**"])
    out.append(table(["signal", "best thresholds (zero cut-offs)", "hesitant cut", "other pauses cut",
                      "median ms", "p90 ms", "ends judged finished", "zero cut-offs"], rows))

    out.append("## Latency for a budget of cut-offs (median / p90 ms, and cut-offs spent)\n")
    budgets = (0, 3, 8, 15)
    fams = candidates(moments)
    rows = []
    for name, family in fams.items():
        if name.startswith("fixed silence 600"):
            continue
        cells = []
        for k in budgets:
            o = best(family, moments, k)
            cells.append(f"{np.median(o.latencies):.0f} / {percentile(o.latencies, 90):.0f} "
                         f"({o.cut_hesitant + o.cut_pause} cut)")
        rows.append([name, *cells])
    out.append(table(["signal", *(f"≤ {k} cut-offs" for k in budgets)], rows))

    out.append(groups_section(moments, fams))
    out.append(cpu_section(moments))
    if not smart_turn_measured(moments):
        out.append(f"Smart Turn variants skipped: pipecat-ai was not installed ({INSTALL}).\n")
        return "\n".join(out)
    out.extend(smart_turn_sections(moments))
    return "\n".join(out)


def groups_section(moments: list[Moment], fams: dict[str, list[Strategy]]) -> str:
    """Each signal's best thresholds with zero cut-offs, by where the pause falls."""
    rows = []
    for group in ("after a function word", "after the wake phrase", "after a whole clause"):
        # The group's hesitant clips, and every question end (the latency side stays the same).
        subset = [m for m in moments if m.kind == "end" or pause_group(m.clip) == group and m.hesitant_clip]
        n = len({m.clip for m in subset if m.kind == "hesitation"})
        for name, family in fams.items():
            if name.startswith("fixed silence 600"):
                continue
            o = best(family, subset)
            rows.append([group, str(n), name, describe(o), f"{o.cut_hesitant + o.cut_pause}",
                         f"{np.median(o.latencies):.0f}", f"{percentile(o.latencies, 90):.0f}"])
    return ("## Zero cut-offs, by where the pause falls (each group's own best thresholds)\n\n"
            + table(["pause", "hesitant clips", "signal", "best thresholds", "cut", "median ms", "p90 ms"], rows))


def cpu_section(moments: list[Moment]) -> str:
    """The CPU each signal takes per judgment."""
    wh = np.array([m.whisper_ms for m in moments])
    wh_cpu = np.array([m.whisper_cpu_ms for m in moments])
    started = time.perf_counter()
    for m in moments:
        transcript_ending(m.transcript, WAKE)
    ending_us = (time.perf_counter() - started) / max(1, len(moments)) * 1e6
    rows = []
    if smart_turn_measured(moments):
        st = np.array([m.smart_turn_ms for m in moments])
        st_cpu = np.array([m.smart_turn_cpu_ms for m in moments])
        rows.append(["Smart Turn v3.2 (1 thread, features included)", f"{np.median(st):.0f}",
                     f"{percentile(st, 90):.0f}", f"{np.median(st_cpu):.0f}"])
    rows += [
        ["Whisper tiny.en speculative transcript", f"{np.median(wh):.0f}", f"{percentile(wh, 90):.0f}",
         f"{np.median(wh_cpu):.0f}"],
        ["transcript ending (pure)", f"{ending_us / 1000:.3f}", "", f"{ending_us / 1000:.3f}"],
        ["VAD trajectory", "0 (the VAD runs on every frame anyway)", "", "0"],
    ]
    return "## CPU per judgment\n\n" + table(["signal", "wall median ms", "wall p90 ms", "CPU median ms"], rows)


def smart_turn_sections(moments: list[Moment]) -> list[str]:
    """Smart Turn's probability by kind of pause and by voice, and the pauses it scored."""
    ends = [m for m in moments if m.kind == "end"]
    hes = [m for m in moments if m.kind == "hesitation"]
    others = [m for m in moments if m.kind == "pause"]

    def p(m: Moment) -> float:
        assert m.smart_turn is not None
        return m.smart_turn

    out = ["## Signal values by kind of pause\n"]
    rows = []
    for label, group in (("question ends", ends), ("hesitations", hes), ("other pauses", others)):
        if not group:
            continue
        ps = np.array([p(m) for m in group])
        endings = {e.value: sum(m.ending == e.value for m in group) for e in Ending}
        rows.append([label, str(len(group)), f"{np.min(ps):.3f}", f"{percentile(ps, 10):.3f}",
                     f"{np.median(ps):.3f}", f"{np.max(ps):.3f}",
                     " / ".join(f"{endings[k]}" for k in ("finished", "unfinished", "unknown"))])
    out.append(table(["pauses", "n", "Smart Turn min", "p10", "median", "max", "ending finished / unfinished / unknown"],
                     rows))

    out.append("## By voice (Smart Turn median at ends / max at hesitations)\n")
    rows = []
    for voice in dict.fromkeys(m.source for m in moments):
        e = [p(m) for m in ends if m.source == voice]
        h = [p(m) for m in hes if m.source == voice]
        rows.append([voice, f"{np.median(e):.3f}" if e else "–", f"{np.min(e):.3f}" if e else "–",
                     f"{np.max(h):.3f}" if h else "–"])
    out.append(table(["source", "ends median", "ends min", "hesitations max"], rows))

    out.append("## Hesitations: transcripts and Smart Turn\n")
    rows = [[m.clip, f"{m.silence_ms:.0f}", f"{p(m):.3f}", m.transcript.replace("|", "/"), m.ending]
            for m in sorted(hes, key=lambda m: -p(m))]
    out.append(table(["clip", "silence ms", "Smart Turn", "speculative transcript", "ending"], rows))
    rows = [[m.clip, f"{p(m):.3f}", m.transcript.replace("|", "/"), m.ending] for m in sorted(ends, key=p)[:15]]
    out.append("## Question ends with the lowest Smart Turn\n")
    out.append(table(["clip", "Smart Turn", "transcript", "ending"], rows))
    if others:
        rows = [[m.clip, f"{m.silence_ms:.0f}", f"{p(m):.3f}", m.transcript.replace("|", "/"), m.ending]
                for m in others]
        out.append("## Other pauses ≥ 240 ms\n")
        out.append(table(["clip", "silence ms", "Smart Turn", "transcript", "ending"], rows))
    return out


# ---------------------------------------------------------------------------------------------
# feature check


def check_features(clips: list[Clip]) -> str:
    """faster-whisper's features vs pipecat's numpy features on real clips, and the model on both."""
    import importlib.util

    from bench.smart_turn import SmartTurn, TurnFeatures, model_window

    path = smart_turn_path()
    if path is None:
        log(f"feature check skipped: pipecat-ai is not installed ({INSTALL})")
        return f"Feature check skipped: pipecat-ai was not installed ({INSTALL}).\n"
    spec = importlib.util.spec_from_file_location("_pcf", path.parents[1] / "_whisper_features.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    turn, ours = SmartTurn(path), TurnFeatures()
    session = turn._session
    rows, diffs, flips = [], [], 0
    for clip in clips:
        # The utterance and 240 ms of silence after it: what the model sees at the judgment.
        audio = clip.samples[: int((clip.speech_end + JUDGE_AT_MS / 1000) * SAMPLE_RATE)]
        ref = module.compute_whisper_log_mel_features(model_window(audio), do_normalize=True)
        got = ours(audio)
        p_ref = float(session.run(None, {"input_features": ref[None]})[0].reshape(-1)[0])
        p_got = float(session.run(None, {"input_features": got[None]})[0].reshape(-1)[0])
        diffs.append(float(np.max(np.abs(got - ref))))
        if abs(p_ref - p_got) > 0.01:
            flips += 1
            rows.append([clip.name, f"{diffs[-1]:.2e}", f"{p_ref:.4f}", f"{p_got:.4f}"])
    return ("## Features: faster-whisper vs pipecat's numpy\n\n"
            f"{len(clips)} clips (the utterance + {JUDGE_AT_MS} ms of silence): largest feature difference "
            f"{max(diffs):.1e} (features span about -1..1.5); the model's output differs by more than 0.01 "
            f"on {flips} clips:\n\n" + table(
                ["clip", "max |Δ feature|", "p (pipecat features)", "p (faster-whisper features)"], rows))


def main() -> None:
    """Build the clips, measure, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", help="where synthesized clips are kept (default: a temporary directory)")
    parser.add_argument("--json", help="write the measured pauses here")
    parser.add_argument("--from-json", help="re-analyse pauses measured before (no models loaded)")
    parser.add_argument("--check-features", action="store_true", help="compare the feature extractors too")
    args = parser.parse_args()
    if args.cache:
        keep_clips(Path(args.cache))
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
        moments = [Moment(**m) for m in data["moments"]]
        print(report(moments, data["clips"]))
        return
    clips = build_clips()
    info = {"finished": sum(c.pause_ms is None for c in clips), "hesitant": sum(c.pause_ms is not None for c in clips)}
    extra = check_features(clips) if args.check_features else ""
    moments = measure(clips)
    if args.json:
        Path(args.json).write_text(json.dumps({"clips": info, "moments": [asdict(m) for m in moments]}, indent=1))
    print(report(moments, info))
    if extra:
        print(extra)


if __name__ == "__main__":
    main()
