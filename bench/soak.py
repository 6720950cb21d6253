#!/usr/bin/env python3
"""Soak the running daemon: `elara run` on the virtual sound card for hours (2 by default), with an
instant model (the Ollama-protocol server) and a scripted household speaking into the microphone.

The household, one event every 20–40 s (the first seven in this order, then at random): a question
with the wake word in one of five voices; a question and a follow-up without the wake word in the
window after the reply; a timer set by voice, rung, and stopped by "Stop." (with or without the
wake word, in turn); a long reply stopped by the wake word and a new question (barge-in); a long
reply stopped by "Stop." alone; people talking without the wake word; and long silences (1–3
minutes). The speaker is looped back into the microphone (60 ms late, at half volume) unless
`--no-echo`. A reload (SIGHUP) every 15 minutes. Memory jobs run on their own after the turns.

Every event is checked against the daemon's log and the model's requests: a question the model
was not asked is missed; a wake or a question nobody scripted is extra. Sampled every minute:
RSS (and malloc's heaps in it), threads, open file descriptors, asyncio tasks (`elara status`), the
store's bytes on disk, the CPU over the last silent stretch with Elara idle (and, right after
each stretch, what a fixed reference workload woken 50 times a second costs: the host's share in
that figure), and end of speech → first audio of each turn.

Pass, at the end: after the first 10 minutes RSS grows < 5 % (the median of the last 10 minutes'
samples against that of the 10 after the warm-up: a sample taken during a turn holds tens of MiB
that the heap gives back after it), threads and descriptors grow by at
most 2 and tasks by at most 3; the last third's p90 latency is within 20 % (+50 ms) of the first
third's; no missed or extra turn; no ERROR logged (but for `--allow-error`); listening to silence
costs ≤ 5 % of one core (median over the silent stretches once her speaker, kept open a
minute after she spoke for the echo canceller, has closed; the minute it is open is reported too).

    .venv/bin/python -m bench.soak [--minutes 120] [--out DIR] [--seed 1] [--no-echo]
        [--reload-minutes 15] [--sample-seconds 60] [--set Section__Key=VALUE] [--allow-error REGEX]

Writes DIR/soak.csv (the minutes), DIR/turns.csv, DIR/daemon.log, DIR/soak.png (matplotlib,
the `dev` extra) and prints the table on stdout.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from bench.common import (
    LISTENING,
    VOICES,
    cpu_seconds,
    elara,
    keep_clips,
    log,
    parse_timings,
    percentile,
    speech,
)
from bench.wake import CONVERSATION
from elara.audio.playback import KEEP_OPEN_IDLE_SECONDS
from tests.rig import voice_clips
from tests.rig.daemon_process import DaemonProcess, daemon_env
from tests.rig.ollama_server import FakeOllamaServer, last_user_text, minimal_json
from tests.rig.pulse import VirtualSoundCard

#: what each plain question is answered with; a story is long enough to be talked over
ANSWER = "Here is a short answer for you. I hope that it helps."
STORY = " ".join(f"Here is the {n} part of a long story about a lighthouse keeper and the sea."
                 for n in ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"))
QUESTIONS = (
    "What is the capital of France?", "How many moons are there around Jupiter?",
    "Who wrote the novel Pride and Prejudice?", "What should I cook for dinner tonight?",
    "Tell me a fun fact about octopuses.", "How far is it from Paris to Berlin?",
    "What is the largest planet in our solar system?", "Why is the sky blue?",
    "How long should I boil an egg?", "What is the tallest mountain in Europe?",
    "Give me a word that rhymes with orange.", "How many legs does a spider have?",
)
FOLLOW_UPS = ("And why is that?", "What else can you tell me?", "Can you say that again?", "Is that true?")
STORIES = ("Tell me a story about the sea.", "Tell me a long story.", "Tell me a story about a lighthouse.")
TIMER_SECONDS = (5, 8, 10)
NUMBERS = {5: "five", 8: "eight", 10: "ten"}
#: the events, in the order the first of them come (each kind early on, even in a short run)
KINDS = ("question", "follow-up", "timer", "barge-in", "stop", "background", "silence")
WEIGHTS = (40, 15, 10, 10, 10, 10, 5)
RELOAD_MINUTES = 15
WARM_UP_MINUTES = 10
#: the minutes whose RSS samples are compared, at the start (after the warm-up) and at the end
RSS_WINDOW_MINUTES = 10
#: how long a silent stretch must be for its CPU to count as listening to silence
IDLE_MIN_SECONDS = 8.0
#: the reference workload: a fixed small piece of work woken this often, for this long, after each
#: silent stretch
REFERENCE_HZ = 50
REFERENCE_SECONDS = 3.0
#: log lines that are the daemon's errors
ERROR_LINE = re.compile(r"\bERROR\b|Traceback")


def responder(endpoint: str, body: dict) -> str:
    """The instant model: a story when asked for one, a short answer else; memory jobs (a JSON
    `format`) get the smallest JSON they accept."""
    if body.get("format") is not None:
        return json.dumps(minimal_json(body["format"]))
    return STORY if "story" in last_user_text(endpoint, body).lower() else ANSWER


@dataclass
class Turn:
    """One answered turn's timings, and when (minutes into the soak)."""

    minute: float
    kind: str
    speech_end_to_first_audio: float


@dataclass
class Sample:
    """One minute's figures."""

    minute: float
    rss_mib: float
    rss_anon_mib: float  # the heap and other private memory (the rest is mapped files: models)
    rss_heap_mib: float  # of that, malloc's heaps: the main heap and the threads' arenas
    threads: int
    fds: int
    tasks: int | None
    store_bytes: int
    idle_cpu: float | None  # % of one core over the last silent stretch, None if none this minute
    turns: int
    p50_latency: float | None
    echo_cancelled: int | None  # frames the echo filter cancelled so far (`elara status`)
    echo_passed: int | None  # … and passed as they were (nothing played lately)
    playback_blocks: int | None  # blocks of what she played kept for the echo filter


@dataclass(frozen=True)
class Stretch:
    """A silent stretch with Elara idle: its CPU, and whether her speaker was still kept open."""

    minute: float  # when it ended
    cpu: float  # % of one core
    speaker_open: bool
    reference: float  # % of one core the reference workload cost right after it


@dataclass
class Tally:
    """What the household said, and what went differently."""

    events: dict[str, int] = field(default_factory=dict)
    questions: int = 0
    missed: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    reloads: int = 0
    idle: list[Stretch] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)


class Household:
    """Speaks the scripted events into the microphone and checks each against the daemon."""

    def __init__(self, card: VirtualSoundCard, daemon: DaemonProcess, server: FakeOllamaServer, env: dict[str, str],
                 folder: Path, rng: random.Random, started: float) -> None:
        self.card, self.daemon, self.server, self.env = card, daemon, server, env
        self.folder = folder
        self.rng = rng
        self.started = started
        self.tally = Tally()
        self._clips: dict[str, Path] = {}
        self._stop_with_wake = False

    # -- clips ---------------------------------------------------------------------------------

    def clip(self, key: str, make: Callable[[], np.ndarray]) -> Path:
        """A WAV of `make()`'s samples, made once."""
        if key not in self._clips:
            path = self.folder / f"clip-{len(self._clips):03d}.wav"
            self._clips[key] = voice_clips.write_wav(path, make())
        return self._clips[key]

    def woken(self, source: tuple, text: str) -> Path:
        """"Hey Jarvis." in Piper's voice, then `text` in `source`'s."""
        return self.clip(f"woken {source} {text}", lambda: voice_clips.concat(
            voice_clips.silence(0.3), voice_clips.piper_speech("Hey Jarvis."), voice_clips.silence(0.6),
            speech(source, text), voice_clips.silence(1.5)))

    def said(self, source: tuple, text: str) -> Path:
        """`text` in `source`'s voice, without the wake word."""
        return self.clip(f"said {source} {text}", lambda: voice_clips.concat(
            voice_clips.silence(0.3), speech(source, text), voice_clips.silence(1.2)))

    # -- the daemon's side ---------------------------------------------------------------------

    def minute(self) -> float:
        """Minutes since the soak started."""
        return (time.monotonic() - self.started) / 60

    def counts(self) -> dict[str, int]:
        """The log's and the model's counts an event is checked on."""
        d = self.daemon
        return {"wakes": d.count(r"wake word \w+ \("), "asked": len(self.server.turns()),
                "ahead_dropped": d.count("dropped the reply started ahead"), "idle": d.count(LISTENING),
                "timings": d.count("turn timings"), "stops": d.count(r'heard "stop" while'),
                "rings_stopped": d.count(r"stopped \d+ ringing announcement"),
                "timers_set": d.count(r"timer \w+ set for"), "rings": d.count(r"announcing \(timer\)"),
                "reloads": d.count("configuration reloaded")}

    def wait(self, pattern: str, count: int, timeout: float) -> bool:
        """Whether `count` log lines match `pattern` within `timeout` seconds."""
        try:
            self.daemon.wait_for(pattern, count=count, timeout=timeout)
            return True
        except AssertionError:
            return False

    def settle(self, before: dict[str, int], timeout: float = 90.0) -> None:
        """Wait until Elara listens for the wake word again after the event (and her turns'
        timing lines are in)."""
        self.wait(LISTENING, before["idle"] + 1, timeout)
        time.sleep(0.5)

    def until_idle(self, timeout: float) -> bool:
        """Wait until `elara status` says idle with no memory job pending (a ring, a reply, a
        follow-up window over); False if it did not within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = status(self.env)
            if shown.get("state") == "idle" and not shown.get("memory", {}).get("jobs_pending"):
                return True
            time.sleep(1.0)
        return False

    def check(self, what: str, before: dict[str, int], *, wakes: int | tuple[int, int], asked: list[str]) -> None:
        """Compare an event's wakes (a count, or the fewest and most) and the questions the model
        was asked with the script."""
        after = self.counts()
        new = [last_user_text("chat", body) for body in self.server.turns()[before["asked"]:]]
        self.tally.questions += len(asked)
        for question in asked:
            if not any(_same(question, heard) for heard in new):
                self.tally.missed.append(f"{self.minute():.1f} min, {what}: {question!r} was not asked")
        strangers = [heard for heard in new if not any(_same(q, heard) for q in asked)]
        dropped = after["ahead_dropped"] - before["ahead_dropped"]
        if len(strangers) > dropped:  # a reply started ahead on part of a question is asked once more
            self.tally.extra.append(f"{self.minute():.1f} min, {what}: asked {strangers}")
        woke = after["wakes"] - before["wakes"]
        fewest, most = wakes if isinstance(wakes, tuple) else (wakes, wakes)
        if not fewest <= woke <= most:
            (self.tally.extra if woke > most else self.tally.missed).append(
                f"{self.minute():.1f} min, {what}: {woke} wakes, {wakes} scripted")
        self._timings(before["timings"], after["timings"], what)

    def _timings(self, before: int, after: int, kind: str) -> None:
        lines = [line for line in self.daemon.lines if "turn timings" in line][before:after]
        for line in lines:
            t = parse_timings(line)
            if "speech_end_to_first_audio" in t:
                self.tally.turns.append(Turn(round(self.minute(), 2), kind, t["speech_end_to_first_audio"]))

    # -- the events ----------------------------------------------------------------------------

    def event(self, kind: str) -> None:
        """Say one event and check it."""
        self.tally.events[kind] = self.tally.events.get(kind, 0) + 1
        getattr(self, "_" + kind.replace("-", "_"))()

    def _question(self) -> None:
        source, question = self.rng.choice(VOICES), self.rng.choice(QUESTIONS)
        before = self.counts()
        self.card.play_into_mic(self.woken(source, question))
        self.settle(before)
        self.check("question", before, wakes=1, asked=[question])

    def _follow_up(self) -> None:
        source, question, follow = self.rng.choice(VOICES), self.rng.choice(QUESTIONS), self.rng.choice(FOLLOW_UPS)
        before = self.counts()
        self.card.play_into_mic(self.woken(source, question))
        if self.wait("turn timings", before["timings"] + 1, 60):
            self.card.play_into_mic(self.said(source, follow))  # in the window after her reply
        self.settle(before)
        self.check("follow-up", before, wakes=1, asked=[question, follow])

    def _timer(self) -> None:
        seconds = self.rng.choice(TIMER_SECONDS)
        before = self.counts()
        self.card.play_into_mic(self.woken(VOICES[0], f"Set a timer for {NUMBERS[seconds]} seconds."))
        if not self.wait(r"timer \w+ set for", before["timers_set"] + 1, 30):
            self.tally.missed.append(f"{self.minute():.1f} min, timer: not set")
            self.settle(before)
            return
        if not self.wait(r"announcing \(timer\)", before["rings"] + 1, seconds + 15):
            self.tally.missed.append(f"{self.minute():.1f} min, timer: never rang")
            return
        time.sleep(1.5)
        self._stop_with_wake = not self._stop_with_wake
        stop = self.woken(VOICES[2], "Stop.") if self._stop_with_wake else self.said(VOICES[4], "Stop.")
        self.card.play_into_mic(stop)
        if not self.wait(r"stopped \d+ ringing announcement", before["rings_stopped"] + 1, 15):
            how = "Hey Jarvis. Stop." if self._stop_with_wake else "Stop."
            self.tally.missed.append(f"{self.minute():.1f} min, timer: {how!r} did not stop the ringing")
        time.sleep(3.0)
        self.until_idle(60)
        # "Hey Jarvis. Stop." over the ring may be read whole by the stop listener: no wake then
        self.check("timer", before, wakes=(1, 2) if self._stop_with_wake else 1, asked=[])

    def _barge_in(self) -> None:
        story, question = self.rng.choice(STORIES), self.rng.choice(QUESTIONS)
        before = self.counts()
        self.card.play_into_mic(self.woken(VOICES[0], story))
        time.sleep(3.5)  # into her long reply
        self.card.play_into_mic(self.woken(self.rng.choice(VOICES), question))
        self.settle(before)
        self.check("barge-in", before, wakes=2, asked=[story, question])

    def _stop(self) -> None:
        story = self.rng.choice(STORIES)
        before = self.counts()
        self.card.play_into_mic(self.woken(VOICES[0], story))
        time.sleep(3.5)
        self.card.play_into_mic(self.said(VOICES[4], "Stop."))
        if not self.wait(r'heard "stop" while', before["stops"] + 1, 15):
            self.tally.missed.append(f"{self.minute():.1f} min, stop: \"Stop.\" over her reply was not heard")
        self.settle(before)
        self.check("stop", before, wakes=1, asked=[story])

    def _background(self) -> None:
        source = self.rng.choice(VOICES[2:])
        talk = " ".join(self.rng.sample(CONVERSATION, 3))
        before = self.counts()
        self.card.play_into_mic(self.said(source, talk))
        time.sleep(2.0)
        self.check("background", before, wakes=0, asked=[])

    def _silence(self) -> None:
        self.quiet(self.rng.uniform(60, 180))

    # -- between events ------------------------------------------------------------------------

    def quiet(self, seconds: float) -> None:
        """Say nothing for `seconds`, and at least IDLE_MIN_SECONDS once Elara is idle (the
        follow-up window closed, no memory job pending): the CPU of that stretch is kept."""
        ends = time.monotonic() + seconds
        if not self.until_idle(max(10.0, seconds)):
            time.sleep(max(0.0, ends - time.monotonic()))
            return
        time.sleep(1.0)
        pid = self.daemon.process.pid
        lines0 = len(self.daemon.lines)
        # Her speaker stays open KEEP_OPEN_IDLE_SECONDS after her last audio, which ended before
        # she went idle: the stretch is measured in two parts, the speaker open and then closed.
        closes = time.monotonic() + KEEP_OPEN_IDLE_SECONDS + 2.0
        parts: list[tuple[bool, float, float, float]] = []  # (speaker open, start, cpu, wall)
        cpu0, wall0 = cpu_seconds(pid), time.monotonic()
        stop = max(wall0 + IDLE_MIN_SECONDS, ends)
        if stop - closes >= IDLE_MIN_SECONDS:
            time.sleep(max(0.0, closes - time.monotonic()))
            cpu1, wall1 = cpu_seconds(pid), time.monotonic()
            parts.append((True, self.minute(), cpu1 - cpu0, wall1 - wall0))
            cpu0, wall0 = cpu1, wall1
        time.sleep(max(0.0, stop - time.monotonic()))
        parts.append((not parts, self.minute(), cpu_seconds(pid) - cpu0, time.monotonic() - wall0))
        busy = any(("wake word" in line or "announcing" in line) for line in self.daemon.lines[lines0:])
        if not busy:
            reference = reference_cpu()
            for speaker_open, at, cpu, wall in parts:
                self.tally.idle.append(Stretch(round(at, 2), cpu / wall * 100, speaker_open, reference))

    def reload(self) -> None:
        """SIGHUP, as `systemctl reload` sends: the configuration read again and swapped in."""
        before = self.counts()
        self.daemon.process.send_signal(signal.SIGHUP)
        if self.wait("configuration reloaded", before["reloads"] + 1, 60):
            self.tally.reloads += 1
        else:
            self.tally.missed.append(f"{self.minute():.1f} min: a reload did not finish")


def reference_cpu(seconds: float = REFERENCE_SECONDS) -> float:
    """% of one core that a fixed piece of work (an FFT and a short Python loop), woken
    REFERENCE_HZ times a second as the daemon's threads wake for each frame, costs this thread
    now. What waking for a little work costs varies with the host, not with Elara: the daemon's
    idle CPU is read beside it."""
    samples = np.random.default_rng(0).standard_normal(1280).astype(np.float32)
    period = 1 / REFERENCE_HZ
    cpu0 = time.thread_time()
    start = due = time.monotonic()
    while time.monotonic() - start < seconds:
        for _ in range(20):
            np.fft.irfft(np.fft.rfft(samples) * 0.5)
        total = 0
        for i in range(3000):
            total += i
        due += period
        time.sleep(max(0.0, due - time.monotonic()))
    return (time.thread_time() - cpu0) / (time.monotonic() - start) * 100


def _same(said: str, heard: str) -> bool:
    """Whether what reached the model is the question said (most of its words heard)."""
    words = set(re.findall(r"[a-z']+", said.lower()))
    got = set(re.findall(r"[a-z']+", heard.lower()))
    return bool(words) and len(words & got) >= max(1, len(words) // 2)


def status(env: dict[str, str]) -> dict:
    """`elara status --json`, or {} if it did not answer."""
    done = elara(env, "status", "--json", timeout=30)
    try:
        return json.loads(done.stdout) if done.returncode == 0 else {}
    except json.JSONDecodeError:
        return {}


def process_figures(pid: int) -> tuple[float, float, int, int]:
    """(RSS and its anonymous part in MiB, threads, open file descriptors) of a process."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["RssAnon"].split()[0]) / 1024,
            int(fields["Threads"]), len(os.listdir(f"/proc/{pid}/fd")))


ARENA_BYTES = 64 << 20  # glibc's thread arenas are mapped 64 MiB-aligned, 64 MiB at most


def heap_rss_mib(pid: int) -> float:
    """The resident part of malloc's heaps in MiB: `[heap]` and the anonymous mappings that start
    64 MiB-aligned and span at most 64 MiB (glibc's thread arenas). What anonymous memory is left
    is blocks mapped on their own: model weights, onnxruntime's and CTranslate2's big buffers."""
    total_kib, counted = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and not head[0].endswith(":"):
            start, end = (int(x, 16) for x in head[0].split("-"))
            name = head[5] if len(head) > 5 else ""
            counted = name == "[heap]" or (not name and start % ARENA_BYTES == 0 and end - start <= ARENA_BYTES)
        elif counted and head[0] == "Rss:":
            total_kib += int(head[1])
    return total_kib / 1024


def store_bytes(root: Path) -> int:
    """Bytes of every file under the store's folder."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


class Sampler(threading.Thread):
    """Every `interval` seconds, the daemon's figures as a `Sample`."""

    def __init__(self, household: Household, env: dict[str, str], store: Path, interval: float) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.household, self.env, self.store, self.interval = household, env, store, interval
        self.samples: list[Sample] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval):
            self.take()

    def take(self) -> None:
        """One sample now."""
        h = self.household
        pid = h.daemon.process.pid
        if h.daemon.process.poll() is not None:
            return
        rss, anon, threads, fds = process_figures(pid)
        heap = heap_rss_mib(pid)
        shown = status(self.env)
        echo = shown.get("echo") or {}
        minute = h.minute()
        idle = [x.cpu for x in h.tally.idle if x.minute > minute - self.interval / 60]
        recent = [t.speech_end_to_first_audio for t in h.tally.turns if t.minute > minute - self.interval / 60]
        self.samples.append(Sample(
            minute=round(minute, 2), rss_mib=round(rss, 1), rss_anon_mib=round(anon, 1),
            rss_heap_mib=round(heap, 1), threads=threads, fds=fds,
            tasks=shown.get("tasks"), store_bytes=store_bytes(self.store),
            idle_cpu=round(idle[-1], 2) if idle else None, turns=len(h.tally.turns),
            p50_latency=round(statistics.median(recent), 3) if recent else None,
            echo_cancelled=echo.get("frames_cancelled"), echo_passed=echo.get("frames_passed"),
            playback_blocks=echo.get("playback_blocks")))
        s = self.samples[-1]
        log(f"  {s.minute:5.1f} min: RSS {s.rss_mib:.0f} MiB ({s.rss_anon_mib:.0f} anonymous, "
            f"{s.rss_heap_mib:.0f} in malloc's heaps), {s.threads} threads, {s.fds} fds, {s.tasks} tasks, "
            f"store {s.store_bytes / 1024:.0f} KiB, idle CPU {s.idle_cpu} %, {s.turns} turns, "
            f"echo {s.echo_cancelled} cancelled / {s.echo_passed} passed, {s.playback_blocks} blocks kept")


def run_household(household: Household, minutes: float, reload_minutes: float) -> None:
    """The events until `minutes` are over, a reload every `reload_minutes`."""
    next_reload = reload_minutes
    order = list(KINDS)
    while household.minute() < minutes:
        began = time.monotonic()
        if household.minute() >= next_reload:
            household.reload()
            next_reload += reload_minutes
        kind = order.pop(0) if order else household.rng.choices(KINDS, WEIGHTS)[0]
        if kind == "silence" and household.minute() + 1 >= minutes:
            kind = "question"
        log(f"{household.minute():5.1f} min: {kind}")
        household.event(kind)
        gap = household.rng.uniform(20, 40) - (time.monotonic() - began)
        household.quiet(gap)


# ---------------------------------------------------------------------------------------------
# the verdict


def third(values: list[Turn], which: int) -> list[float]:
    """The latencies of the first (0) or last (2) third of the turns after the warm-up (of all
    turns, in a run too short to have six after it)."""
    after = [t.speech_end_to_first_audio for t in values if t.minute >= WARM_UP_MINUTES]
    if len(after) < 6:
        after = [t.speech_end_to_first_audio for t in values]
    n = len(after) // 3
    return after[:n] if which == 0 else after[len(after) - n:]


def rss_growth(after: list[Sample]) -> tuple[float, float, float]:
    """The median RSS of the first and of the last `RSS_WINDOW_MINUTES` of `after` (MiB), and
    the growth between them (%)."""
    begin, finish = after[0].minute, after[-1].minute
    start = statistics.median(s.rss_mib for s in after if s.minute < begin + RSS_WINDOW_MINUTES)
    end = statistics.median(s.rss_mib for s in after if s.minute > finish - RSS_WINDOW_MINUTES)
    return start, end, (end - start) / start * 100


def verdict(samples: list[Sample], tally: Tally, errors: list[str]) -> list[tuple[str, str, bool]]:
    """(criterion, what was measured, passed) for each pass criterion."""
    after = [s for s in samples if s.minute >= WARM_UP_MINUTES] or samples[-1:]
    start, end, growth = rss_growth(after)
    rows = [("RSS after the first 10 min grows < 5 % (medians of the first and last 10 min)",
             f"{start:.0f} → {end:.0f} MiB ({growth:+.1f} %; samples {after[0].rss_mib:.0f} → "
             f"{after[-1].rss_mib:.0f}, peak {max(s.rss_mib for s in after):.0f})", growth < 5)]
    for name, get, allowed in (("threads", lambda s: s.threads, 2), ("open fds", lambda s: s.fds, 2),
                               ("asyncio tasks", lambda s: s.tasks, 3)):
        values = [get(s) for s in after if get(s) is not None]
        if not values:
            rows.append((f"{name} flat", "not reported", False))
            continue
        rows.append((f"{name} flat (grow ≤ {allowed})", f"{values[0]} → {values[-1]} (range {min(values)}–{max(values)})",
                     values[-1] - values[0] <= allowed))
    early, late = third(tally.turns, 0), third(tally.turns, 2)
    if early and late:
        p_early, p_late = percentile(early, 90), percentile(late, 90)
        rows.append(("end of speech → first audio, p90 not drifting (last third ≤ first × 1.2 + 50 ms)",
                     f"{p_early:.3f} → {p_late:.3f} s ({len(early)} / {len(late)} turns)",
                     p_late <= p_early * 1.2 + 0.05))
    else:
        rows.append(("p90 latency not drifting", "too few turns", False))
    rows.append(("no missed turn", f"{len(tally.missed)} of {tally.questions} questions and the events' checks",
                 not tally.missed))
    rows.append(("no extra turn", f"{len(tally.extra)}", not tally.extra))
    rows.append(("no ERROR logged (unscripted)", f"{len(errors)}", not errors))
    closed = [x.cpu for x in tally.idle if not x.speaker_open]
    if closed:
        median = statistics.median(closed)
        references = [x.reference for x in tally.idle]
        rows.append(("listening to silence ≤ 5 % of one core (median of the silent stretches, her speaker closed)",
                     f"{median:.1f} % (min {min(closed):.1f}, max {max(closed):.1f}, {len(closed)} stretches); "
                     f"the reference workload {min(references):.1f}–{max(references):.1f} %{_correlation(tally.idle)}",
                     median <= 5))
    else:
        rows.append(("listening to silence ≤ 5 % of one core", "no silent stretch measured", False))
    kept_open = [x.cpu for x in tally.idle if x.speaker_open]
    if kept_open:
        rows.append((f"… in the {KEEP_OPEN_IDLE_SECONDS:.0f} s after she spoke, her speaker kept open (not judged)",
                     f"{statistics.median(kept_open):.1f} % ({len(kept_open)} stretches)", True))
    return rows


def _correlation(idle: list[Stretch]) -> str:
    """How closely the stretches' CPU followed the reference workload's, as text."""
    cpu, reference = [x.cpu for x in idle], [x.reference for x in idle]
    if len(idle) < 3 or len(set(cpu)) < 2 or len(set(reference)) < 2:
        return ""
    return f", correlation {statistics.correlation(cpu, reference):.2f} over {len(idle)} stretches"


def plot(samples: list[Sample], turns: list[Turn], idle: list[Stretch], path: Path) -> bool:
    """The series as a PNG (False if matplotlib is missing: it comes with the `dev` extra)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(5, 1, figsize=(9, 12), sharex=True)
    minutes = [s.minute for s in samples]
    axes[0].plot(minutes, [s.rss_mib for s in samples], marker=".", label="RSS")
    axes[0].plot(minutes, [s.rss_anon_mib for s in samples], marker=".", label="anonymous")
    axes[0].plot(minutes, [s.rss_heap_mib for s in samples], marker=".", label="malloc's heaps")
    axes[0].legend(loc="upper left")
    axes[0].set_ylabel("memory (MiB)")
    axes[1].plot(minutes, [s.threads for s in samples], marker=".", label="threads")
    axes[1].plot(minutes, [s.fds for s in samples], marker=".", label="open fds")
    axes[1].plot(minutes, [s.tasks if s.tasks is not None else np.nan for s in samples], marker=".", label="tasks")
    axes[1].legend(loc="upper left")
    axes[1].set_ylabel("count")
    axes[2].plot(minutes, [s.store_bytes / 1024 for s in samples], marker=".")
    axes[2].set_ylabel("store (KiB)")
    for speaker_open, label in ((False, "silent stretch"), (True, "… her speaker kept open")):
        shown = [x for x in idle if x.speaker_open == speaker_open]
        axes[3].plot([x.minute for x in shown], [x.cpu for x in shown], "." if not speaker_open else "x",
                     label=label)
    axes[3].plot([x.minute for x in idle], [x.reference for x in idle], "+", label="reference workload")
    axes[3].axhline(5, color="red", linewidth=0.8, label="5 %")
    axes[3].legend(loc="upper left")
    axes[3].set_ylabel("idle CPU (% of a core)")
    axes[4].plot([t.minute for t in turns], [t.speech_end_to_first_audio for t in turns], ".")
    axes[4].set_ylabel("speech end →\nfirst audio (s)")
    axes[4].set_xlabel("minutes")
    for ax in axes:
        ax.axvline(WARM_UP_MINUTES, color="grey", linewidth=0.6, linestyle="--")
        ax.grid(alpha=0.3)
    fig.suptitle("Elara soak: the daemon on the virtual sound card, a scripted household")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def write_csv(path: Path, rows: list) -> None:
    """Dataclass rows as CSV."""
    if not rows:
        path.write_text("")
        return
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)


def report(args: argparse.Namespace, samples: list[Sample], tally: Tally, errors: list[str], out: Path) -> bool:
    """Print the table (markdown) and what went differently; True if every criterion passed."""
    rows = verdict(samples, tally, errors)
    print(f"Soak: {args.minutes:g} min, seed {args.seed}, echo path {'off' if args.no_echo else 'on'}; "
          f"events {json.dumps(tally.events)}; {len(tally.turns)} turns timed, {tally.reloads} reloads.\n")
    print("| criterion | measured | pass |\n| --- | --- | --- |")
    for criterion, measured, passed in rows:
        print(f"| {criterion} | {measured} | {'yes' if passed else '**no**'} |")
    for title, items in (("missed", tally.missed), ("extra", tally.extra), ("errors", errors)):
        if items:
            print(f"\n{title}:\n" + "\n".join(f"- {item}" for item in items[:30]))
    print(f"\nCSV: {out / 'soak.csv'}, {out / 'turns.csv'}; log: {out / 'daemon.log'}")
    return all(passed for _, _, passed in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=120.0, help="how long (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=None, help="where the CSV, PNG and log go (default: a new temp folder)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sample-seconds", type=float, default=60.0)
    parser.add_argument("--reload-minutes", type=float, default=RELOAD_MINUTES, help="default: %(default)s")
    parser.add_argument("--no-echo", action="store_true", help="the microphone does not hear the speaker")
    parser.add_argument("--set", action="append", default=[], metavar="Section__Key=VALUE")
    parser.add_argument("--allow-error", action="append", default=[], metavar="REGEX",
                        help="an ERROR line matching this is a scripted fault, not a failure")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="elara-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    keep_clips()
    settings = {"Timers__RingSeconds": "20", **dict(s.split("=", 1) for s in args.set)}
    with tempfile.TemporaryDirectory() as tmp, VirtualSoundCard() as card, \
            FakeOllamaServer(responder=responder) as server:
        echo = None if args.no_echo else card.add_echo(latency_ms=60, volume=0.5)
        env = daemon_env(card.env, server.url, Path(tmp), **settings)
        daemon = DaemonProcess(env)
        try:
            daemon.wait_for(LISTENING, timeout=120)
            log(f"listening; soaking for {args.minutes:g} min, the figures in {out}")
            household = Household(card, daemon, server, env, Path(tmp), random.Random(args.seed), time.monotonic())
            sampler = Sampler(household, env, Path(tmp) / "store", args.sample_seconds)
            sampler.take()
            sampler.start()
            run_household(household, args.minutes, args.reload_minutes)
            sampler.done.set()
            sampler.join(60)
            sampler.take()
            code, _ = daemon.terminate()
        finally:
            daemon.kill()
            (out / "daemon.log").write_text("\n".join(daemon.lines) + "\n")
            if echo is not None:
                card.remove_echo(echo)
    allowed = [re.compile(a) for a in args.allow_error]
    errors = [line for line in daemon.lines
              if ERROR_LINE.search(line) and not any(a.search(line) for a in allowed)]
    if code != 0:
        errors.append(f"the daemon exited {code} on SIGTERM")
    write_csv(out / "soak.csv", sampler.samples)
    write_csv(out / "turns.csv", household.tally.turns)
    if not plot(sampler.samples, household.tally.turns, household.tally.idle, out / "soak.png"):
        log("matplotlib is missing (the dev extra): no plot")
    passed = report(args, sampler.samples, household.tally, errors, out)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
