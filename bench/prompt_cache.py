#!/usr/bin/env python3
"""Benchmark: how much of each turn's prompt the built-in model reads anew, and how fast a memory
job gives the model back at a wake word. Text only (no audio): the shipped settings, memory on,
the built-in SmolLM2-135M in llama.cpp with 2 threads.

    .venv/bin/python -m bench.prompt_cache [--turns 20] [--stops 30]

Per turn from the third on: prompt tokens evaluated against the new turn's tokens (the last
reply and the new question, as the model's tokenizer counts them in the rendered prompt), and
transcript → first token. Then memory jobs (fact extraction over a long exchange) are stopped
at random moments, as the wake word stops them: seconds from the stop to the model being free.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import log, percentile, table
from elara.brain.embedded import load_embedded
from elara.config import load_settings
from elara.conversation.messages import PromptReady
from elara.conversation.store import ConversationStore
from elara.memory.facts import FACTS_SCHEMA
from elara.service.answering import make_monitor, make_orchestrator, open_memory
from elara.service.slices import LanguageModelSlice, MemorySlice

QUESTIONS = [
    "What is the capital of France?", "And what is it famous for?", "Tell me a fun fact about owls.",
    "How do I keep basil alive?", "What should I cook with rice and eggs?",
    "Give me a tip for sleeping better.", "Who wrote Pride and Prejudice?",
    "What is the largest planet?", "How far away is the moon?", "Why is the sky blue?",
    "My name is Sam and I live in Leeds.", "What is a good name for a cat?",
    "How do rainbows form?", "What is the boiling point of water?",
    "Suggest a short walk for a rainy day.", "What is photosynthesis?",
    "How many legs does a spider have?", "What is the tallest mountain?",
    "Tell me a joke about computers.", "What did I say my name was?",
]


#: seconds between the wake word and the end of the question
SPEAKING = 1.5
#: the chat template's tokens around a reply and a question (`<|im_end|>`, `<|im_start|>user` …)
FRAMING = 10


class Quiet:
    """A sink that keeps nothing: the bench times the model, not the voice."""

    async def say(self, sentence: str) -> None:
        pass


async def conversation(turns: int, home: Path) -> list[dict]:
    """Ask `turns` questions in a row through the shipped orchestrator; figures per turn."""
    settings = load_settings(env={"ELARA__Context__StorageRoot": str(home),
                                  "ELARA__Context__EncryptionKey": "bench key",
                                  "ELARA__LanguageModel__Provider": "embedded",
                                  "ELARA__LanguageModel__EmbeddedThreads": "2"})
    llm = await asyncio.to_thread(load_embedded, LanguageModelSlice.of(settings))
    store = ConversationStore(home, "bench key")
    memory = await open_memory(MemorySlice.of(settings), store, llm)
    memory.worker.start()
    orchestrator = make_orchestrator(settings, store, llm, Quiet(), memory, make_monitor(settings))
    llama = llm.loaded.llama
    rows = []
    reply = ""
    try:
        for i in range(turns):
            question = QUESTIONS[i % len(QUESTIONS)]
            total = llama.prompt_evaluated_total
            orchestrator.prepare()  # as the wake word does
            await asyncio.sleep(SPEAKING)  # while the person says the question
            result = await orchestrator.on_prompt_ready(PromptReady(question))
            read = result.prompt_tokens
            # The new turn: the last reply, the stamped question and the chat template's framing.
            stamped = f"[Saturday 28 November 2026, 05:00 UTC] {question}"
            new = len(llama.tokenize(f"{reply}\n{stamped}".encode(), add_bos=False)) + FRAMING
            await memory.worker.drain(120)  # the gap between turns: memory jobs run
            await asyncio.sleep(0.2)  # and the reading ahead they start
            while orchestrator._preparing is not None and not orchestrator._preparing.done():
                await asyncio.sleep(0.05)
            rows.append({"question": question, "evaluated": read.evaluated, "reused": read.reused,
                         "new": new, "first_token": result.timings.first_token,
                         "all": llama.prompt_evaluated_total - total,
                         "summary": memory.summaries.latest.turns if memory.summaries.latest else 0,
                         "facts": len(memory.facts.facts()) if memory.facts else 0})
            reply = result.reply
        if memory.facts is not None:
            log("facts learned: " + "; ".join(f.text for f in memory.facts.facts()))
    finally:
        await memory.worker.stop()
        await llm.aclose()
    return rows


async def stops(count: int) -> list[float]:
    """Seconds from stopping a memory job at a random moment to the model being free."""
    settings = load_settings(env={"ELARA__LanguageModel__EmbeddedThreads": "2"})
    llm = await asyncio.to_thread(load_embedded, LanguageModelSlice.of(settings))
    said = ("I moved to Leeds last spring and I work nights as a nurse at the infirmary; my sister "
            "Maria visits on Sundays with her two dogs. ") * 8
    messages = [{"role": "user", "content": said}]
    waits = []
    rng = random.Random(7)
    try:
        for _ in range(count):
            job = asyncio.create_task(llm.complete_json(messages, FACTS_SCHEMA))
            await asyncio.sleep(rng.uniform(0.05, 1.5))
            if job.done():
                continue
            stopped = time.perf_counter()
            job.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await job
            async with llm.loaded.turn_lock():  # the turn gets the model
                waits.append(time.perf_counter() - stopped)
            llm.loaded.background().reset()  # the next job starts from nothing again
    finally:
        await llm.aclose()
    return waits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--stops", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(conversation(args.turns, Path(tmp)))
    print(table(["turn", "question", "new turn", "evaluated at the question", "reused",
                 "evaluated in all", "first token", "turns summarized", "facts"],
                [[str(i + 1), r["question"], str(r["new"]), str(r["evaluated"]), str(r["reused"]),
                  str(r["all"]), f"{r['first_token']:.3f} s", str(r["summary"]), str(r["facts"])]
                 for i, r in enumerate(rows)]))
    later = rows[2:]
    over = [r["evaluated"] - r["new"] for r in later]
    over_all = [r["all"] - r["new"] for r in later]
    print(f"\nfrom the third turn: evaluated at the question − new turn: median {statistics.median(over)}, "
          f"max {max(over)} tokens ({sum(o <= 40 for o in over)}/{len(over)} within 40); "
          f"in all (reading ahead included): median {statistics.median(over_all)}, max {max(over_all)} "
          f"({sum(o <= 40 for o in over_all)}/{len(over_all)} within 40); "
          f"first token median {statistics.median(r['first_token'] for r in later):.3f} s, "
          f"p90 {percentile([r['first_token'] for r in later], 90):.3f} s")
    log("stopping memory jobs")
    waits = asyncio.run(stops(args.stops))
    print(f"memory job stopped → model free ({len(waits)} stops): median "
          f"{statistics.median(waits) * 1000:.0f} ms, p90 {percentile(waits, 90) * 1000:.0f} ms, "
          f"max {max(waits) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
