#!/usr/bin/env python3
"""Benchmark remote speech engines: what a Wyoming service on loopback adds to a turn.

Starts real wyoming-faster-whisper (Elara's tiny.en, int8, beam 1) and wyoming-piper (the joe
voice) on 127.0.0.1, then, on the same audio and text back to back (the order alternating):

- speech to text: 20 questions in four voices (Piper joe, espeak-ng en-us, en-gb, en-us+f3),
  local `Transcriber` against `WyomingTranscriber` — seconds per utterance and words right;
- text to speech: 20 reply sentences, local `PiperSynthesizer` against `WyomingSynthesizer` —
  seconds to the whole clip (what the speech sink waits for before playing a sentence);
- with `--daemon`: bench/voice.py (`--only now`, finished questions only) run twice, with
  local engines and with both engines remote, for end of speech → first audio.

Both services run on the same 2 cores as Elara, as on a one-box install; on a second machine the
compute moves off the box and only the protocol's cost (measured by `describe`) stays.

    .venv/bin/python -m bench.remote [--daemon] [--turns 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import log, percentile, speech, words
from elara.settings import parse_engine
from elara.voice.models import resolve_voice, resolve_whisper
from elara.voice.remote import WyomingClient, WyomingSynthesizer, WyomingTranscriber
from elara.voice.stt import Transcriber
from elara.voice.tts import PiperSynthesizer
from tests.rig.wyoming_services import both

QUESTIONS = (
    "What is the capital of France?", "How far away is the moon?", "Set a timer for ten minutes.",
    "What should I cook for dinner tonight?", "Who wrote Pride and Prejudice?",
    "How many legs does a spider have?", "What is the weather like tomorrow?",
    "Tell me a fun fact about octopuses.", "What time is it in Tokyo?", "How do I boil an egg?",
)
VOICES = (("piper", 1.0), ("espeak", "en-us", 150), ("espeak", "en-gb", 150), ("espeak", "en-us+f3", 150))
SENTENCES = (
    "Paris is the capital of France.", "The moon is about three hundred and eighty thousand kilometres away.",
    "Your pasta timer is done.", "How about a simple tomato pasta with garlic and basil?",
    "Jane Austen wrote it in eighteen thirteen.", "A spider has eight legs.",
    "Tomorrow looks sunny, with a light breeze in the afternoon.",
    "An octopus has three hearts and blue blood.", "It is a quarter past nine in the evening in Tokyo.",
    "Put the egg in boiling water for about seven minutes.",
)


def summary(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} / {percentile(values, 90) * 1000:.0f} ms"


def client(uri: str, service: str) -> WyomingClient:
    address = parse_engine(uri)
    assert address is not None
    return WyomingClient(address, service, timeout=30.0, setting="the bench's service")


def engines(whisper_uri: str, piper_uri: str, turns: int) -> None:
    local_stt = Transcriber(resolve_whisper("tiny.en").path)
    remote_stt = WyomingTranscriber(client(whisper_uri, "speech-to-text"))
    record = resolve_voice("en_US-joe-medium")
    assert record.config_path is not None
    local_tts = PiperSynthesizer(record.path, record.config_path)
    remote_tts = WyomingSynthesizer(client(piper_uri, "text-to-speech"))
    remote_tts.synthesize("Ready.")  # the service loads its voice on the first request
    local_tts.synthesize("Ready.")

    times: dict[str, list[float]] = {"stt local": [], "stt remote": [], "tts local": [], "tts remote": []}
    right = {"local": 0, "remote": 0}
    total = 0
    for i in range(turns):
        question = QUESTIONS[i % len(QUESTIONS)]
        audio = speech(VOICES[i % len(VOICES)], question)
        expected = words(question)
        total += len(expected)
        order = (("local", local_stt), ("remote", remote_stt))
        for name, engine in order if i % 2 == 0 else order[::-1]:
            started = time.perf_counter()
            heard = engine.transcribe(audio)
            times[f"stt {name}"].append(time.perf_counter() - started)
            right[name] += sum(1 for w in expected if w in words(heard.text))
        sentence = SENTENCES[i % len(SENTENCES)]
        order_tts = (("local", local_tts), ("remote", remote_tts))
        for name, synth in order_tts if i % 2 == 0 else order_tts[::-1]:
            started = time.perf_counter()
            synth.synthesize(sentence)
            times[f"tts {name}"].append(time.perf_counter() - started)
        log(f"{i + 1}/{turns}")

    describe = []
    for _ in range(20):
        started = time.perf_counter()
        client(whisper_uri, "speech-to-text").describe()
        describe.append(time.perf_counter() - started)

    print(f"remote engines on loopback, {turns} utterances in {len(VOICES)} voices and {turns} sentences "
          "(median / p90)\n")
    print("| step | local (in-process) | remote (Wyoming, loopback) | added |")
    print("| --- | ---: | ---: | ---: |")
    for step, label in (("stt", "speech to text, per utterance"), ("tts", "text to speech, per sentence")):
        local, remote = times[f"{step} local"], times[f"{step} remote"]
        added = statistics.median(remote) - statistics.median(local)
        print(f"| {label} | {summary(local)} | {summary(remote)} | {added * 1000:+.0f} ms |")
    print(f"| question words heard right | {right['local']}/{total} | {right['remote']}/{total} | |")
    print(f"| a `describe` round trip (connect, ask, answer) | | {summary(describe)} | |")


def daemon(whisper_uri: str, piper_uri: str, turns: int) -> None:
    base = [sys.executable, "-m", "bench.voice", "--only", "now", "--turns", str(turns),
            "--hesitant", "0", "--idle-seconds", "5"]
    for name, extra in (("local engines", []),
                        ("both engines remote", ["--set", f"SpeechToText__Engine={whisper_uri}",
                                                 "--set", f"TextToSpeech__Engine={piper_uri}"])):
        log(f"bench/voice.py with {name}")
        done = subprocess.run(base + extra, capture_output=True, text=True, timeout=3600)
        print(f"\n### {name}\n")
        print(done.stdout)
        if done.returncode:
            print(done.stderr[-3000:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--daemon", action="store_true", help="also run bench/voice.py local vs remote")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, both(Path(tmp)) as (whisper, piper):
        engines(whisper.uri, piper.uri, args.turns)
        if args.daemon:
            daemon(whisper.uri, piper.uri, args.turns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
