"""`elara status`: what the running daemon is doing, asked over its Unix socket."""

from __future__ import annotations

import argparse
import json

from elara.service.paths import status_socket
from elara.service.status import query_status
from elara.settings import Settings


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `status`."""
    status = commands.add_parser("status", help="ask the running daemon how it is doing (exit 3 if none)")
    status.add_argument("--json", action="store_true", help="the raw JSON")
    status.set_defaults(handler=_status)


def _status(args: argparse.Namespace, settings: Settings) -> int:
    snapshot = query_status(status_socket())
    if args.json:
        print(json.dumps(snapshot, indent=2))
        return 0
    minutes, seconds = divmod(int(snapshot["uptime_seconds"]), 60)
    hours, minutes = divmod(minutes, 60)
    m, c = snapshot["models"], snapshot["counters"]
    print(f"Elara {snapshot['version']} (pid {snapshot['pid']}): {snapshot['state']}, "
          f"up {hours}:{minutes:02d}:{seconds:02d}")
    print(f"  models: wake word {', '.join(m['wake_word'])}; speech-to-text {m['speech_to_text']}; "
          f"voice {m['voice']}; {m['language_model']} at {m['ollama']}")
    print("  counters: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in c.items()))
    echo = snapshot.get("echo")
    if echo:
        delay = "-" if echo["delay_ms"] is None else f"{echo['delay_ms']} ms"
        print(f"  echo cancellation: ERLE {echo['erle_db']:.1f} dB, delay {delay}")
    for name, engine in (m.get("remote_engines") or {}).items():
        retry = "" if engine["retry_in_seconds"] is None else f", tried again in {engine['retry_in_seconds']:.0f} s"
        print(f"  {name.replace('_', '-')} service {engine['engine']}: {engine['state']}, "
              f"{engine['failures']} failures, {engine['fallbacks']} answered locally{retry}")
    for room in snapshot.get("satellites") or []:
        print(f"  satellite {room['name']} at {room['uri']}: {room['state']}"
              + (f" ({room['last_error']})" if room["state"] != "connected" and room["last_error"] else "")
              + f", {room['counters']['turns'] if room['counters'] else 0} turns")
    tools = snapshot.get("tools")
    if tools:
        offered = "" if tools["offered_to_model"] else " (the model answering now cannot call tools)"
        print(f"  tools: {tools['calls']} calls, {tools['failures']} failed{offered}")
        for name, source in tools["sources"].items():
            if name != "elara":
                error = f" ({source['last_error']})" if source.get("last_error") and source["state"] != "up" else ""
                print(f"  MCP server {name}: {source['state']}{error}, {len(source['offered'])} tools offered, "
                      f"{source['calls']} calls, {source['failures']} failed")
    for timer in snapshot.get("timers") or []:
        name = f"reminder: {timer['reminder']}" if timer.get("reminder") else timer["name"] or "unnamed"
        print(f"  timer {timer['id']}: {name}, {timer['state']}, "
              f"{timer['remaining_seconds']:.0f} s left")
    timings = snapshot.get("last_turn") or {}
    if timings:
        print("  last turn: " + ", ".join(
            f"{k.replace('_', ' ')} {'-' if v is None else f'{v:.3f} s'}" for k, v in timings.items()))
    judgment = snapshot.get("last_judgment") or {}
    if judgment:
        print(f"  last pause: judged {judgment['verdict']} ({judgment['reason']}) at "
              f"{judgment['at_silence_ms']:.0f} ms of silence: it could end the turn after "
              f"{judgment['end_after_ms']} ms")
    read = snapshot.get("last_prompt") or {}
    if read:
        reused = "" if read["reused"] is None else f", {read['reused']} kept from the last turn"
        print(f"  last prompt: {read['evaluated']} tokens evaluated{reused}")
    return 0
