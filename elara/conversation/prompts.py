"""The system prompt provider and the prompt builder. Pure: the clock and providers are handed in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Protocol

from elara.conversation.context import ContextProvider
from elara.conversation.messages import ChatMessage, Prompt
from elara.errors import ContextError


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class SystemPromptProvider(Protocol):
    """Supplies the system prompt for the next turn."""

    async def get_system_prompt(self) -> str:
        """The instructions the model gets before the conversation."""


class ConfigSystemPrompt:
    """The system prompt from `LanguageModel.SystemPrompt`."""

    def __init__(self, text: str) -> None:
        self.text = text or ""

    async def get_system_prompt(self) -> str:
        """The configured text."""
        return self.text


class PromptBuilder:
    """Builds a Prompt from the system prompt, every context provider in order, the time, and what
    the recall providers find for the question."""

    def __init__(self, system: SystemPromptProvider, providers: Sequence[ContextProvider],
                 clock: Callable[[], datetime] = utc_now, local_zone: tzinfo | None = None,
                 on_prompt: Callable[[Prompt], None] | None = None,
                 recall: Sequence[ContextProvider] = ()) -> None:
        self._system = system
        self._providers = list(providers)
        self._recall = list(recall)
        self._clock = clock
        self._local_zone = local_zone
        #: told about every prompt built (context-window telemetry)
        self.on_prompt = on_prompt

    async def build(self, user_input: str, n: int, *, with_context: bool = True,
                    at: datetime | None = None, measured: bool = True) -> Prompt:
        """The prompt for `user_input` said `at` (default: now) with up to `n` context messages,
        told to `on_prompt` unless not `measured`; ContextError if a provider fails."""
        system = await self._system.get_system_prompt()
        context: list[ChatMessage] = []
        recalled: list[ChatMessage] = []
        if with_context:
            context = await _ask(self._providers, user_input, n)
            recalled = await _ask(self._recall, user_input, n)
        now = (at or self._clock()).astimezone(UTC)
        local = now.astimezone(self._local_zone) if self._local_zone else now.astimezone()
        prompt = Prompt(system=system, context=tuple(context), user_input=user_input,
                        now_utc=now, now_local=local, recalled=tuple(recalled))
        if self.on_prompt is not None and measured:
            self.on_prompt(prompt)
        return prompt


async def _ask(providers: Sequence[ContextProvider], user_input: str, n: int) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for provider in providers:
        try:
            messages.extend(await provider.get_context(user_input, n))
        except Exception as exc:  # any provider failure must not break the turn
            raise ContextError(
                f"{type(provider).__name__} failed: {exc}", code="context_unavailable") from exc
    return messages
