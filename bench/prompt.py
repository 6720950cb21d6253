#!/usr/bin/env python3
"""Benchmark: prompt build + render for LastN=6, over a real encrypted store of 10 000 messages."""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from elara.config import load_settings
from elara.conversation.context import TURN_ROLES, LastNContextProvider, TokenBudgetContextProvider
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.render import OllamaChatRenderer
from elara.conversation.store import ConversationStore
from elara.memory.manager import Memory
from elara.service.answering import make_builder, make_monitor

RUNS = 2000


def fill(store: ConversationStore, count: int) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(count):
        role = ChatRole.USER if i % 2 == 0 else ChatRole.ASSISTANT
        store.append(ChatMessage(role, f"message {i}: " + "words " * 20, t0 + timedelta(seconds=i)))


async def measure(builder: PromptBuilder, renderer: OllamaChatRenderer) -> list[float]:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        renderer.render(await builder.build("What's the weather like tomorrow?", 6))
        times.append(time.perf_counter() - start)
    return times


def report(name: str, times: list[float]) -> None:
    times = sorted(times)
    median = statistics.median(times) * 1000
    p99 = times[int(len(times) * 0.99)] * 1000
    print(f"| {name} | {median:.3f} ms | {p99:.3f} ms |")


def main() -> int:
    settings = load_settings(env={})
    system = ConfigSystemPrompt(settings.language_model.system_prompt)
    with tempfile.TemporaryDirectory() as tmp:
        store = ConversationStore(Path(tmp), "bench")
        fill(store, 2000)
        renderer = OllamaChatRenderer()
        store_backed = PromptBuilder(system, [TokenBudgetContextProvider(
            LastNContextProvider(store), settings.context.max_history_tokens)])
        print(f"prompt build + render, LastN=6, {RUNS} runs")
        print("| path | median | p99 |\n| --- | --- | --- |")
        report("real store (read_tail in a worker thread) + budget + chat render",
               asyncio.run(measure(store_backed, renderer)))

        async def with_memory():
            memory = Memory(settings, store, None)
            for i in range(20):  # a full fact book and a summary, as after weeks of use
                memory.facts.remember(f"The user's friend number {i} is called Friend{i}.")
            memory.summaries.save("The user asked about many things. " * 10,
                                  store.read_tail(40, TURN_ROLES)[:20], "bench")
            await memory.load()
            builder = make_builder(settings, store, memory, make_monitor(settings))
            return await measure(builder, renderer)

        report("+ memory: 20 facts, a summary, telemetry", asyncio.run(with_memory()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
