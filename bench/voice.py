#!/usr/bin/env python3
"""Benchmark the running daemon on the virtual sound card, with an instant model, before and
after the end-of-turn judgment: start-up to listening, RSS, CPU while listening to silence,
end of speech → first reply audio over finished questions in five voices (median, p90, per
stage and per voice), and how many questions with a thinking pause inside were cut at it.

    .venv/bin/python -m bench.voice [--turns 25] [--hesitant 24] [--only now] [--embedded]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import (
    EMBEDDED_MODEL,
    PAUSES_MS,
    QUESTIONS,
    REPLY,
    VOICES,
    cpu_seconds,
    elara,
    listening_daemon,
    log,
    parse_timings,
    percentile,
    rss_mib,
    source_name,
    speak_into,
    woken_question,
    words,
)
from tests.rig import voice_clips
from tests.rig.daemon_process import daemon_env
from tests.rig.ollama_server import FakeOllamaServer, last_user_text
from tests.rig.pulse import VirtualSoundCard

STAGES = ("speech_end_to_turn_end", "speech_end_to_transcript", "transcript_to_first_token", "first_token_to_first_audio",
          "speech_end_to_first_audio")
#: the end-of-turn settings compared: as before this issue, and the shipped defaults
CONFIGS = {"before (EndSilenceMs 600 alone)": {"Listening__TurnJudgment": "off",
                                              "Listening__SpeculativeReply": "false",
                                              "SpeechToText__EarlyStartMs": "200",
                                              "Audio__OutputLatencyMs": "100"},
           "now (judged pauses, reply started ahead)": {}}


def asked(server: FakeOllamaServer, before: int) -> str:
    """The user's words of the last turn the model was asked to answer after the first `before`
    ones ('' if none)."""
    turns = server.turns()[before:]
    return last_user_text("chat", turns[-1]) if turns else ""


def last_user_words(env: dict[str, str]) -> str:
    """The user's words of the last stored turn (a local command's never reach the model)."""
    listed = elara(env, "history", "list", "--limit", "4")
    users = [line[21:].split(None, 1)[1] for line in listed.stdout.splitlines()
             if line[21:].lower().startswith("user ")]
    return users[-1] if users else ""


def run_config(name: str, overrides: dict[str, str], args: argparse.Namespace,
               card: VirtualSoundCard, tmp: Path, turns: list[tuple[str, str, Path]],
               hesitant: list[tuple[str, str, str, Path]], settings: dict[str, str]) -> dict:
    """Start the daemon with `overrides`; speak every clip into it; collect the figures."""
    log(f"== {name}")
    with FakeOllamaServer(responder=lambda endpoint, body: REPLY) as server:
        home = tmp / name.split()[0]
        home.mkdir()
        env = daemon_env(card.env, server.url, home, **{**settings, **overrides})
        out: dict = {"timings": [], "by_voice": {}, "cuts": [], "answered": 0, "words": 0, "words_right": 0}
        started = time.monotonic()
        log_to = Path(args.log_dir, f"{name.split()[0]}.log") if args.log_dir else None
        with listening_daemon(env, log_to) as daemon:
            out["startup"] = time.monotonic() - started
            pid = daemon.process.pid
            out["rss"] = rss_mib(pid)
            cpu0, wall0 = cpu_seconds(pid), time.monotonic()
            time.sleep(args.idle_seconds)
            out["idle_cpu"] = (cpu_seconds(pid) - cpu0) / (time.monotonic() - wall0) * 100
            for voice, question, clip in turns:
                before = len(server.turns())
                line = speak_into(daemon, card, clip)
                if line is None:
                    log(f"  {voice}: no turn (not woken?)")
                    continue
                t = parse_timings(line)
                out["timings"].append(t)
                out["by_voice"].setdefault(voice, []).append(t["speech_end_to_first_audio"])
                # the embedded model asks no server: what was heard is in the history
                heard = set(words(asked(server, before) if args.embedded is None else last_user_words(env)))
                said = words(question)
                out["words"] += len(said)
                out["words_right"] += sum(w in heard for w in said)
                log(f"  {voice}: {t['speech_end_to_first_audio']:.3f} s")
            for voice, first, rest, clip in hesitant:
                before = len(server.turns())
                if speak_into(daemon, card, clip) is None:
                    log(f"  {voice} hesitant: no turn (not woken?)")
                    continue
                text = asked(server, before) or last_user_words(env)
                # Cut: what reached the model has no more words than the part before the pause.
                cut = len(words(text)) <= len(words(first))
                out["answered"] += 1
                if cut:
                    out["cuts"].append(f"{voice}: {first} … {rest}")
                log(f"  {voice} {'CUT' if cut else 'whole'}: {first!r} … {rest!r} → asked {text!r}")
            out.update(after_the_turns(daemon.lines, env))
            out["rss_after"] = rss_mib(pid)
            out["status"], out["stop_seconds"] = daemon.terminate()
    return out


def after_the_turns(lines: list[str], env: dict[str, str]) -> dict:
    """What the daemon's log and `elara status` say once every clip was spoken."""
    went_on = [line for line in lines if "the person went on" in line]
    status = elara(env, "status", "--json", timeout=30)
    return {"dropped_ahead": sum(1 for line in lines if "dropped the reply started ahead" in line),
            "went_on": len(went_on), "went_on_heard": sum("(speaking)" in line for line in went_on),
            "underflows": json.loads(status.stdout)["speaker"]["underflows"] if status.returncode == 0 else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=25, help="finished questions, over the voices")
    parser.add_argument("--hesitant", type=int, default=24, help="questions with a pause inside")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--only", choices=("before", "now"), help="run one configuration")
    parser.add_argument("--log-dir", help="write each daemon's log here")
    parser.add_argument("--set", action="append", default=[], metavar="Section__Key=VALUE",
                        help="a setting for every configuration (e.g. SpeechToText__EarlyStartMs=80)")
    parser.add_argument("--embedded", metavar="GGUF", nargs="?", const="",
                        help="answer with the embedded model (the built-in one, or this GGUF) "
                             "instead of the instant Ollama-protocol server")
    args = parser.parse_args()
    settings = {"Listening__Mode": "wake_word"}
    if args.embedded is not None:
        settings.update(EMBEDDED_MODEL)
        if args.embedded:
            settings["LanguageModel__EmbeddedModel"] = args.embedded
    settings.update(item.split("=", 1) for item in args.set)
    configs = {k: v for k, v in CONFIGS.items() if args.only is None or k.startswith(args.only)}

    with tempfile.TemporaryDirectory() as tmp_name, VirtualSoundCard() as card:
        tmp = Path(tmp_name)
        turns, hesitant = [], []
        for i in range(args.turns):
            source = VOICES[i % len(VOICES)]
            first, rest = QUESTIONS[i % len(QUESTIONS)]
            path = voice_clips.write_wav(tmp / f"turn{i}.wav", woken_question(source, first, rest))
            turns.append((source_name(source), f"{first} {rest}", path))
        for i in range(args.hesitant):
            source = VOICES[i % len(VOICES)]
            first, rest = QUESTIONS[(i * 5 + 3) % len(QUESTIONS)]
            pause = PAUSES_MS[i % len(PAUSES_MS)]
            path = voice_clips.write_wav(tmp / f"hesitant{i}.wav", woken_question(source, first, rest, pause))
            hesitant.append((f"{source_name(source)} pause {pause} ms", first, rest, path))
        results = {name: run_config(name, overrides, args, card, tmp, turns, hesitant, settings)
                   for name, overrides in configs.items()}

    model = "instant model" if args.embedded is None else f"embedded model {args.embedded or 'SmolLM2-135M'}"
    print(f"voice daemon benchmark: {args.turns} finished questions in {len(VOICES)} voices and "
          f"{args.hesitant} with a thinking pause (0.6–1.2 s), {model}, tiny.en + joe-medium\n")
    names = list(results)
    print("| figure | " + " | ".join(names) + " |\n| --- |" + " ---: |" * len(names))

    def row(label: str, cell) -> None:  # type: ignore[no-untyped-def]
        print(f"| {label} | " + " | ".join(cell(results[n]) for n in names) + " |")

    row("start-up to listening", lambda r: f"{r['startup']:.2f} s")
    row("RSS idle / after the turns", lambda r: f"{r['rss']:.0f} / {r['rss_after']:.0f} MiB")
    row(f"CPU listening to silence ({args.idle_seconds:.0f} s)", lambda r: f"{r['idle_cpu']:.1f} %")
    row("SIGTERM to exit", lambda r: f"{r['stop_seconds']:.2f} s (status {r['status']})")
    row("finished questions answered", lambda r: f"{len(r['timings'])}/{args.turns}")
    for stage in STAGES:
        row(f"{stage.replace('_', ' ')} median / p90", lambda r, stage=stage: (
            f"{statistics.median([t[stage] for t in r['timings'] if stage in t]):.3f} / "
            f"{percentile([t[stage] for t in r['timings'] if stage in t], 90):.3f} s"))
    for voice in dict.fromkeys(source_name(v) for v in VOICES):
        row(f"end of speech → first audio, {voice} (median)", lambda r, voice=voice: (
            f"{statistics.median(r['by_voice'][voice]):.3f} s" if r["by_voice"].get(voice) else "-"))
    row("question words heard right", lambda r: f"{r['words_right']}/{r['words']}")
    row("speaker underflows", lambda r: str(r["underflows"]))
    row("hesitant questions cut at the pause", lambda r: f"{len(r['cuts'])}/{r['answered']}")
    row("replies started ahead and dropped", lambda r: str(r["dropped_ahead"]))
    row("the person went on after the pause was taken for the end (her reply already heard)",
        lambda r: f"{r['went_on']} ({r['went_on_heard']})")
    for n in names:
        for cut in results[n]["cuts"]:
            print(f"\n- cut ({n}): {cut}", end="")
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
