#!/usr/bin/env python3
"""Benchmark local commands against the model path on the running daemon and the virtual sound
card: end of speech → first reply audio for commands Elara answers herself ("What time is it?",
"Set a timer for ten minutes.") and for questions the language model answers — the instant
Ollama-protocol server (the model's best case) and the embedded llama.cpp model — in five voices.

    .venv/bin/python -m bench.commands [--turns 15] [--no-embedded]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from bench.common import (
    EMBEDDED_MODEL,
    QUESTIONS,
    REPLY,
    VOICES,
    listening_daemon,
    log,
    parse_timings,
    percentile,
    source_name,
    speak_into,
    woken_question,
)
from elara.skills import intents
from tests.rig import voice_clips
from tests.rig.daemon_process import daemon_env
from tests.rig.ollama_server import FakeOllamaServer
from tests.rig.pulse import VirtualSoundCard

COMMANDS = ("What time is it?", "Set a timer for ten minutes.", "How much time is left on the timer?",
            "What's the date today?", "Set a pasta timer for eight minutes.", "What timers do I have?",
            "What day is it?", "Cancel all timers.")


def run(label: str, settings: dict[str, str], clips: list[tuple[str, Path]], card: VirtualSoundCard,
        tmp: Path, log_dir: str | None) -> dict:
    """Speak every clip into a daemon with `settings`; end of speech → first audio, per kind."""
    log(f"== {label}")
    with FakeOllamaServer(responder=lambda endpoint, body: REPLY) as server:
        home = tmp / label.split()[0]
        home.mkdir()
        env = daemon_env(card.env, server.url, home, Listening__Mode="wake_word", **settings)
        out: dict = {"command": [], "question": [], "answered_locally": [], "local": 0, "model_requests": 0}
        with listening_daemon(env, Path(log_dir, f"{label.split()[0]}.log") if log_dir else None) as daemon:
            for kind, path in clips:
                chats = len(server.turns())
                locals_before = daemon.count("local command:")
                line = speak_into(daemon, card, path)
                if line is None:
                    log(f"  {kind}: no turn")
                    continue
                stages = parse_timings(line)
                seconds = stages["speech_end_to_first_audio"]
                out[kind].append(seconds)
                local = daemon.count("local command:") > locals_before
                if kind == "command":
                    out["local"] += local
                    if local:
                        out["answered_locally"].append(seconds)
                    out["model_requests"] += len(server.turns()) > chats
                log(f"  {kind}{' (local)' if local else ''}: {seconds:.3f} s — " + ", ".join(
                    f"{k} {v:.3f}" for k, v in stages.items() if k.startswith("speech_end_to")))
            daemon.terminate()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=15, help="commands, and as many questions")
    parser.add_argument("--no-embedded", action="store_true", help="skip the embedded-model run")
    parser.add_argument("--log-dir", help="write each daemon's log here")
    parser.add_argument("--set", action="append", default=[], metavar="Section__Key=VALUE",
                        help="a setting for every run (e.g. Logging__Level=DEBUG to see what was heard)")
    args = parser.parse_args()
    configs: dict[str, dict[str, str]] = {"instant model (Ollama protocol)": {}}
    if not args.no_embedded:
        configs["embedded model (SmolLM2-135M, llama.cpp)"] = dict(EMBEDDED_MODEL)
    for settings in configs.values():
        settings.update(item.split("=", 1) for item in args.set)
    with tempfile.TemporaryDirectory() as tmp_name, VirtualSoundCard() as card:
        tmp = Path(tmp_name)
        clips = []
        # Questions for the model only ("Set a timer for ten minutes." is a command now).
        questions = [f"{first} {rest}" for first, rest in QUESTIONS if intents.match(f"{first} {rest}") is None]
        for i in range(args.turns):
            source = VOICES[i % len(VOICES)]
            for kind, text in (("command", COMMANDS[i % len(COMMANDS)]), ("question", questions[i % len(questions)])):
                clips.append((kind, voice_clips.write_wav(tmp / f"{kind}{i}.wav", woken_question(source, text))))
        results = {label: run(label, settings, clips, card, tmp, args.log_dir) for label, settings in configs.items()}

    print(f"local commands against the model path: {args.turns} commands and {args.turns} questions "
          f"in {len(VOICES)} voices ({', '.join(dict.fromkeys(source_name(v) for v in VOICES))}), "
          "wake_word mode, tiny.en + joe-medium, 2 cores\n")
    print("| end of speech → first audio | median | p90 | turns |\n| --- | ---: | ---: | ---: |")
    for label, r in results.items():
        run_name = label.split(" (")[0]
        for kind, name in (("answered_locally", f"command heard right, answered locally ({run_name} run)"),
                           ("command", f"every command clip, misheard ones answered by the model ({run_name} run)"),
                           ("question", f"question answered by the {label}")):
            values = r[kind]
            if values:
                print(f"| {name} | {statistics.median(values):.3f} s | {percentile(values, 90):.3f} s | "
                      f"{len(values)} |")
    for label, r in results.items():
        print(f"\n{label}: {r['local']}/{len(r['command'])} commands answered locally, "
              f"{r['model_requests']} of them sent to the model", end="")
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
