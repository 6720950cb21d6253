"""The answering side, built from settings: the store, the language model and memory (each from
its slice), and the cheap parts over them — prompt builder, renderer, context monitor, local
commands and the orchestrator. The daemon and the commands share it."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from elara.brain import personalities
from elara.conversation import telemetry
from elara.conversation.context import ContextProvider, LastNContextProvider
from elara.conversation.messages import Prompt
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder, SystemPromptProvider
from elara.conversation.redaction import Redactor
from elara.conversation.render import OllamaChatRenderer, PromptRenderer, TranscriptRenderer
from elara.conversation.store import ConversationStore
from elara.errors import WrongKeyError
from elara.service import keys
from elara.service.paths import default_store_root
from elara.service.slices import LanguageModelSlice, MemorySlice
from elara.settings import Settings

if TYPE_CHECKING:  # the command line imports this module; the model clients load when used
    from elara.brain.acting import Acting
    from elara.brain.ollama import OllamaLanguageModel
    from elara.brain.orchestrator import Orchestrator, SentenceSink
    from elara.brain.providers import Provider
    from elara.memory.manager import Memory
    from elara.skills.announcements import Announcer
    from elara.skills.commands import LocalCommands
    from elara.skills.timers import TimerBook
    from elara.tools.sources import ToolSource
    from elara.tools.toolbox import ToolCounts

log = logging.getLogger(__name__)

#: Ollama's context window when LanguageModel.Options sets no num_ctx
DEFAULT_NUM_CTX = 4096


def store_root(settings: Settings) -> Path:
    """`Context.StorageRoot`, or `<cache root>/Conversation` when it is null."""
    configured = settings.context.storage_root
    return Path(configured).expanduser() if configured else default_store_root()


def encryption_passphrase(settings: Settings, env: Mapping[str, str] | None = None) -> str:
    """The history's passphrase as `elara.service.keys.resolve` finds it, generating nothing.
    ConfigError if a key file is unusable."""
    return keys.resolve(settings, env).passphrase


def open_store(settings: Settings, *, create_key: bool = True) -> ConversationStore:
    """Open the encrypted store; WrongKeyError when the key does not match the history.

    With create_key (for commands that write), a store with no messages and no configured key
    gets a generated one (elara.service.keys); commands that only read pass False.
    """
    return open_store_with_key(settings, create_key=create_key)[0]


def open_store_with_key(settings: Settings, *,
                        create_key: bool = True) -> tuple[ConversationStore, keys.Key]:
    """`open_store`, and the key it opened with (the daemon watches the file it came from)."""
    root = store_root(settings)
    key = keys.resolve(settings, generate_for=root if create_key else None)
    try:
        return ConversationStore(root, key.passphrase), key
    except WrongKeyError as exc:
        if key.source.kind != keys.DEFAULT:
            raise
        raise keys.lost_key_error(root, exc) from None


# ---------------------------------------------------------------------------------------------
# the language model and memory, each from its slice


def make_ollama(s: LanguageModelSlice) -> OllamaLanguageModel:
    """The Ollama adapter over the official async client, with the configured timeout."""
    from elara.brain.ollama import OllamaLanguageModel, make_client

    lm = s.language_model
    preset = personalities.resolve(lm.personality, s.personalities)
    return OllamaLanguageModel(
        make_client(lm.host, lm.timeout_seconds), model=lm.model, host=lm.host,
        keep_alive=lm.keep_alive, options=personalities.model_options(preset, lm.options),
        timeout_seconds=lm.timeout_seconds)


def load_language_model(s: LanguageModelSlice) -> Provider:
    """The model `LanguageModel.Provider` names: Ollama, the embedded model, or (`auto`) Ollama
    with the embedded model to fall back on. Blocking for `embedded` (it loads the model): call it
    in a worker thread. ConfigError when the embedded model file is unusable."""
    from elara.brain import embedded
    from elara.brain.providers import EMBEDDED, OLLAMA, AutoLanguageModel

    lm = s.language_model
    if lm.provider == OLLAMA:
        return make_ollama(s)
    if lm.provider == EMBEDDED:
        return embedded.load_embedded(s)
    embedded.resolve_embedded_model(lm.embedded_model)  # a bad path is a config error now, not later
    return AutoLanguageModel(
        make_ollama(s), functools.partial(embedded.load_embedded, s),
        ollama_hint=f"start Ollama (`ollama serve`) and run `ollama pull {lm.model}`")


async def open_memory(s: MemorySlice, store: ConversationStore, llm: Provider) -> Memory:
    """Memory over `store`, asking `llm`, with what it knows read from the store."""
    from elara.memory.manager import Memory

    memory = Memory(s, store, llm)
    await memory.load()
    return memory


# ---------------------------------------------------------------------------------------------
# the cheap parts, built anew each time


def make_renderer(settings: Settings) -> PromptRenderer:
    """Chat messages for /api/chat (the default) or a transcript for /api/generate."""
    return OllamaChatRenderer() if settings.language_model.api == "chat" else TranscriptRenderer()


class ContextMonitor:
    """Measures every prompt against the model's context window: DEBUG figures, a WARNING above
    80 %, and the last measurement for `elara status`."""

    def __init__(self, num_ctx: int) -> None:
        self.num_ctx = num_ctx
        self.last: telemetry.ContextUsage | None = None

    def __call__(self, prompt: Prompt) -> None:
        """Measure one prompt."""
        self.last = telemetry.measure(prompt, self.num_ctx)
        telemetry.check(self.last, log)

    def status(self) -> dict[str, object] | None:
        """The last prompt's size per part against `num_ctx`, for `elara status`."""
        usage = self.last
        if usage is None:
            return None
        return {"parts": dict(usage.parts), "total": usage.total, "num_ctx": usage.num_ctx,
                "fraction": round(usage.fraction, 3)}


def make_builder(settings: Settings, store: ConversationStore, memory: Memory | None = None,
                 monitor: ContextMonitor | None = None) -> PromptBuilder:
    """The prompt builder: the personality's system prompt (with what Elara knows about the
    user), then the summary and the recent turns under the budget, then the retrieved turns."""
    lm = settings.language_model
    preset = personalities.resolve(lm.personality, settings.personalities)
    system: SystemPromptProvider = ConfigSystemPrompt(personalities.system_prompt(preset, lm.system_prompt))
    pinned: list[ContextProvider] = []
    recall: list[ContextProvider] = []
    if memory is not None:
        system = memory.system_prompt(system)
        pinned, recall = memory.pinned_context(), memory.recall()
    context = LastNContextProvider(store, settings.context.max_history_tokens, pinned=pinned)
    return PromptBuilder(system, [context], on_prompt=monitor, recall=recall)


def make_monitor(settings: Settings) -> ContextMonitor:
    """The context-window monitor for the configured num_ctx (Ollama's default when unset)."""
    return ContextMonitor(int(settings.language_model.options.get("num_ctx", DEFAULT_NUM_CTX)))


def make_orchestrator(settings: Settings, store: ConversationStore, llm: Provider,
                      sink: SentenceSink, memory: Memory | None = None,
                      monitor: ContextMonitor | None = None,
                      commands: LocalCommands | None = None, room: str | None = None,
                      tools: Sequence[ToolSource] = (), counts: ToolCounts | None = None) -> Orchestrator:
    """The orchestrator over the store, the model, a sink and (optionally) memory, the local
    commands (dropped when `Intents.Enabled` is false) and the tools (the built-in ones over the
    same commands, and `tools`, the MCP servers' — started by the caller); `room` names a
    satellite's room."""
    from elara.brain.orchestrator import Orchestrator

    orchestrator = Orchestrator(
        store=store, builder=make_builder(settings, store, memory, monitor),
        renderer=make_renderer(settings), llm=llm, sink=sink, context_size=settings.context.last_n,
        redact=Redactor(settings.context.redact),
        observers=[memory.worker] if memory is not None else [],
        commands=commands if settings.intents.enabled else None, room=room,
        acting=make_acting(settings, store, commands, memory, tools, counts))
    if memory is not None and room is None:
        memory.worker.on_idle["prompt"] = orchestrator.prepare
    return orchestrator


def make_acting(settings: Settings, store: ConversationStore, commands: LocalCommands | None,
                memory: Memory | None, tools: Sequence[ToolSource],
                counts: ToolCounts | None) -> Acting | None:
    """The tool calling of one orchestrator (None with `Tools.Enabled` false): the built-in tools
    over its commands, the facts and the history, and the MCP servers' tools, under `Tools.Allow`
    and `Tools.Confirm`."""
    if not settings.tools.enabled:
        return None
    from elara.brain.acting import Acting
    from elara.conversation.prompts import utc_now
    from elara.tools.builtin import BuiltinTools
    from elara.tools.policy import ToolPolicy
    from elara.tools.toolbox import Toolbox

    t, listening = settings.tools, settings.listening
    sources: list[ToolSource] = list(tools)
    if commands is not None:
        sources.insert(0, BuiltinTools(commands, facts=memory.facts if memory is not None else None,
                                       history=store))
    toolbox = Toolbox(sources, ToolPolicy(t.allow, t.confirm), counts)
    # The yes may come within the follow-up window after the question, and take a whole utterance.
    window = listening.follow_up_seconds + listening.max_utterance_seconds
    return Acting(toolbox, max_rounds=t.max_rounds, confirm_seconds=window, clock=utc_now)


def make_commands(settings: Settings, book: TimerBook, announcer: Announcer | None = None,
                  notify: Callable[[], None] | None = None, room: str | None = None) -> LocalCommands:
    """The everyday commands over these timers, with the configured limits; timers set from a
    satellite's `room` ring there."""
    from elara.skills.commands import LocalCommands

    return LocalCommands(book, max_seconds=settings.timers.max_hours * 3600, announcer=announcer,
                         notify=notify, room=room)
