"""Which language model answers (`LanguageModel.Provider`).

`auto` (the default) answers with Ollama when it is reachable and has the configured model, and
otherwise with the small built-in model, so Elara answers out of the box. The choice is checked
again in the background: Ollama appearing later takes over from the next turn on, and Ollama going
away hands the next turn back to the built-in model. A turn is never lost to a switch: a turn
always finishes with the provider it started with, and a turn Ollama cannot even begin (it just
went away) is answered by the built-in model instead of an apology.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from elara.brain.ollama import ModelInfo, PromptTokens
from elara.conversation.render import ChatRequest, GenerateRequest
from elara.errors import LanguageModelError
from elara.tools.calls import ToolCall

log = logging.getLogger(__name__)

OLLAMA = "ollama"
EMBEDDED = "embedded"
#: `LanguageModel.Provider` values
PROVIDERS = ("auto", OLLAMA, EMBEDDED)

#: Ollama failures after which the built-in model answers the same request: nothing was said yet
FALL_BACK_ON = frozenset({"unreachable", "model_missing"})
#: how often `auto` looks again for Ollama (seconds)
CHECK_INTERVAL = 30.0
#: longest wait for Ollama to answer a check; a hung server counts as absent
CHECK_SECONDS = 5.0


class Provider(Protocol):
    """A language model Elara can answer with (the Ollama adapter, the embedded model)."""

    @property
    def model(self) -> str:
        """The model's name."""

    @property
    def host(self) -> str:
        """Where it runs (Ollama's address, or "embedded")."""

    def stream(self, request: ChatRequest | GenerateRequest) -> AsyncIterator[str | ToolCall]:
        """The reply's text fragments (and tool calls); raises LanguageModelError."""

    async def complete(self, messages: Sequence[Mapping[str, str]], *,
                       format: Mapping[str, Any] | None = None) -> str:
        """A whole reply."""

    async def complete_json(self, messages: Sequence[Mapping[str, str]],
                            schema: Mapping[str, Any]) -> Any:
        """A reply constrained to `schema`, parsed."""

    async def embed(self, texts: list[str], model: str) -> list[list[float]]:
        """One vector per text."""

    async def check(self) -> ModelInfo:
        """The model is there; raises LanguageModelError."""

    async def warm_up(self) -> None:
        """Load the model ahead of the first question."""

    async def aclose(self) -> None:
        """Release connections and memory."""


@dataclass(frozen=True)
class Choice:
    """Who answers now, and why."""

    provider: str
    model: str
    reason: str


class AutoLanguageModel:
    """Ollama when it is there, the built-in model when it isn't; a Provider itself."""

    def __init__(self, ollama: Provider, load_embedded: Callable[[], Provider], *,
                 ollama_hint: str, check_interval: float = CHECK_INTERVAL,
                 check_seconds: float = CHECK_SECONDS) -> None:
        self._ollama = ollama
        self._load_embedded = load_embedded  # blocking: run in a worker thread, once
        self._embedded: Provider | None = None
        self._loading = asyncio.Lock()
        self._hint = ollama_hint
        self._check_interval = check_interval
        self._check_seconds = check_seconds
        self._current: Provider = ollama
        self.choice = Choice(OLLAMA, ollama.model, "not checked yet")

    @property
    def model(self) -> str:
        """The model answering now."""
        return self._current.model

    @property
    def host(self) -> str:
        """Where the model answering now runs."""
        return self._current.host

    def status(self) -> dict[str, Any]:
        """Which provider answers, which model, and why."""
        return {"provider": self.choice.provider, "model": self.choice.model,
                "reason": self.choice.reason}

    # -- choosing ------------------------------------------------------------------------------

    async def check(self) -> ModelInfo:
        """Choose: Ollama if it answers in time with the model, else the built-in model (loaded
        now); raises only when the built-in model can't be loaded either."""
        try:
            async with asyncio.timeout(self._check_seconds):
                info = await self._ollama.check()
        except (LanguageModelError, TimeoutError) as exc:
            await self._fall_back(_why(exc, self._ollama.host, self._check_seconds))
            return await self._current.check()
        self._use_ollama("Ollama answers with the model")
        return info

    async def watch(self) -> None:
        """Check again every `check_interval` seconds, switching between turns (runs until
        cancelled)."""
        while True:
            await asyncio.sleep(self._check_interval)
            try:
                async with asyncio.timeout(self._check_seconds):
                    await self._ollama.check()
            except (LanguageModelError, TimeoutError) as exc:
                if self._current is self._ollama:
                    await self._fall_back(_why(exc, self._ollama.host, self._check_seconds))
                continue
            if self._current is not self._ollama:
                self._use_ollama("Ollama is back")

    def _use_ollama(self, reason: str) -> None:
        if self._current is not self._ollama:
            log.info("Ollama at %s has %s again: answering with it from the next turn",
                     self._ollama.host, self._ollama.model)
        self._current = self._ollama
        self.choice = Choice(OLLAMA, self._ollama.model, reason)

    async def _fall_back(self, reason: str) -> None:
        embedded = await self._embedded_model()
        if self._current is not embedded:
            log.warning("answers come from the small built-in model %s (%s); for better "
                        "answers, %s", embedded.model, reason, self._hint)
        self._current = embedded
        self.choice = Choice(EMBEDDED, embedded.model, reason)

    async def _embedded_model(self) -> Provider:
        async with self._loading:
            if self._embedded is None:
                self._embedded = await asyncio.to_thread(self._load_embedded)
            return self._embedded

    # -- answering -----------------------------------------------------------------------------

    async def stream(self, request: ChatRequest | GenerateRequest) -> AsyncIterator[str | ToolCall]:
        """The reply from the provider chosen now; one that Ollama can't begin comes from the
        built-in model."""
        provider = self._current
        if provider is self._ollama:
            started = False
            try:
                async for fragment in provider.stream(request):
                    started = True
                    yield fragment
                return
            except LanguageModelError as exc:
                if started or exc.code not in FALL_BACK_ON:
                    raise
                await self._fall_back(_why(exc, self._ollama.host, self._check_seconds))
            provider = self._current
        async for fragment in provider.stream(request):
            yield fragment

    async def complete(self, messages: Sequence[Mapping[str, str]], *,
                       format: Mapping[str, Any] | None = None) -> str:
        """A whole reply from the provider chosen now (memory jobs)."""
        return await self._call(lambda p: p.complete(messages, format=format))

    async def complete_json(self, messages: Sequence[Mapping[str, str]],
                            schema: Mapping[str, Any]) -> Any:
        """A JSON reply from the provider chosen now (memory jobs)."""
        return await self._call(lambda p: p.complete_json(messages, schema))

    async def embed(self, texts: list[str], model: str) -> list[list[float]]:
        """Vectors come from Ollama only (the built-in model has none); raises when it is away."""
        return await self._ollama.embed(texts, model)

    async def warm_up(self) -> None:
        """Load the chosen model ahead of the first question."""
        await self._current.warm_up()

    async def prefill(self, request: ChatRequest | GenerateRequest) -> None:
        """Have the model answering now read a turn's prompt ahead, where it can (the built-in one)."""
        prefill = getattr(self._current, "prefill", None)
        if prefill is not None:
            await prefill(request)

    @property
    def calls_tools(self) -> bool:
        """Whether the model answering now can call tools."""
        return bool(getattr(self._current, "calls_tools", False))

    @property
    def learns_facts(self) -> bool:
        """Whether the model answering now may be asked for facts about the user."""
        return bool(getattr(self._current, "learns_facts", True))

    @property
    def last_prompt(self) -> PromptTokens | None:
        """How the latest reply's prompt was read, by the model answering now."""
        return getattr(self._current, "last_prompt", None)

    async def aclose(self) -> None:
        """Close both providers."""
        await self._ollama.aclose()
        if self._embedded is not None:
            await self._embedded.aclose()

    async def _call(self, call: Callable[[Provider], Any]) -> Any:
        provider = self._current
        try:
            return await call(provider)
        except LanguageModelError as exc:
            if provider is not self._ollama or exc.code not in FALL_BACK_ON:
                raise
            await self._fall_back(_why(exc, self._ollama.host, self._check_seconds))
            return await call(self._current)


def _why(exc: BaseException, host: str, seconds: float) -> str:
    if isinstance(exc, LanguageModelError):
        return exc.message
    return f"Ollama at {host} did not answer within {seconds:.0f} s"


def describe(llm: Provider, configured: str) -> dict[str, Any]:
    """Which provider answers, which model, and why — for `elara status` and `elara doctor`."""
    if isinstance(llm, AutoLanguageModel):
        return llm.status()
    provider = EMBEDDED if configured == EMBEDDED else OLLAMA
    return {"provider": provider, "model": llm.model,
            "reason": f"LanguageModel.Provider is {configured}"}
