#!/usr/bin/env python3
"""Benchmark: the embedded language model (llama.cpp in-process) — load time, first token,
tokens per second and memory (RSS), by default with 2 threads and the built-in SmolLM2-135M.

    .venv/bin/python -m bench.embedded                       # the built-in model
    .venv/bin/python -m bench.embedded --model models/qwen2.5-1.5b-instruct-q4_k_m.gguf
    .venv/bin/python -m bench.embedded --threads 4 --runs 5 --max-tokens 256
    .venv/bin/python -m bench.embedded --beside-piper   # Piper speaking all the while

A "token" here is one streamed piece, as the orchestrator receives it (llama.cpp sends one per
token, except that a few tokens may be held back and sent together, e.g. inside a stop string).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import threading
import time
from pathlib import Path

from bench.common import percentile, rss_mib
from elara.brain.embedded import EmbeddedLanguageModel, load_model, resolve_embedded_model
from elara.conversation.render import ChatRequest
from elara.memory.facts import FactExtractor

SYSTEM = "You are Elara, a helpful voice assistant. Answer briefly, in plain spoken sentences."
QUESTIONS = [
    "What is the capital of France?",
    "Give me three tips for sleeping better.",
    "Explain in a few sentences how a rainbow forms.",
    "What should I cook tonight with rice, eggs and spinach?",
]
#: What the memory's fact extraction reads after a turn (a reply under a JSON grammar).
SAID = [
    ("My sister Maria's birthday is on 3 May and I work as a nurse in Leeds.", "Noted!"),
    ("What's the weather like?", "I can't see outside, sorry."),
]


class PiperSpeaking:
    """The daemon's Piper voice synthesizing sentence after sentence in a thread, as while she
    speaks a long reply: onnxruntime's own thread pool busy beside llama.cpp's."""

    def __init__(self) -> None:
        from elara.voice.models import resolve_voice
        from elara.voice.tts import PiperSynthesizer

        record = resolve_voice("en_US-joe-medium")
        self._voice = PiperSynthesizer(record.path, record.config_path)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._speak, daemon=True)
        self.sentences = 0

    def _speak(self) -> None:
        while not self._stop.is_set():
            self._voice.synthesize("Once upon a time a lighthouse keeper lived on a small rocky island.")
            self.sentences += 1

    def __enter__(self) -> PiperSpeaking:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def one_reply(model: EmbeddedLanguageModel, question: str) -> tuple[float, float, int]:
    """Seconds to the first piece, seconds in total, and pieces, for one streamed reply."""
    request = ChatRequest(messages=({"role": "system", "content": SYSTEM},
                                    {"role": "user", "content": question}))
    started = time.perf_counter()
    first = None
    pieces = 0
    async for _ in model.stream(request):
        if first is None:
            first = time.perf_counter() - started
        pieces += 1
    total = time.perf_counter() - started
    return (first if first is not None else total), total, pieces


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a GGUF chat model (default: the built-in SmolLM2-135M)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3, help="passes over the questions")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--ctx", type=int, default=4096, help="context window (num_ctx)")
    parser.add_argument("--beside-piper", action="store_true",
                        help="measure while Piper synthesizes speech without a break in this process")
    args = parser.parse_args()

    path = resolve_embedded_model(args.model)
    before = rss_mib()
    started = time.perf_counter()
    model = load_model(path, threads=args.threads, timeout_seconds=600,
                       options={"num_ctx": args.ctx, "temperature": 0.0,
                                "num_predict": args.max_tokens})
    load = time.perf_counter() - started
    loaded = rss_mib()
    info = asyncio.run(model.check())

    async def run_all() -> tuple[list[tuple[float, float, int]], list[float]]:
        await model.warm_up()
        replies = [await one_reply(model, q) for _ in range(args.runs) for q in QUESTIONS]
        facts = []
        for _ in range(args.runs):
            for user, assistant in SAID:
                started = time.perf_counter()
                await FactExtractor(model).extract(user, assistant, [])
                facts.append(time.perf_counter() - started)
        return replies, facts

    piper = PiperSpeaking() if args.beside_piper else None
    with piper or contextlib.nullcontext():
        results, facts = asyncio.run(run_all())
    now, peak = rss_mib(), rss_mib(field="VmHWM")
    model.close()

    firsts = [first for first, _, _ in results]
    rates = [(pieces - 1) / (total - first) for first, total, pieces in results
             if pieces > 1 and total > first]
    size = Path(path).stat().st_size / 2**20
    print(f"model {info.name} ({info.family}, {info.parameter_size or '?'} parameters, "
          f"{info.quantization or '?'}; {size:.0f} MiB file), {args.threads} threads, "
          f"context {args.ctx}, up to {args.max_tokens} tokens, {len(results)} replies"
          + (f", Piper synthesizing beside it ({piper.sentences} sentences)" if piper else ""))
    print("| measurement | value |")
    print("| --- | ---: |")
    print(f"| load (llama.cpp, mmap) | {load:.2f} s |")
    print(f"| first token, median (p90) | {statistics.median(firsts) * 1000:.0f} ms "
          f"({percentile(firsts, 90) * 1000:.0f} ms) |")
    if rates:
        print(f"| tokens per second after the first, median | {statistics.median(rates):.1f} |")
    print(f"| reply length, median | {statistics.median(p for _, _, p in results):.0f} tokens |")
    print(f"| reply, whole, median (p90) | {statistics.median(t for _, t, _ in results):.2f} s "
          f"({percentile([t for _, t, _ in results], 90):.2f} s) |")
    print(f"| fact extraction (JSON under a grammar), median (p90) | {statistics.median(facts):.2f} s "
          f"({percentile(facts, 90):.2f} s) |")
    print(f"| RSS before load / after load / after the replies | {before:.0f} / {loaded:.0f} / "
          f"{now:.0f} MiB |")
    print(f"| peak RSS | {peak:.0f} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
