"""Context providers: asked at prompt time for the history that should reach the model."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Protocol

from elara.conversation.messages import ChatMessage, ChatRole


class ContextProvider(Protocol):
    """Supplies context messages for the current user text and a wanted size."""

    async def get_context(self, current_prompt: str, n: int) -> Sequence[ChatMessage]:
        """Messages for the prompt, oldest first."""


#: The roles of the conversation itself; System-role records are memory (summaries, facts …).
TURN_ROLES = (ChatRole.USER, ChatRole.ASSISTANT)


class TailReader(Protocol):
    """The part of the store a Last-N provider needs."""

    def read_tail(self, n: int, roles=None) -> list[ChatMessage]:
        """The last n messages (of these roles), oldest first."""


class LastNContextProvider:
    """The last n stored messages, with `n` chosen per call."""

    def __init__(self, store: TailReader) -> None:
        self._store = store

    async def get_context(self, current_prompt: str, n: int) -> Sequence[ChatMessage]:
        """The last n messages before the current user turn (which the store may already hold)."""
        if n <= 0:
            return []
        # The orchestrator stores the user's turn before building the prompt: read one more
        # and leave that turn out, since it is the prompt's user_input, not context.
        tail = await asyncio.to_thread(self._store.read_tail, n + 1, TURN_ROLES)
        if tail and tail[-1].role is ChatRole.USER and tail[-1].content == current_prompt:
            tail = tail[:-1]
        return tail[-n:]


def estimate_tokens(text: str) -> int:
    """About four characters per token, plus a little for the message's framing."""
    return math.ceil(len(text) / 4) + 4


class TokenBudgetContextProvider:
    """Wraps a provider of turns and drops the oldest whole exchanges until the history fits the
    budget. `pinned` providers (the summary, retrieved turns) come first and are kept; their
    tokens count against the same budget, so the turns get what is left."""

    def __init__(self, inner: ContextProvider, max_tokens: int | None,
                 estimate: Callable[[str], int] = estimate_tokens,
                 pinned: Sequence[ContextProvider] = ()) -> None:
        self._inner = inner
        self.max_tokens = max_tokens
        self._estimate = estimate
        self._pinned = list(pinned)

    async def get_context(self, current_prompt: str, n: int) -> Sequence[ChatMessage]:
        """Pinned messages, then the inner provider's turns trimmed to the rest of the budget."""
        pinned: list[ChatMessage] = []
        for provider in self._pinned:
            pinned.extend(await provider.get_context(current_prompt, n))
        turns = list(await self._inner.get_context(current_prompt, n))
        left = None
        if self.max_tokens is not None:
            left = max(0, self.max_tokens - sum(self._estimate(m.content) for m in pinned))
        return pinned + fit_to_budget(turns, left, self._estimate)


def fit_to_budget(messages: Sequence[ChatMessage], max_tokens: int | None,
                  estimate: Callable[[str], int] = estimate_tokens) -> list[ChatMessage]:
    """Drop the oldest exchanges (a user turn and the replies after it) until the total fits."""
    if max_tokens is None:
        return list(messages)
    exchanges = _exchanges(messages)
    costs = [sum(estimate(m.content) for m in ex) for ex in exchanges]
    total = sum(costs)
    start = 0
    while start < len(exchanges) and total > max_tokens:
        total -= costs[start]
        start += 1
    return [m for ex in exchanges[start:] for m in ex]


def _exchanges(messages: Sequence[ChatMessage]) -> list[list[ChatMessage]]:
    groups: list[list[ChatMessage]] = []
    for message in messages:
        if message.role is ChatRole.USER or not groups:
            groups.append([message])
        else:
            groups[-1].append(message)
    return groups
