"""Memory wired from settings: the fact book, the summaries, the retrieval index, the prompt
parts they feed, and the jobs the worker runs after each turn."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any, Protocol

from elara.conversation.context import ContextProvider
from elara.conversation.messages import ChatMessage
from elara.conversation.prompts import SystemPromptProvider
from elara.conversation.store import ConversationStore
from elara.memory.facts import FactBook, FactExtractor, FactsSystemPrompt, JsonLanguageModel
from elara.memory.phrasing import Forget, ForgetAll, Remember, parse_memory_request
from elara.memory.retention import RetentionReport, apply_retention
from elara.memory.retrieval import Embedder, EmbeddingIndex, RetrievalContextProvider
from elara.memory.summaries import (
    CompletingModel,
    Summarizer,
    SummaryBook,
    SummaryContextProvider,
    maybe_summarize,
)
from elara.memory.worker import Job, MemoryWorker
from elara.settings import ContextSettings, MemorySettings

log = logging.getLogger(__name__)


class MemoryConfig(Protocol):
    """What Memory reads of the settings (`Settings`, or the build layer's slice of it)."""

    @property
    def memory(self) -> MemorySettings:
        """The `Memory` section."""

    @property
    def context(self) -> ContextSettings:
        """The `Context` section: the history's budget and retention."""


class MemoryModel(Embedder, CompletingModel, JsonLanguageModel, Protocol):
    """What memory asks of the language model: vectors, summaries, facts as JSON, and its name."""

    @property
    def model(self) -> str:
        """The model's name."""


class Memory:
    """What Elara remembers beyond the last few turns, and the work that keeps it up to date."""

    def __init__(self, settings: MemoryConfig, store: ConversationStore, llm: MemoryModel, *,
                 clock: Callable[[], datetime] | None = None) -> None:
        """Memory over `store` using `llm` (a new model means a new Memory); clock gives UTC now
        for new records and retention (the system clock when None)."""
        self.settings = settings
        self.store = store
        self._llm = llm
        self._clock = clock or (lambda: datetime.now(UTC))
        m = settings.memory
        self.facts = (FactBook(store, max_facts=m.max_facts, clock=self._clock)
                      if m.facts != "off" else None)
        self.summaries = SummaryBook(store, clock=self._clock) if m.summaries else None
        self.index = (EmbeddingIndex(store, llm, m.embedding_model, clock=self._clock)
                      if m.retrieval else None)
        self.worker = MemoryWorker(self._jobs_after_turn)

    async def load(self) -> None:
        """Read facts, the latest summary and the vectors from the store (at start-up)."""
        await self.reload()
        log.info("memory: %d facts, %s, %s",
                 len(self.facts.facts()) if self.facts else 0,
                 "a summary" if self.summaries and self.summaries.latest else "no summary",
                 f"{len(self.index)} turns indexed" if self.index is not None else "retrieval off")

    async def reload(self) -> None:
        """Read facts, the latest summary and the vectors again: another process (`elara memory
        forget`, `elara history purge`) changed the store, and nothing it deleted may be used."""
        if self.facts is not None:
            await asyncio.to_thread(self.facts.load)
        if self.summaries is not None:
            await asyncio.to_thread(self.summaries.load)
        if self.index is not None:
            await self.index.load()

    def status(self) -> dict[str, Any]:
        """What `elara status` shows under "memory"."""
        latest = self.summaries.latest if self.summaries is not None else None
        return {
            "facts": len(self.facts.facts()) if self.facts is not None else None,
            "summarized_turns": latest.turns if latest is not None else 0,
            "indexed_turns": len(self.index) if self.index is not None else None,
            "jobs_pending": self.worker.pending,
            "jobs_done": self.worker.counters.done,
            "jobs_failed": self.worker.counters.failed,
        }

    def system_prompt(self, base: SystemPromptProvider) -> SystemPromptProvider:
        """The system prompt with "What you know about the user" woven in."""
        return FactsSystemPrompt(base, self.facts) if self.facts is not None else base

    def pinned_context(self) -> list[ContextProvider]:
        """Providers whose messages come before the recent turns: the summary."""
        if self.summaries is None:
            return []
        return [SummaryContextProvider(self.summaries)]

    def recall(self) -> list[ContextProvider]:
        """Providers of what is found for each question (retrieved turns): asked last."""
        if self.index is None:
            return []
        m = self.settings.memory
        return [RetrievalContextProvider(self.index, top_k=m.retrieval_top_k,
                                         min_score=m.retrieval_min_score, store=self.store)]

    async def apply_retention(self, now: datetime | None = None) -> RetentionReport:
        """Delete what `Context.RetentionDays` says is too old, with everything derived from it,
        and read the summary and the vectors again, so nothing deleted is used."""
        return await asyncio.to_thread(self._retain, now or self._clock())

    def _retain(self, now: datetime) -> RetentionReport:
        c = self.settings.context
        # No vector is stored between the deletion and the index reading the store again.
        with self.index.writing() if self.index is not None else nullcontext():
            report = apply_retention(self.store, days=c.retention_days,
                                     keep_summaries=c.retention_keep_summaries,
                                     now=now)
            if report.deleted:
                if self.summaries is not None:
                    self.summaries.load()
                if self.index is not None:
                    self.index.reload()
        return report

    # -- the worker's jobs ---------------------------------------------------------------------

    def _jobs_after_turn(self, user: ChatMessage, reply: ChatMessage | None) -> list[tuple[str, Job, bool]]:
        jobs: list[tuple[str, Job, bool]] = []
        facts, index, summaries = self.facts, self.index, self.summaries
        request = parse_memory_request(user.content) if facts is not None else None
        if facts is not None and request is not None:
            jobs.append(("explicit memory request", lambda: _apply_request(facts, request), False))
        elif (facts is not None and reply is not None and self.settings.memory.facts == "model"
              # A model may say it only invents them (the built-in one): then only on request.
              and getattr(self._llm, "learns_facts", True)):
            jobs.append(("fact extraction", lambda: self._extract_facts(facts, user, reply), True))
        if index is not None and reply is not None:
            # Turns that could not be embedded earlier (Ollama was down) go along with these.
            jobs.append(("embedding", lambda: _add(index, [*index.unindexed(), user, reply]), True))
        if summaries is not None and self.settings.context.max_history_tokens is not None:
            jobs.append(("summary", lambda: self._summarize(summaries), True))
        return jobs

    async def _extract_facts(self, facts: FactBook, user: ChatMessage, reply: ChatMessage) -> None:
        found = await FactExtractor(self._llm).extract(user.content, reply.content, facts.facts())
        for text in found:
            fact = await asyncio.to_thread(facts.remember, text, source="model")
            log.info("learned fact %s", fact.id)
            log.debug("fact %s: %s", fact.id, fact.text)

    async def _summarize(self, summaries: SummaryBook) -> None:
        summary = await maybe_summarize(
            summaries, Summarizer(self._llm),
            max_history_tokens=self.settings.context.max_history_tokens,
            threshold=self.settings.memory.summary_threshold, model_name=self._llm.model)
        if summary is not None:
            log.info("summarized the conversation: %d turns covered so far", summary.turns)


async def _apply_request(facts: FactBook, request: Remember | Forget | ForgetAll) -> None:
    if isinstance(request, Remember):
        fact = await asyncio.to_thread(facts.remember, request.text)
        log.info("remembered fact %s on request", fact.id)
    elif isinstance(request, Forget):
        forgotten = await asyncio.to_thread(facts.forget, request.query)
        log.info("forgot %d fact(s) on request", len(forgotten))
    else:
        count = await asyncio.to_thread(facts.clear)
        log.info("forgot all %d facts on request", count)


async def _add(index: EmbeddingIndex, turns: list[ChatMessage]) -> None:
    await index.add(turns)
