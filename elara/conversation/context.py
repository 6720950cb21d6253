"""Context providers: asked at prompt time for the history that should reach the model."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Protocol

from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.records import superseded


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


def read_turns(store: TailReader, n: int) -> list[ChatMessage]:
    """The last `n` user and assistant messages, oldest first, without the questions the person
    went on with (each is stored again whole after it)."""
    return [message for message in store.read_tail(n, TURN_ROLES) if not superseded(message)]


def estimate_tokens(text: str) -> int:
    """About four characters per token, plus a little for the message's framing."""
    return math.ceil(len(text) / 4) + 4


class LastNContextProvider:
    """The recent turns, in a window that grows by appending and shrinks in blocks, so the start of
    the prompt a model evaluated last time stays the start of the next one (its cache stays valid).

    The window begins at the turn it began with last time and takes every turn after it, until it
    would hold more than `n` messages (chosen per call) or pass the token budget; then it starts
    again with the newest whole exchanges that fill about half of both. `pinned` providers (the
    summary) come first and are kept; their tokens count against the same budget."""

    def __init__(self, store: TailReader, max_tokens: int | None = None, *,
                 estimate: Callable[[str], int] = estimate_tokens,
                 pinned: Sequence[ContextProvider] = ()) -> None:
        self._store = store
        self.max_tokens = max_tokens
        self._estimate = estimate
        self._pinned = list(pinned)
        self._first: ChatMessage | None = None

    async def get_context(self, current_prompt: str, n: int) -> Sequence[ChatMessage]:
        """Pinned messages, then the window of turns before the current user turn (which the
        store may already hold)."""
        pinned: list[ChatMessage] = []
        for provider in self._pinned:
            pinned.extend(await provider.get_context(current_prompt, n))
        if n <= 0:
            return pinned
        # The orchestrator stores the user's turn before building the prompt: read one more and
        # leave out the questions after her last reply (that turn, which is the prompt's
        # user_input, and one the person is still going on with, not yet marked superseded).
        tail = await asyncio.to_thread(read_turns, self._store, n + 1)
        while tail and tail[-1].role is ChatRole.USER:
            tail = tail[:-1]
        left = None
        if self.max_tokens is not None:
            left = max(0, self.max_tokens - sum(self._estimate(m.content) for m in pinned))
        turns = history_window(tail, self._first, n, left, self._estimate)
        self._first = turns[0] if turns else None
        return pinned + turns


def history_window(tail: Sequence[ChatMessage], first: ChatMessage | None, n: int,
                   max_tokens: int | None,
                   estimate: Callable[[str], int] = estimate_tokens) -> list[ChatMessage]:
    """The turns of `tail` (oldest first) from `first` on while they fit `n` messages and
    `max_tokens`; else the newest whole exchanges within half of both, at least one
    exchange (a block is dropped)."""
    turns = list(tail[-n:]) if n > 0 else []
    if first is not None and first in turns:
        kept = turns[turns.index(first):]
        if max_tokens is None or sum(estimate(m.content) for m in kept) <= max_tokens:
            return kept
    keep = max(2, n // 2)
    kept = newest_exchanges(turns, keep, None if max_tokens is None else max_tokens // 2, estimate)
    # A long last exchange that fits the whole budget is still worth more than nothing.
    return kept or newest_exchanges(turns, keep, max_tokens, estimate)


def newest_exchanges(messages: Sequence[ChatMessage], max_messages: int, max_tokens: int | None,
                     estimate: Callable[[str], int] = estimate_tokens) -> list[ChatMessage]:
    """The newest whole exchanges (a user turn and the replies after it) within both limits; when
    not even the newest exchange fits the message limit, the newest `max_messages` messages."""
    kept: list[ChatMessage] = []
    tokens = 0
    for exchange in reversed(_exchanges(messages)):
        cost = sum(estimate(m.content) for m in exchange)
        if len(kept) + len(exchange) > max_messages or (
                max_tokens is not None and tokens + cost > max_tokens):
            break
        kept[:0] = exchange
        tokens += cost
    if not kept and messages:
        kept = list(messages[-max_messages:])
        if max_tokens is not None and sum(estimate(m.content) for m in kept) > max_tokens:
            return []
    return kept


def _exchanges(messages: Sequence[ChatMessage]) -> list[list[ChatMessage]]:
    groups: list[list[ChatMessage]] = []
    for message in messages:
        if message.role is ChatRole.USER or not groups:
            groups.append([message])
        else:
            groups[-1].append(message)
    return groups
