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

REPO = Path(__file__).resolve().parent.parent

from bench.turn import QUESTIONS, source_name, speak  # noqa: E402
from bench.voice import REPLY, VOICES, parse_timings, percentile, speak_into  # noqa: E402
from elara.skills import intents  # noqa: E402
from tests.rig import voice_clips  # noqa: E402
from tests.rig.daemon_process import DaemonProcess, daemon_env  # noqa: E402
from tests.rig.ollama_server import FakeOllamaServer  # noqa: E402
from tests.rig.pulse import VirtualSoundCard  # noqa: E402

COMMANDS = ("What time is it?", "Set a timer for ten minutes.", "How much time is left on the timer?",
            "What's the date today?", "Set a pasta timer for eight minutes.", "What timers do I have?",
            "What day is it?", "Cancel all timers.")


def clip(tmp: Path, name: str, source: tuple, text: str) -> Path:
    """The wake phrase, then `text` in `source`'s voice."""
    return voice_clips.write_wav(tmp / f"{name}.wav", voice_clips.concat(
        voice_clips.silence(0.3), voice_clips.piper_speech("Hey Jarvis."), voice_clips.silence(0.6),
        speak(source, text, "", None), voice_clips.silence(2.6)))


def run(label: str, settings: dict[str, str], clips: list[tuple[str, Path]], card: VirtualSoundCard,
        tmp: Path, log_dir: str | None) -> dict:
    """Speak every clip into a daemon with `settings`; end of speech → first audio, per kind."""
    print(f"== {label}", file=sys.stderr)
    with FakeOllamaServer(responder=lambda endpoint, body: REPLY) as server:
        home = tmp / label.split()[0]
        home.mkdir()
        daemon = DaemonProcess(daemon_env(card.env, server.url, home, Listening__Mode="wake_word",
                                          **settings))
        out: dict = {"command": [], "question": [], "answered_locally": [], "local": 0, "model_requests": 0}
        try:
            daemon.wait_for("waiting for the wake word", timeout=120)
            def replies() -> int:  # streamed chat requests: replies, not memory's background work
                return len([1 for p, body in server.requests if p == "/api/chat" and body.get("stream", True)])

            for kind, path in clips:
                chats = replies()
                locals_before = daemon.count("local command:")
                line = speak_into(daemon, card, path)
                if line is None:
                    print(f"  {kind}: no turn", file=sys.stderr)
                    continue
                stages = parse_timings(line)
                seconds = stages["speech_end_to_first_audio"]
                out[kind].append(seconds)
                local = daemon.count("local command:") > locals_before
                if kind == "command":
                    out["local"] += local
                    if local:
                        out["answered_locally"].append(seconds)
                    out["model_requests"] += replies() > chats
                print(f"  {kind}{' (local)' if local else ''}: {seconds:.3f} s — " + ", ".join(
                    f"{k} {v:.3f}" for k, v in stages.items() if k.startswith("speech_end_to")),
                    file=sys.stderr)
            daemon.terminate()
        finally:
            daemon.kill()
            if log_dir:
                Path(log_dir, f"{label.split()[0]}.log").write_text("\n".join(daemon.lines))
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
        configs["embedded model (SmolLM2-135M, llama.cpp)"] = {
            "LanguageModel__Provider": "embedded", "LanguageModel__EmbeddedThreads": "2",
            "LanguageModel__Options": '{"num_ctx": 2048, "num_predict": 48}'}
    for settings in configs.values():
        settings.update(item.split("=", 1) for item in args.set)
    with tempfile.TemporaryDirectory() as tmp_name, VirtualSoundCard() as card:
        tmp = Path(tmp_name)
        clips = []
        # Questions for the model only ("Set a timer for ten minutes." is a command now).
        questions = [f"{first} {rest}" for first, rest in QUESTIONS if intents.match(f"{first} {rest}") is None]
        for i in range(args.turns):
            source = VOICES[i % len(VOICES)]
            clips.append(("command", clip(tmp, f"command{i}", source, COMMANDS[i % len(COMMANDS)])))
            clips.append(("question", clip(tmp, f"question{i}", source, questions[i % len(questions)])))
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
