"""`elara ask` and `elara chat`: turns typed at the terminal, through the same orchestrator."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import TYPE_CHECKING, TextIO

from elara.cli.timers import tell_daemon
from elara.conversation.messages import PromptReady
from elara.conversation.store import ConversationStore
from elara.errors import ElaraError
from elara.service import answering
from elara.service.slices import LanguageModelSlice, MemorySlice, ToolServersSlice
from elara.settings import Settings
from elara.skills.timers import TimerBook

if TYPE_CHECKING:  # loaded when a turn runs, not for every command's start-up
    from elara.brain.orchestrator import SentenceSink
    from elara.brain.providers import Provider
    from elara.memory.manager import Memory
    from elara.skills.commands import LocalCommands
    from elara.tools.sources import ToolSource

log = logging.getLogger(__name__)

#: longest wait before the first typed question for the model's check (it tells whether the
#: model can call tools); a model that takes longer is asked without tools at first
CHECK_WAIT_SECONDS = 10.0


class PrintSink:
    """Prints each sentence as it completes, on one line per reply."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout
        self._started = False

    async def say(self, sentence: str) -> None:
        """Print one sentence straight away."""
        self._stream.write((" " if self._started else "") + sentence)
        self._stream.flush()
        self._started = True

    def end_reply(self) -> None:
        """Finish the reply's line."""
        if self._started:
            self._stream.write("\n")
            self._stream.flush()
        self._started = False


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `ask` and `chat`."""
    ask = commands.add_parser("ask", help="ask one question and print the reply as it streams")
    ask.add_argument("text", nargs="+", help="the question")
    ask.add_argument("--speak", action="store_true", help="also speak the reply aloud")
    ask.set_defaults(handler=lambda args, settings: asyncio.run(
        _ask(" ".join(args.text), settings, speak=args.speak)))
    chat = commands.add_parser("chat", help="talk to Elara by typing; an empty line or EOF ends it")
    chat.set_defaults(handler=lambda args, settings: asyncio.run(_chat(settings)))


class TeeSink:
    """Hands each sentence to several sinks (print and speak)."""

    def __init__(self, *sinks) -> None:
        self.sinks = sinks

    async def say(self, sentence: str) -> None:
        """Deliver the sentence to every sink."""
        for sink in self.sinks:
            await sink.say(sentence)


async def _open_parts(settings: Settings) -> tuple[ConversationStore, Provider, Memory]:
    """The store, the language model and memory, built as the daemon builds them."""
    store = answering.open_store(settings)
    llm = await asyncio.to_thread(answering.load_language_model, LanguageModelSlice.of(settings))
    memory = await answering.open_memory(MemorySlice.of(settings), store, llm)
    await memory.apply_retention()
    memory.worker.start()
    return store, llm, memory


async def _open_tools(settings: Settings) -> tuple[ToolSource, ...]:
    """The MCP servers of `Tools.McpServers`, started as the daemon starts them."""
    from elara.service.build import open_tool_servers

    return await open_tool_servers(ToolServersSlice.of(settings))


async def _close(llm: Provider, memory: Memory, tools: tuple[ToolSource, ...]) -> None:
    from elara.service.build import close_tool_servers

    await memory.worker.stop()
    await close_tool_servers(tools)
    await llm.aclose()


async def _commands(settings: Settings, store: ConversationStore) -> LocalCommands:
    """Timers set here are kept in the store; the running daemon is told, so it rings them."""
    book = TimerBook(store)
    await asyncio.to_thread(book.load)
    return answering.make_commands(settings, book, notify=tell_daemon)


async def _ask(text: str, settings: Settings, *, speak: bool = False) -> int:
    store, llm, memory = await _open_parts(settings)
    tools = await _open_tools(settings)
    await _check(llm, report=False)  # it tells whether the model can call tools; the turn reports
    printer = PrintSink()
    speech = speaker = None
    sink: SentenceSink = printer
    if speak:
        from elara.service.build import open_speaker
        from elara.service.engines import load_text_to_speech
        from elara.service.slices import SpeakerSlice, TextToSpeechSlice
        from elara.voice.speech import SpeechSink

        voice = await asyncio.to_thread(load_text_to_speech, TextToSpeechSlice.of(settings))
        speaker = open_speaker(SpeakerSlice.of(settings), reference=False)
        speech = SpeechSink(voice, speaker, first_chunk_words=settings.text_to_speech.first_chunk_words)
        sink = TeeSink(printer, speech)
    try:
        result = await answering.make_orchestrator(
            settings, store, llm, sink, memory, commands=await _commands(settings, store),
            tools=tools).on_prompt_ready(PromptReady(text))
        if speech is not None:
            await speech.finish()
        printer.end_reply()
        # The reply is out; what this turn taught Elara is stored before the process ends.
        await memory.worker.drain(settings.language_model.timeout_seconds)
    finally:
        printer.end_reply()
        if speaker is not None:
            await speaker.close()
        await _close(llm, memory, tools)
    if result.error is not None:
        print(f"elara: {result.error}", file=sys.stderr)
        return result.error.exit_status
    return 0


async def _chat(settings: Settings) -> int:
    store, llm, memory = await _open_parts(settings)
    tools = await _open_tools(settings)
    sink = PrintSink()
    commands = await _commands(settings, store)
    orchestrator = answering.make_orchestrator(settings, store, llm, sink, memory, commands=commands,
                                               tools=tools)
    interactive = sys.stdin.isatty()
    # Check and load the model while the user types the first question, so that answer isn't
    # slowed by it.
    checking = asyncio.create_task(_check(llm))
    warming = asyncio.create_task(_warm(llm, checking))
    try:
        while True:
            line = await asyncio.to_thread(_read_line, "you> " if interactive else "")
            if line is None or not line.strip():
                break
            await asyncio.wait([checking], timeout=CHECK_WAIT_SECONDS)
            if interactive:
                sys.stdout.write("elara> ")
            await orchestrator.on_prompt_ready(PromptReady(line.strip()))
            sink.end_reply()
        await memory.worker.drain(settings.language_model.timeout_seconds)
    finally:
        warming.cancel()
        checking.cancel()
        await _close(llm, memory, tools)
    return 0


async def _check(llm: Provider, *, report: bool = True) -> bool:
    """Ask the model what it is (and whether it calls tools); with `report`, a failure is printed."""
    try:
        await llm.check()
        return True
    except ElaraError as exc:
        if report:
            print(f"elara: {exc}", file=sys.stderr)
        else:
            log.debug("the model's check failed: %s", exc)
        return False


async def _warm(llm: Provider, checking: asyncio.Task[bool]) -> None:
    if not await checking:
        return
    try:
        await llm.warm_up()
    except ElaraError as exc:
        print(f"elara: {exc}", file=sys.stderr)


def _read_line(prompt: str) -> str | None:
    try:
        return input(prompt)
    except EOFError:
        return None
