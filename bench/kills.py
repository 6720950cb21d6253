"""kill -9 at random moments around the end of a spoken question: nothing stored is ever lost.

Each round starts `elara run` on the virtual sound card over the same store, plays "Hey Jarvis.
<question>" in one of the bench voices (half of them with a thinking pause long enough to be
taken for the end, so the person goes on and the whole question supersedes the first), and kills
the daemon with SIGKILL at a random moment from 2.5 s before the person stops speaking to 4 s
after: in the going-on window (`Listening.GoOnMs` after the end of speech, or after the pause),
while the model streams its reply slowly, and while she speaks it. After each kill:

- every message file decrypts with the independent reader (tests/spec_reader.py): no half file;
- a question the daemon had logged as stored is in the store (no question missing), and a question
  marked superseded always has the whole question stored after it;
- the next round's daemon starts on the store (it refuses nothing).

A question killed before the pause was judged over and transcribed is not yet a question; the
table gives the latest moment after the end of speech at which one was still unstored and the
earliest at which one was stored, so the window the words are not yet a question is visible.

    .venv/bin/python -m bench.kills --kills 100
"""

from __future__ import annotations

import argparse
import random
import re
import signal
import tempfile
import time
from pathlib import Path

from bench.common import (
    LISTENING,
    PAUSES_MS,
    QUESTIONS,
    VOICES,
    keep_clips,
    log,
    table,
    voiced_bounds,
    woken_question,
)
from elara.conversation.records import superseded
from elara.conversation.store import NAME_PATTERN, decode_message
from tests.rig import voice_clips
from tests.rig.daemon_process import DaemonProcess, daemon_env
from tests.rig.ollama_server import FakeOllamaServer
from tests.rig.pulse import VirtualSoundCard
from tests.spec_reader import independent_open

PASSPHRASE = "end-to-end key"  # what daemon_env sets
STORED = "stored the person's question"
REPLY = "Here is an answer that takes a while. " * 6


def orphans(users: list[tuple[str, bool]]) -> int:
    """Superseded questions with no question stored after them (words lost from the context)."""
    return sum(1 for i, (_, gone_on) in enumerate(users) if gone_on and i == len(users) - 1)


def store_state(root: Path) -> tuple[list[tuple[str, bool]], list[str]]:
    """The user records (text, superseded) in order, and the message files that do not decrypt."""
    users: list[tuple[str, bool]] = []
    broken: list[str] = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if not NAME_PATTERN.fullmatch(path.name):
            continue
        try:
            message = decode_message(independent_open(PASSPHRASE, path.read_bytes()))
        except Exception as exc:  # anything unreadable is what this bench exists to find
            broken.append(f"{path.name}: {exc!r}")
            continue
        if path.name.endswith("_user.json"):
            users.append((message.content, superseded(message)))
    return users, broken


def one_kill(env: dict[str, str], card: VirtualSoundCard, clip: Path, speech_end: float,
             at: float, store: Path) -> dict[str, object]:
    """Start the daemon, speak, SIGKILL it `at` seconds after the end of speech; what it left."""
    before, _ = store_state(store)
    daemon = DaemonProcess(env)
    try:
        daemon.wait_for(LISTENING, timeout=120)
        player = card.play_into_mic(clip, wait=False)
        started = time.monotonic()
        time.sleep(max(0.0, started + speech_end + at - time.monotonic()))
        daemon.process.send_signal(signal.SIGKILL)
        daemon.process.wait(10)
        player.kill()
        player.wait(10)
    finally:
        daemon.kill()
    after, broken = store_state(store)
    logged = daemon.count(re.escape(STORED))
    new = after[len(before):]
    return {"at": at, "logged": logged, "new": len(new), "broken": broken,
            "superseded": sum(1 for _, s in after if s) - sum(1 for _, s in before if s),
            "went_on": daemon.count("the person went on"),
            "lost": logged > len(new) or orphans(after) > 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=44)
    parser.add_argument("--before", type=float, default=2.5, help="earliest kill, seconds before the end of speech")
    parser.add_argument("--after", type=float, default=4.0, help="latest kill, seconds after the end of speech")
    args = parser.parse_args()
    keep_clips()
    rng = random.Random(args.seed)
    go_on = 1.5
    results = []
    with tempfile.TemporaryDirectory() as tmp_name, VirtualSoundCard() as card, \
            FakeOllamaServer(responder=lambda endpoint, body: REPLY) as server:
        server.fault, server.slow_delay = "slow", 0.08  # a reply that streams over seconds
        tmp = Path(tmp_name)
        env = daemon_env(card.env, server.url, tmp, Listening__Mode="wake_word",
                         Listening__GoOnMs=str(int(go_on * 1000)))
        clips = []
        for i in range(len(VOICES) * 4):
            first, rest = QUESTIONS[i % len(QUESTIONS)]
            pause = PAUSES_MS[-1] if i % 2 else None
            samples = woken_question(VOICES[i % len(VOICES)], first, rest, pause)
            path = voice_clips.write_wav(tmp / f"q{i}.wav", samples)
            clips.append((path, voiced_bounds(samples)[1]))
        for n in range(args.kills):
            clip, speech_end = clips[n % len(clips)]
            at = rng.uniform(-args.before, args.after)
            result = one_kill(env, card, clip, speech_end, at, tmp / "store")
            results.append(result)
            log(f"kill {n + 1}/{args.kills} at {at:+.2f} s: question logged {result['logged']}, "
                f"stored {result['new']}, went on {result['went_on']}, superseded {result['superseded']}, "
                f"broken {len(result['broken'])}"
                + ("  LOST" if result["lost"] else ""))
            for line in result["broken"]:
                log(f"  unreadable: {line}")
    report(results, go_on)
    return 0 if not any(r["lost"] or r["broken"] for r in results) else 1


def report(results: list[dict], go_on: float) -> None:
    """The table of what the kills left."""
    def count(test) -> str:
        return str(sum(1 for r in results if test(r)))

    in_window = [r for r in results if 0 <= r["at"] < go_on]
    unstored = [r["at"] for r in results if not r["new"]]
    stored = [r["at"] for r in results if r["new"]]
    rows = [
        ["kills", str(len(results))],
        [f"… in the going-on window (0–{go_on:g} s after the end of speech)", str(len(in_window))],
        ["… after the question was logged as stored", count(lambda r: r["logged"])],
        ["questions lost (logged as stored, not in the store)", count(lambda r: r["lost"])],
        ["message files that do not decrypt", str(sum(len(r["broken"]) for r in results))],
        ["… after the person went on", count(lambda r: r["went_on"])],
        ["questions marked superseded", str(sum(r["superseded"] for r in results))],
        ["in the window: question stored", str(sum(1 for r in in_window if r["new"]))],
        ["latest kill that left no question (s after the end of speech)",
         f"{max(unstored):+.2f}" if unstored else "-"],
        ["earliest kill that left a stored question", f"{min(stored):+.2f}" if stored else "-"],
    ]
    print(table(["kill -9 at a random moment", "count"], rows))


if __name__ == "__main__":
    raise SystemExit(main())
