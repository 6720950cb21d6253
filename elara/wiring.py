"""Builds the conversation parts from Settings; the command line and the daemon share it."""

from __future__ import annotations

from pathlib import Path

from elara.conversation.context import LastNContextProvider, TokenBudgetContextProvider
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.render import OllamaChatRenderer, PromptRenderer, TranscriptRenderer
from elara.conversation.store import ConversationStore
from elara.llm import OllamaLanguageModel, make_client
from elara.orchestrator import Orchestrator, SentenceSink
from elara.paths import default_store_root
from elara.settings import Settings


def store_root(settings: Settings) -> Path:
    """`Context.StorageRoot`, or `<cache root>/Conversation` when it is null."""
    configured = settings.context.storage_root
    return Path(configured).expanduser() if configured else default_store_root()


def open_store(settings: Settings) -> ConversationStore:
    """Open the encrypted store; WrongKeyError when the key does not match the history."""
    return ConversationStore(store_root(settings), settings.context.encryption_key)


def make_language_model(settings: Settings) -> OllamaLanguageModel:
    """The Ollama adapter over the official async client, with the configured timeout."""
    lm = settings.language_model
    return OllamaLanguageModel(
        make_client(lm.host, lm.timeout_seconds), model=lm.model, host=lm.host,
        keep_alive=lm.keep_alive, options=dict(lm.options), timeout_seconds=lm.timeout_seconds)


def make_renderer(settings: Settings) -> PromptRenderer:
    """Chat messages for /api/chat (the default) or a transcript for /api/generate."""
    return OllamaChatRenderer() if settings.language_model.api == "chat" else TranscriptRenderer()


def make_orchestrator(settings: Settings, store: ConversationStore, llm: OllamaLanguageModel,
                      sink: SentenceSink) -> Orchestrator:
    """The orchestrator with Last-N history under the token budget."""
    context = TokenBudgetContextProvider(LastNContextProvider(store),
                                         settings.context.max_history_tokens)
    builder = PromptBuilder(ConfigSystemPrompt(settings.language_model.system_prompt), [context])
    return Orchestrator(store=store, builder=builder, renderer=make_renderer(settings), llm=llm,
                        sink=sink, context_size=settings.context.last_n)
