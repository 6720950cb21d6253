"""What a round of tool calling costs a turn: from the model's call to the first audio of the answer.

The daemon's own orchestrator, store, timers and Piper voice; the model is the Ollama-protocol test
server (tests/rig), so the figures are Elara's overhead, not a model's thinking. Each tool turn asks
"time my tea, ten minutes": the model calls `set_timer`, Elara runs it (the timer written to the
encrypted store), the result goes back, the answer streams and its first sentence is voiced. A
control turn answers the same question without a tool.

    .venv/bin/python -m bench.tool_rounds [--turns 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import log, percentile, table
from elara.config import bind, packaged_defaults
from elara.conversation.messages import PromptReady
from elara.conversation.store import ConversationStore
from elara.service import answering
from elara.service.engines import load_text_to_speech
from elara.service.slices import LanguageModelSlice, TextToSpeechSlice
from elara.skills.timers import TimerBook
from tests.rig.ollama_server import FakeOllamaServer, ToolCalls, pending_tool_results

ANSWER = "Your tea timer is running. I will ring in ten minutes."


class VoicedSink:
    """Voices the first sentence of each reply with Piper and notes when its audio was ready."""

    def __init__(self, synthesizer) -> None:
        self.synthesizer = synthesizer
        self.first_audio: float | None = None

    async def say(self, sentence: str) -> None:
        """Voice the reply's first sentence."""
        if self.first_audio is None:
            await asyncio.to_thread(self.synthesizer.synthesize, sentence)
            self.first_audio = time.monotonic()


def respond(endpoint: str, body: dict) -> str | ToolCalls:
    """A model that sets a timer when offered tools and answers from the result."""
    if pending_tool_results(body) or not body.get("tools"):
        return ANSWER
    return ToolCalls([("set_timer", {"seconds": 600, "name": "tea"})])


async def one_turn(orchestrator, sink: VoicedSink, runs: list[tuple[float, float]]) -> dict[str, float]:
    """Seconds from the question to the first audio, and (a tool turn) from the call to its
    result and from the result to the first audio."""
    sink.first_audio = None
    runs.clear()
    started = time.monotonic()
    result = await orchestrator.on_prompt_ready(PromptReady("time my tea, ten minutes"))
    assert result.ok and sink.first_audio is not None, result
    figures = {"question → first audio": sink.first_audio - started}
    if runs:
        (called, returned), = runs
        figures["call → result"] = returned - called
        figures["result → first audio"] = sink.first_audio - returned
        figures["call → first audio"] = sink.first_audio - called
    return figures


async def measure(turns: int, root: Path) -> dict[str, dict[str, list[float]]]:
    """Tool turns and control turns, alternating."""
    data = packaged_defaults()
    synthesizer = load_text_to_speech(TextToSpeechSlice.of(bind(data)))
    found: dict[str, dict[str, list[float]]] = {"tool": {}, "control": {}}
    with FakeOllamaServer(models=["tool-model", "plain-model"], responder=respond) as server:
        server.model_capabilities = {"tool-model": ["completion", "tools"]}
        for kind, model in (("tool", "tool-model"), ("control", "plain-model")):
            data["LanguageModel"].update({"Provider": "ollama", "Model": model, "Host": server.url})
            data["Memory"].update({"Summaries": False, "Facts": "off"})
            settings = bind(data)
            store = ConversationStore(root / kind, "bench")
            book = TimerBook(store)
            book.load()
            llm = answering.make_ollama(LanguageModelSlice.of(settings))
            await llm.check()
            sink = VoicedSink(synthesizer)
            orchestrator = answering.make_orchestrator(settings, store, llm, sink,
                                                       commands=answering.make_commands(settings, book))
            runs: list[tuple[float, float]] = []
            if orchestrator.acting is not None:
                toolbox = orchestrator.acting.toolbox
                run = toolbox.run

                async def timed(spec, call, run=run, runs=runs):
                    called = time.monotonic()
                    outcome = await run(spec, call)
                    runs.append((called, time.monotonic()))
                    return outcome

                toolbox.run = timed  # type: ignore[method-assign]
            for index in range(turns + 2):
                figures = await one_turn(orchestrator, sink, runs)
                if index >= 2:  # the first turns warm the client and Piper up
                    for name, value in figures.items():
                        found[kind].setdefault(name, []).append(value)
            await llm.aclose()
            log(f"{kind}: {turns} turns")
    return found


def report(found: dict[str, dict[str, list[float]]]) -> str:
    """The table: median and p90 of each span, in milliseconds."""
    rows = []
    for kind, spans in found.items():
        for name, values in spans.items():
            rows.append([kind, name, f"{statistics.median(values) * 1000:.0f}",
                         f"{percentile(values, 90) * 1000:.0f}", str(len(values))])
    return table(["turn", "span", "median ms", "p90 ms", "turns"], rows)


def main() -> None:
    """Run the bench and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        print(report(asyncio.run(measure(args.turns, Path(root)))))


if __name__ == "__main__":
    main()
