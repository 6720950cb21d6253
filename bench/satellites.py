#!/usr/bin/env python3
"""Benchmark Elara as a hub for wyoming-satellites: latency through a satellite, CPU per room.

On the virtual sound card (tests/rig/pulse.py), real wyoming-satellite 1.0.0 processes (from
`.venv-satellite`) stream `parec` from a room's microphone sink and play replies with `pacat` to
its speaker sink; `elara run` is their hub, answering with the instant Ollama-protocol server.

- Latency: 15 questions in five voices asked in the kitchen. The kitchen's speaker is looped back
  into its microphone sink (module-loopback, 20 ms, fixed), so one recording of the microphone
  holds the question and the reply on one timeline: end of speech → the reply's first sound as the
  satellite played it (the satellite's microphone and speaker paths and the 20 ms loop included).
  Run with local engines, then with both engines remote (wyoming-faster-whisper and wyoming-piper on
  loopback, on the same cores).
- CPU: the hub process idle with 0, 1, 2 and 4 satellites streaming silence (20 s each), and the
  hub's CPU seconds per answered turn with local and with remote engines.

    .venv/bin/python -m bench.satellites [--turns 15] [--idle-seconds 20]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import (
    QUESTIONS,
    REPLY,
    VOICES,
    cpu_seconds,
    log,
    parse_timings,
    percentile,
    woken_question,
)
from tests.rig import voice_clips
from tests.rig.daemon_process import DaemonProcess, daemon_env
from tests.rig.ollama_server import FakeOllamaServer
from tests.rig.pulse import VirtualSoundCard
from tests.rig.recording import first_sound, voiced_end
from tests.rig.wyoming_services import both, start_satellite

LOOP_MS = 20


@contextlib.contextmanager
def hub(card: VirtualSoundCard, server: FakeOllamaServer, tmp: Path, rooms: dict[str, tuple[str, str]],
        **settings: str):
    """Satellites for `rooms` and a hub daemon over them, stopped afterwards."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **card.env}
    satellites = {name: start_satellite(name, env, f"{mic}.monitor", speaker) for name, (mic, speaker) in rooms.items()}
    daemon = None
    try:
        config = json.dumps([{"Name": n, "Uri": s.uri} for n, s in satellites.items()])
        daemon = DaemonProcess(daemon_env(card.env, server.url, tmp, Listening__Mode="wake_word",
                                          Satellites=config, **settings))
        daemon.wait_for("waiting for the wake word", timeout=120)
        for name in satellites:
            daemon.wait_for(rf"satellite {name} at .*: streaming", timeout=60)
        yield daemon
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.kill()
        for satellite in satellites.values():
            satellite.stop()


def latency_run(card: VirtualSoundCard, server: FakeOllamaServer, tmp: Path, room: tuple[str, str],
                turns: int, **settings: str) -> dict:
    mic, speaker = room
    loop = int(card.pactl("load-module", "module-loopback", f"source={speaker}.monitor", f"sink={mic}",
                          f"latency_msec={LOOP_MS}", "adjust_time=0", "source_dont_move=true",
                          "sink_dont_move=true").strip())
    result: dict = {"latency": [], "hub": [], "cpu": [], "asked": 0}
    try:
        with hub(card, server, tmp, {"kitchen": room}, **settings) as daemon:
            for i in range(turns):
                source = VOICES[i % len(VOICES)]
                first, rest = QUESTIONS[i % len(QUESTIONS)]
                clip = woken_question(source, first, rest)
                path = voice_clips.write_wav(tmp / f"q{i}.wav", clip)
                before = daemon.count("turn timings")
                idle = daemon.count("waiting for the wake word")
                recording = card.record_speaker(source=f"{mic}.monitor")
                cpu = cpu_seconds(daemon.process.pid)
                card.play_into_mic(path, sink=mic)
                try:
                    line = daemon.wait_for("turn timings", count=before + 1, timeout=30)
                    daemon.wait_for("waiting for the wake word", count=idle + 1, timeout=30)
                except AssertionError:
                    log(f"turn {i}: no turn")
                    recording.stop()
                    continue
                time.sleep(0.5)
                result["cpu"].append(cpu_seconds(daemon.process.pid) - cpu)
                heard = recording.samples()
                # The clip arrives bit-exact: its first loud sample places it on the recording.
                began, clip_began = first_sound(heard, 0, 300), first_sound(clip, 0, 300)
                if began is None or clip_began is None:
                    log(f"turn {i}: the question is not in the recording")
                    continue
                end = began - clip_began + voiced_end(clip)
                reply = first_sound(heard, end + 800)
                hub_seconds = parse_timings(line).get("speech_end_to_first_audio")
                if reply is None:
                    log(f"turn {i}: no reply in the recording")
                    continue
                result["latency"].append((reply - end) / 16_000)
                if hub_seconds is not None:
                    result["hub"].append(hub_seconds)
                log(f"turn {i}: {result['latency'][-1]:.3f} s through the satellite, hub {hub_seconds}")
            result["asked"] = len(server.turns())
    finally:
        card.pactl("unload-module", str(loop))
    return result


def idle_cpu(card: VirtualSoundCard, server: FakeOllamaServer, tmp: Path, rooms: dict[str, tuple[str, str]],
             seconds: float) -> float:
    with hub(card, server, tmp, rooms) as daemon:
        time.sleep(3)
        start, cpu = time.monotonic(), cpu_seconds(daemon.process.pid)
        time.sleep(seconds)
        return 100 * (cpu_seconds(daemon.process.pid) - cpu) / (time.monotonic() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name, VirtualSoundCard() as card:
        tmp = Path(tmp_name)
        server = FakeOllamaServer().start()
        server.responder = lambda endpoint, body: REPLY
        try:
            rooms = {name: card.add_room(name) for name in ("kitchen", "bedroom", "attic", "garage")}
            log("latency, local engines")
            local = latency_run(card, server, tmp / "local", rooms["kitchen"], args.turns)
            with both(tmp / "services") as (whisper, piper):
                log("latency, remote engines")
                remote = latency_run(card, server, tmp / "remote", rooms["kitchen"], args.turns,
                                     SpeechToText__Engine=whisper.uri, TextToSpeech__Engine=piper.uri)
            cpu = {}
            for count in (0, 1, 2, 4):
                log(f"idle CPU with {count} satellites")
                chosen = dict(list(rooms.items())[:count])
                cpu[count] = idle_cpu(card, server, tmp / f"idle{count}", chosen, args.idle_seconds)
        finally:
            server.stop()

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.3f} / {percentile(values, 90):.3f} s" if values else "-"

    print(f"hub benchmark: wyoming-satellite 1.0.0 on the virtual sound card, {args.turns} questions in "
          f"{len(VOICES)} voices asked in the kitchen, instant model\n")
    print("| figure | local engines | both engines remote (loopback) |\n| --- | ---: | ---: |")
    print(f"| questions answered | {len(local['latency'])}/{args.turns} | {len(remote['latency'])}/{args.turns} |")
    print(f"| end of speech → reply heard from the satellite, median / p90 | {cell(local['latency'])} | "
          f"{cell(remote['latency'])} |")
    print(f"| … of which the hub (end of speech at the hub → first audio sent), median | {cell(local['hub'])} | "
          f"{cell(remote['hub'])} |")
    print(f"| hub CPU per answered turn, median | {statistics.median(local['cpu']):.2f} s | "
          f"{statistics.median(remote['cpu']):.2f} s |")
    print("\n| satellites streaming | hub CPU, idle (% of one core) |\n| ---: | ---: |")
    for count, value in cpu.items():
        print(f"| {count} | {value:.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
