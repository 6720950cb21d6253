#!/usr/bin/env python3
"""Benchmark the running daemon on the virtual sound card, with an instant model:
start-up to listening, RSS with every model loaded, CPU while listening to silence, and
end of speech → first reply audio over several spoken turns (median, p90, per stage)."""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import voice_clips  # noqa: E402
from daemon_process import DaemonProcess, daemon_env  # noqa: E402
from ollama_server import FakeOllamaServer  # noqa: E402
from pulse import VirtualSoundCard  # noqa: E402

QUESTIONS = [
    "What is the capital of France?", "How far away is the moon?", "What time is it in Tokyo?",
    "Tell me a fun fact about octopuses.", "How do I boil an egg?", "What is the weather like today?",
    "Who wrote Pride and Prejudice?", "How many legs does a spider have?",
    "What is the tallest mountain in the world?", "Set a timer for ten minutes.",
    "Why is the sky blue?", "What is two plus two?",
]
REPLY = "Here is a short answer for you. I hope that it helps."
STAGES = ("speech_end_to_transcript", "transcript_to_first_token", "first_token_to_first_audio",
          "speech_end_to_first_audio")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime, stime in clock ticks (USER_HZ=100)


def rss_mib(pid: int) -> float:
    """Resident memory of a process in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def parse_timings(line: str) -> dict[str, float]:
    """The stage seconds of one `turn timings:` log line."""
    return {k: float(v) for k, v in re.findall(r"(\w+) ([\d.]+) s", line.split("turn timings:")[1])}


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--embedded", metavar="GGUF", nargs="?", const="",
                        help="answer with the embedded model (the built-in one, or this GGUF) "
                             "instead of the instant Ollama-protocol server")
    args = parser.parse_args()
    settings = {"Listening__Mode": "wake_word"}
    if args.embedded is not None:
        settings.update(LanguageModel__Provider="embedded", LanguageModel__EmbeddedThreads="2",
                        LanguageModel__Options='{"num_ctx": 2048, "num_predict": 48}')
        if args.embedded:
            settings["LanguageModel__EmbeddedModel"] = args.embedded

    with tempfile.TemporaryDirectory() as tmp_name, VirtualSoundCard() as card, \
            FakeOllamaServer(responder=lambda endpoint, body: REPLY) as server:
        tmp = Path(tmp_name)
        env = daemon_env(card.env, server.url, tmp, **settings)
        clips = []
        for i, question in enumerate(QUESTIONS[:args.turns] * (1 + args.turns // len(QUESTIONS))):
            clips.append(voice_clips.write_wav(tmp / f"turn{i}.wav", voice_clips.concat(
                voice_clips.silence(0.3), voice_clips.piper_speech("Hey Jarvis."),
                voice_clips.silence(0.6), voice_clips.piper_speech(question),
                voice_clips.silence(1.5))))
        clips = clips[:args.turns]

        started = time.monotonic()
        daemon = DaemonProcess(env)
        try:
            daemon.wait_for("waiting for the wake word", timeout=120)
            startup = time.monotonic() - started
            pid = daemon.process.pid
            rss = rss_mib(pid)
            cpu0, wall0 = cpu_seconds(pid), time.monotonic()
            time.sleep(args.idle_seconds)
            idle_cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - wall0) * 100

            timings = []
            for i, clip in enumerate(clips):
                card.play_into_mic(clip)
                timings.append(parse_timings(daemon.wait_for("turn timings", count=i + 1, timeout=60)))
                daemon.wait_for("waiting for the wake word", count=i + 2, timeout=30)
                print(f"turn {i + 1}: {timings[-1]['speech_end_to_first_audio']:.3f} s", file=sys.stderr)
            rss_after = rss_mib(pid)
            status, stop_seconds = daemon.terminate()
        finally:
            daemon.kill()

    model = "instant model" if args.embedded is None else f"embedded model {args.embedded or 'SmolLM2-135M'}"
    print(f"voice daemon benchmark: {len(timings)} turns, {model}, tiny.en + joe-medium\n")
    print("| figure | value |\n| --- | ---: |")
    print(f"| start-up to listening (process start → waiting for the wake word) | {startup:.2f} s |")
    print(f"| RSS, every model loaded (idle / after {len(timings)} turns) | {rss:.0f} MiB / {rss_after:.0f} MiB |")
    print(f"| CPU listening to silence for {args.idle_seconds:.0f} s | {idle_cpu:.1f} % of one core |")
    print(f"| SIGTERM to exit (status {status}) | {stop_seconds:.2f} s |")
    print("\n| stage | median | p90 |\n| --- | ---: | ---: |")
    for stage in STAGES:
        values = [t[stage] for t in timings if stage in t]
        print(f"| {stage.replace('_', ' ')} | {statistics.median(values):.3f} s | {percentile(values, 90):.3f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
