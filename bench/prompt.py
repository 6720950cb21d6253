#!/usr/bin/env python3
"""Benchmark: prompt build + render for LastN=6, over a real encrypted store of 2000 messages.

    .venv/bin/python -m bench.prompt [--runs 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import percentile
from elara.config import load_settings
from elara.conversation.context import TURN_ROLES, LastNContextProvider
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.render import OllamaChatRenderer
from elara.conversation.store import ConversationStore
from elara.memory.manager import Memory
from elara.service.answering import make_builder, make_monitor


def fill(store: ConversationStore, count: int) -> None:
    """Append `count` messages of about 20 words, a second apart, user and assistant in turn."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(count):
        role = ChatRole.USER if i % 2 == 0 else ChatRole.ASSISTANT
        store.append(ChatMessage(role, f"message {i}: " + "words " * 20, t0 + timedelta(seconds=i)))


async def measure(builder: PromptBuilder, renderer: OllamaChatRenderer, runs: int) -> list[float]:
    """Seconds per prompt build and render, over `runs` runs."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        renderer.render(await builder.build("What's the weather like tomorrow?", 6))
        times.append(time.perf_counter() - start)
    return times


def report(name: str, times: list[float]) -> None:
    """One row of the table: median and p99 in ms."""
    median = statistics.median(times) * 1000
    p99 = percentile(times, 99) * 1000
    print(f"| {name} | {median:.3f} ms | {p99:.3f} ms |")


def main() -> int:
    """Fill a store, time the builds, print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="prompt builds per row")
    args = parser.parse_args()
    settings = load_settings(env={})
    system = ConfigSystemPrompt(settings.language_model.system_prompt)
    with tempfile.TemporaryDirectory() as tmp:
        store = ConversationStore(Path(tmp), "bench")
        fill(store, 2000)
        renderer = OllamaChatRenderer()
        store_backed = PromptBuilder(system, [LastNContextProvider(
            store, settings.context.max_history_tokens)])
        print(f"prompt build + render, LastN=6, {args.runs} runs")
        print("| path | median | p99 |\n| --- | --- | --- |")
        report("real store (read_tail in a worker thread) + budget + chat render",
               asyncio.run(measure(store_backed, renderer, args.runs)))

        async def with_memory():
            memory = Memory(settings, store, None)
            for i in range(20):  # a full fact book and a summary, as after weeks of use
                memory.facts.remember(f"The user's friend number {i} is called Friend{i}.")
            memory.summaries.save("The user asked about many things. " * 10,
                                  store.read_tail(40, TURN_ROLES)[:20], "bench")
            await memory.load()
            builder = make_builder(settings, store, memory, make_monitor(settings))
            return await measure(builder, renderer, args.runs)

        report("+ memory: 20 facts, a summary, telemetry", asyncio.run(with_memory()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
