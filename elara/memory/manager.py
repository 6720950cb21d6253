"""Memory wired from settings: the fact book, the summaries, the retrieval index, the prompt
parts they feed, and the jobs the worker runs after each turn."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone
from typing import Callable

from elara.conversation.context import ContextProvider
from elara.conversation.messages import ChatMessage
from elara.conversation.prompts import SystemPromptProvider
from elara.conversation.store import ConversationStore
from elara.llm import OllamaLanguageModel
from elara.memory.facts import FactBook, FactExtractor, FactsSystemPrompt
from elara.memory.phrasing import Forget, ForgetAll, Remember, parse_memory_request
from elara.memory.retention import RetentionReport, apply_retention
from elara.memory.retrieval import EmbeddingIndex, RetrievalContextProvider
from elara.memory.summaries import (SummaryBook, SummaryContextProvider, Summarizer,
                                    maybe_summarize)
from elara.memory.worker import Job, MemoryWorker
from elara.settings import Settings

log = logging.getLogger(__name__)


class _CurrentModel:
    """The model the conversation uses now (a reload may replace it)."""

    def __init__(self, current: Callable[[], OllamaLanguageModel]) -> None:
        self._current = current

    async def embed(self, texts: list[str], model: str) -> list[list[float]]:
        """Embed with the current client."""
        return await self._current().embed(texts, model)


class Memory:
    """What Elara remembers beyond the last few turns, and the work that keeps it up to date."""

    def __init__(self, settings: Settings, store: ConversationStore,
                 current_llm: Callable[[], OllamaLanguageModel]) -> None:
        self.settings = settings
        self.store = store
        self._llm = current_llm
        m = settings.memory
        self.facts = FactBook(store, max_facts=m.max_facts) if m.facts != "off" else None
        self.summaries = SummaryBook(store) if m.summaries else None
        self.index = (EmbeddingIndex(store, _CurrentModel(current_llm), m.embedding_model)
                      if m.retrieval else None)
        self.worker = MemoryWorker(self._jobs_after_turn)

    async def load(self) -> None:
        """Read facts, the latest summary and the vectors from the store (at start-up)."""
        if self.facts is not None:
            await asyncio.to_thread(self.facts.load)
        if self.summaries is not None:
            await asyncio.to_thread(self.summaries.load)
        if self.index is not None:
            await self.index.load()
        log.info("memory: %d facts, %s, %s",
                 len(self.facts.facts()) if self.facts else 0,
                 "a summary" if self.summaries and self.summaries.latest else "no summary",
                 f"{len(self.index)} turns indexed" if self.index is not None else "retrieval off")

    async def reload_facts(self) -> None:
        """Read the facts again (another process, e.g. `elara memory forget`, changed them)."""
        if self.facts is not None:
            await asyncio.to_thread(self.facts.load)

    def system_prompt(self, base: SystemPromptProvider) -> SystemPromptProvider:
        """The system prompt with "What you know about the user" woven in."""
        return FactsSystemPrompt(base, self.facts) if self.facts is not None else base

    def pinned_context(self) -> list[ContextProvider]:
        """Providers whose messages come before the recent turns: the summary, retrieved turns."""
        providers: list[ContextProvider] = []
        if self.summaries is not None:
            providers.append(SummaryContextProvider(self.summaries))
        if self.index is not None:
            m = self.settings.memory
            providers.append(RetrievalContextProvider(
                self.index, top_k=m.retrieval_top_k, min_score=m.retrieval_min_score, store=self.store))
        return providers

    def apply_retention(self, now: datetime | None = None) -> RetentionReport:
        """Delete what `Context.RetentionDays` says is too old (blocking)."""
        c = self.settings.context
        return apply_retention(self.store, days=c.retention_days,
                               keep_summaries=c.retention_keep_summaries,
                               now=now or datetime.now(timezone.utc))

    # -- the worker's jobs ---------------------------------------------------------------------

    def _jobs_after_turn(self, user: ChatMessage, reply: ChatMessage | None) -> list[tuple[str, Job, bool]]:
        jobs: list[tuple[str, Job, bool]] = []
        request = parse_memory_request(user.content) if self.facts is not None else None
        if request is not None:
            jobs.append(("explicit memory request", lambda: self._apply_request(request), False))
        elif self.facts is not None and reply is not None and self.settings.memory.facts == "model":
            jobs.append(("fact extraction", lambda: self._extract_facts(user, reply), True))
        if self.index is not None and reply is not None:
            jobs.append(("embedding", lambda: self._embed([user, reply]), True))
        if self.summaries is not None and self.settings.context.max_history_tokens is not None:
            jobs.append(("summary", self._summarize, True))
        return jobs

    async def _apply_request(self, request) -> None:
        if isinstance(request, Remember):
            fact = await asyncio.to_thread(self.facts.remember, request.text)
            log.info("remembered fact %s on request", fact.id)
        elif isinstance(request, Forget):
            forgotten = await asyncio.to_thread(self.facts.forget, request.query)
            log.info("forgot %d fact(s) on request", len(forgotten))
        elif isinstance(request, ForgetAll):
            count = await asyncio.to_thread(self.facts.clear)
            log.info("forgot all %d facts on request", count)

    async def _extract_facts(self, user: ChatMessage, reply: ChatMessage) -> None:
        found = await FactExtractor(self._llm()).extract(user.content, reply.content,
                                                         self.facts.facts())
        for text in found:
            fact = await asyncio.to_thread(self.facts.remember, text, source="model")
            log.info("learned fact %s", fact.id)
            log.debug("fact %s: %s", fact.id, fact.text)

    async def _embed(self, turns: list[ChatMessage]) -> None:
        # Turns that could not be embedded earlier (Ollama was down) go along with these.
        await self.index.add([*self.index.unindexed(), *turns])

    async def _summarize(self) -> None:
        summary = await maybe_summarize(
            self.summaries, Summarizer(self._llm()),
            max_history_tokens=self.settings.context.max_history_tokens,
            threshold=self.settings.memory.summary_threshold, model_name=self._llm().model)
        if summary is not None:
            log.info("summarized the conversation: %d turns covered so far", summary.turns)
