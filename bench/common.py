"""What the benches share: the progress line, one percentile, the questions and voices they speak,
and the measurements of a running daemon. The sound card, the clips and the daemon process come
from the test rig (tests/rig); a bench runs from the repository root as `.venv/bin/python -m bench.NAME`.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from elara.audio.frames import SAMPLE_RATE
from tests.rig import voice_clips
from tests.rig.daemon_process import DaemonProcess, listening_daemon  # noqa: F401  (the benches' daemon)

if TYPE_CHECKING:
    from tests.rig.pulse import VirtualSoundCard

# ---------------------------------------------------------------------------------------------
# progress and figures


def log(message: str) -> None:
    """A progress line on stderr, `[bench.NAME HH:MM:SS] message` (stdout is the report)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = spec.name if spec is not None else Path(sys.argv[0]).stem
    print(f"[{name} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values: Sequence[float] | np.ndarray, p: float) -> float:
    """The p-th percentile by nearest rank: the ⌈p/100 · n⌉-th smallest value, the smallest one
    with at least p % of the values at or below it — always a value that was measured, and the
    same definition in every bench. Medians are `statistics.median` (an even count's two middle
    values averaged, where nearest rank would take the lower one)."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    if not len(ordered):
        raise ValueError("no values to take a percentile of")
    # rounded first: 7 / 100 * 100 is 7.000000000000001 in floating point, and the rank is 7, not 8
    rank = math.ceil(round(p / 100 * len(ordered), 9))
    return float(ordered[min(max(rank, 1), len(ordered)) - 1])


def table(header: list[str], rows: Iterable[list[str]]) -> str:
    """A markdown table, ending in a blank line."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# clips

#: (the words before a thinking pause, the rest). Pauses after a function word ("of", "the") and
#: after a content word ("novel", "Paris"), where only the audio or nothing can tell.
QUESTIONS = (
    ("What is the capital of", "France?"),
    ("Can you tell me the", "weather for tomorrow?"),
    ("How many moons are", "there around Jupiter?"),
    ("Set a timer for", "ten minutes."),
    ("What is the largest planet in", "our solar system?"),
    ("Remind me to call my", "sister tonight."),
    ("Who wrote the novel", "Pride and Prejudice?"),
    ("What time does the", "library close today?"),
    ("How far is it from Paris", "to Berlin?"),
    ("Hey Jarvis,", "which is the largest planet?"),
    ("Hey Jarvis,", "what time is it in Tokyo?"),
    ("What should I cook", "for dinner tonight?"),
    ("Tell me a fun fact about", "octopuses."),
    ("Play some music by", "the Beatles."),
)
#: the thinking pauses put inside hesitant questions
PAUSES_MS = (600, 800, 1000, 1200)
#: the voices the daemon benches ask in: ("piper", length_scale) or ("espeak", voice, words a
#: minute[, pitch]). The wake phrase is always Piper's joe, whom the detector knows.
VOICES = (("piper", 1.0), ("piper", 1.2), ("espeak", "en-us", 150), ("espeak", "en-us+f3", 165),
          ("espeak", "en-gb", 160))
_WORD = re.compile(r"[a-z0-9']+")
#: where the benches keep what is slow to make (clips, the wake-word bench's negative stream and traces)
CACHE = Path.home() / ".cache" / "elara-bench"


def keep_clips(folder: Path | None = None) -> None:
    """Keep synthesized clips in `folder` (default: $ELARA_CLIP_CACHE, else CACHE/clips) so the next
    run reuses them; tests/rig/voice_clips reads the setting at its first synthesis."""
    default = os.environ.get("ELARA_CLIP_CACHE") or CACHE / "clips"
    os.environ["ELARA_CLIP_CACHE"] = str(folder or default)


def words(text: str) -> list[str]:
    """The lower-case words of a text, as heard and as said are compared."""
    return _WORD.findall(text.lower())


def speech(source: tuple, text: str) -> np.ndarray:
    """`text` from a source: ("piper", length_scale), ("piper varied", length_scale) or
    ("espeak", voice, words a minute[, pitch])."""
    if source[0] == "piper":
        return voice_clips.piper_speech(text, length_scale=source[1])
    if source[0] == "piper varied":
        return voice_clips.piper_speech(text, length_scale=source[1], varied=True)
    return voice_clips.espeak_speech(text, voice=source[1], speed=source[2],
                                     pitch=source[3] if len(source) > 3 else 50)


def source_name(source: tuple) -> str:
    """A source's short human name ("Piper joe ×1.2", "espeak en-gb")."""
    return f"Piper joe ×{source[1]:g}" if source[0] == "piper" else f"espeak {source[1]}"


def voiced_bounds(samples: np.ndarray) -> tuple[float, float]:
    """Seconds where the sound starts and ends, -46 dB below its peak (synthesized speech has
    silence at both ends; -46 dB keeps Piper's soft final "s")."""
    x = np.abs(samples.astype(np.int32))
    loud = np.flatnonzero(x > 0.005 * (x.max() or 1))
    if not len(loud):
        return 0.0, 0.0
    return loud[0] / SAMPLE_RATE, (loud[-1] + 1) / SAMPLE_RATE


def quiet_runs(samples: np.ndarray, min_ms: float = 40.0) -> list[tuple[int, int]]:
    """(start, end) samples of stretches 46 dB below the peak, in 10 ms steps, inside the speech."""
    step = SAMPLE_RATE // 100
    x = np.abs(samples.astype(np.float64))
    blocks = x[: len(x) // step * step].reshape(-1, step).max(axis=1)
    loud = blocks > 0.005 * (blocks.max() or 1)
    voiced = np.flatnonzero(loud)
    if not len(voiced):
        return []
    runs, start = [], None
    for i in range(voiced[0], voiced[-1] + 1):
        if not loud[i] and start is None:
            start = i
        elif loud[i] and start is not None:
            if (i - start) * 10 >= min_ms:
                runs.append((start * step, i * step))
            start = None
    return runs


def question(source: tuple, first: str, rest: str, pause_ms: int | None = None) -> np.ndarray:
    """A question in one breath: whole (pause_ms None) or with a thinking pause of pause_ms after
    `first` — espeak-ng with an SSML `<break>`, Piper with a comma whose pause is stretched."""
    text = f"{first} {rest}"
    if source[0] == "piper":
        if pause_ms is None:
            return voice_clips.piper_speech(text, length_scale=source[1])
        # A comma gives Piper's continuing intonation and a short pause; the pause is stretched.
        joined = f"{first} {rest}" if first.endswith(",") else f"{first}, {rest}"
        audio = voice_clips.piper_speech(joined, length_scale=source[1])
        runs = quiet_runs(audio)
        if not runs:
            raise RuntimeError(f"no pause found in Piper's {joined!r}")
        expected = len(audio) * len(first) / len(joined)
        start, end = min(runs, key=lambda r: abs((r[0] + r[1]) / 2 - expected))
        return np.concatenate([audio[:start], voice_clips.silence(pause_ms / 1000), audio[end:]])
    _, voice, speed = source
    if pause_ms is None:
        return voice_clips.espeak_ssml(f"<speak>{text}</speak>", voice, speed)
    # espeak adds its own gap around a break (more after a comma): shorten the break to land on pause_ms.
    brk = pause_ms
    for _ in range(3):
        audio = voice_clips.espeak_ssml(f'<speak>{first} <break time="{brk}ms"/> {rest}</speak>', voice, speed)
        longest = max((e - s for s, e in quiet_runs(audio)), default=0) * 1000 // SAMPLE_RATE
        if abs(longest - pause_ms) <= 40 or brk <= 100:
            break
        brk = max(100, brk - (longest - pause_ms))
    return audio


def woken_question(source: tuple, first: str, rest: str = "", pause_ms: int | None = None) -> np.ndarray:
    """The wake phrase in Piper's voice, then `question` in `source`'s, then the silence a turn ends in."""
    return voice_clips.concat(voice_clips.silence(0.3), voice_clips.piper_speech("Hey Jarvis."),
                              voice_clips.silence(0.6), question(source, first, rest, pause_ms),
                              voice_clips.silence(2.6))


# ---------------------------------------------------------------------------------------------
# the daemon

#: what the instant Ollama-protocol server answers every question with
REPLY = "Here is a short answer for you. I hope that it helps."
#: the daemon's settings for the built-in embedded model, as the benches run it
EMBEDDED_MODEL = {"LanguageModel__Provider": "embedded", "LanguageModel__EmbeddedThreads": "2",
                  "LanguageModel__Options": '{"num_ctx": 2048, "num_predict": 48}'}
#: the daemon's log line when it listens for the wake word again
LISTENING = "waiting for the wake word"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime, stime in clock ticks (USER_HZ=100)


def rss_mib(pid: int | str = "self", field: str = "VmRSS") -> float:
    """Resident memory of a process in MiB (`field` "VmHWM": its peak); this process by default."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def parse_timings(line: str) -> dict[str, float]:
    """The stage seconds of one `turn timings:` log line."""
    return {k: float(v) for k, v in re.findall(r"(\w+) (-?[\d.]+) s", line.split("turn timings:")[1])}


def elara(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m elara ARGS` against the daemon `env` reaches, its output captured."""
    return subprocess.run([sys.executable, "-m", "elara", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def speak_into(daemon: DaemonProcess, card: VirtualSoundCard, clip: Path) -> str | None:
    """Play a clip into the mic; the turn's timing line once Elara is idle again (None: no turn)."""
    turns, idle = daemon.count("turn timings"), daemon.count(LISTENING)
    card.play_into_mic(clip)
    try:
        line = daemon.wait_for("turn timings", count=turns + 1, timeout=30)
    except AssertionError:
        line = None
    try:  # a clip that never woke her leaves no line to wait for
        daemon.wait_for(LISTENING, count=idle + 1, timeout=60 if line else 5)
    except AssertionError:
        pass
    return line
