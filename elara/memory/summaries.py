"""Progressive summaries: the older part of the conversation folded, a piece at a time, into one
short running summary that reaches the model instead of turns the token budget would drop.

The policy (`turns_to_summarize`) is pure; `SummaryBook` keeps the summaries in the store;
`Summarizer` asks the model; `maybe_summarize` is the memory worker's step between turns. Only
`SummaryContextProvider` runs inside a turn, and it reads memory, never the disk or the model."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from elara.conversation.context import estimate_tokens, read_turns
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore
from elara.errors import LanguageModelError
from elara.memory.records import KIND, SUMMARY, kind_of, memory_record

log = logging.getLogger(__name__)

#: How many of the newest exchanges are never folded: Last-N shows them anyway.
KEEP_EXCHANGES = 2
#: What the summary's System message starts with in the prompt.
SUMMARY_PREFIX = "Summary of the conversation so far: "
#: The metadata keys of a summary record (besides `kind`).
COVERS_UNTIL = "covers_until"
TURNS = "turns"
MODEL = "model"


@dataclass(frozen=True)
class Summary:
    """One stored summary: its text and how much of the conversation it covers."""

    text: str
    #: The UTC timestamp of the last turn covered, ISO 8601 with milliseconds, as in the metadata.
    covers_until: str
    #: How many turns all summaries up to this one have folded in.
    turns: int
    created: datetime
    path: Path
    model: str = ""

    @property
    def covers_until_utc(self) -> datetime:
        """covers_until as an aware datetime."""
        return datetime.fromisoformat(self.covers_until)


# -- policy (pure) -----------------------------------------------------------------------------


def turns_to_summarize(uncovered: Sequence[ChatMessage], max_history_tokens: int | None,
                       threshold: float, estimate: Callable[[str], int] = estimate_tokens, *,
                       keep_exchanges: int = KEEP_EXCHANGES) -> list[ChatMessage]:
    """The oldest whole exchanges to fold into the summary (about half of the uncovered tokens),
    once the uncovered turns pass threshold × max_history_tokens; else []."""
    if max_history_tokens is None:
        return []
    costs = [estimate(m.content) for m in uncovered]
    total = sum(costs)
    if total <= threshold * max_history_tokens:
        return []
    exchanges = _exchanges(list(zip(uncovered, costs)))
    candidates = exchanges[:-keep_exchanges] if keep_exchanges > 0 else exchanges
    # Half of what is uncovered, so the summary catches up in a few steps; but never more than one
    # budget's worth at once, so the summarizing prompt stays the size of an ordinary one even
    # when a long backlog (summaries just switched on) is uncovered.
    target = min(total / 2, max_history_tokens)
    chosen: list[ChatMessage] = []
    taken = 0
    for exchange in candidates:
        if chosen and taken >= target:
            break
        chosen.extend(m for m, _ in exchange)
        taken += sum(c for _, c in exchange)
    return chosen


def _exchanges(items: list[tuple[ChatMessage, int]]) -> list[list[tuple[ChatMessage, int]]]:
    """Group turns into exchanges: a user turn and the replies after it (a leading reply alone)."""
    groups: list[list[tuple[ChatMessage, int]]] = []
    for item in items:
        if item[0].role is ChatRole.USER or not groups:
            groups.append([item])
        else:
            groups[-1].append(item)
    return groups


def iso_millis(timestamp: datetime) -> str:
    """`2026-01-02T03:04:05.678Z`: UTC to the millisecond, as the store writes timestamps."""
    utc = timestamp.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def _to_millis(timestamp: datetime) -> datetime:
    return timestamp.replace(microsecond=timestamp.microsecond // 1000 * 1000)


# -- the summaries in the store ----------------------------------------------------------------


class SummaryBook:
    """The summary records in the store; only the latest is used, older ones stay as history."""

    def __init__(self, store: ConversationStore, *,
                 clock: Callable[[], datetime] | None = None) -> None:
        self._store = store
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()
        self._latest: Summary | None = None
        self._loaded = False
        self._reloads = 0

    @property
    def reloads(self) -> int:
        """How many times load() read the store again after the first time (retention, a purge)."""
        return self._reloads

    @property
    def latest(self) -> Summary | None:
        """The newest summary known in memory (None before load() or when there is none)."""
        return self._latest

    def load(self) -> Summary | None:
        """Find the newest readable summary record in the store and make it the latest (blocking)."""
        found: Summary | None = None
        # Summaries are rare among System records, but read_tail gives no paths: one pass at start-up.
        for stored in self._store.iter_messages((ChatRole.SYSTEM,)):
            if kind_of(stored.message) != SUMMARY:
                continue
            summary = _from_record(stored.path, stored.message)
            if summary is not None:
                found = summary
        with self._lock:
            self._latest = found
            if self._loaded:
                self._reloads += 1
            self._loaded = True
        if found is None:
            log.debug("no summary in %s", self._store.root)
        else:
            log.info("latest summary covers %d turns up to %s", found.turns, found.covers_until)
        return found

    def uncovered_turns(self, limit: int = 500) -> list[ChatMessage]:
        """User and assistant turns after the latest summary, oldest first (of the newest `limit`)."""
        self._ensure_loaded()
        turns = read_turns(self._store, limit)
        latest = self._latest
        if latest is None:
            return turns
        until = latest.covers_until_utc
        return [m for m in turns if _to_millis(m.timestamp_utc) > until]

    def save(self, text: str, covered: Sequence[ChatMessage], model: str) -> Summary:
        """Store a new summary that folds in `covered` (oldest first) and make it the latest."""
        if not covered:
            raise ValueError("a summary must cover at least one turn")
        self._ensure_loaded()
        with self._lock:
            previous = self._latest
            covers_until = iso_millis(covered[-1].timestamp_utc)
            if previous is not None and covers_until <= previous.covers_until:
                # Two summarizers raced, or the turns were read before a newer summary was saved.
                raise ValueError(
                    f"summary would cover until {covers_until}, not after the latest summary "
                    f"({previous.covers_until})")
            turns = (previous.turns if previous else 0) + len(covered)
            created = _to_millis(self._clock().astimezone(UTC))
            record = memory_record(SUMMARY, text, created, **{
                COVERS_UNTIL: covers_until, TURNS: str(turns), MODEL: model})
            path = self._store.append(record)
            summary = Summary(text=text, covers_until=covers_until, turns=turns, created=created,
                              path=path, model=model)
            self._latest = summary
        log.debug("saved summary %s: %r", path.name, text)
        return summary

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.load()


def _from_record(path: Path, message: ChatMessage) -> Summary | None:
    """The Summary a record holds, or None (logged) when its metadata is broken."""
    metadata = message.metadata
    try:
        covers_until = metadata[COVERS_UNTIL]
        stamp = datetime.fromisoformat(covers_until)
        if stamp.tzinfo is None:
            raise ValueError("covers_until has no UTC offset")
        turns = int(metadata[TURNS])
    except (KeyError, ValueError) as exc:
        log.warning("ignoring summary record %s with broken metadata: %s", path, exc)
        return None
    return Summary(text=message.content, covers_until=covers_until, turns=turns,
                   created=message.timestamp_utc, path=path, model=metadata.get(MODEL, ""))


# -- asking the model --------------------------------------------------------------------------


class CompletingModel(Protocol):
    """The part of the language model a summarizer needs."""

    async def complete(self, messages: Sequence[Mapping[str, str]]) -> str:
        """One whole, non-streamed chat reply."""


_INSTRUCTIONS = (
    "You keep a running summary of a conversation between a user and a voice assistant. "
    "Fold the previous summary (if any) and the new turns into one updated summary. "
    "Write in the third person (\"The user asked ...\", \"The assistant suggested ...\"). "
    "Keep what was discussed, what the user asked for, decisions made, and open threads; "
    "leave out greetings and small talk. Write plain sentences with no lists, headings or "
    "markdown: the summary is read by a language model, not spoken. "
    "Use at most {max_words} words. Answer with the summary only."
)
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:updated\s+)?summary(?:\*\*)?\s*:\s*", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s|$)")


class Summarizer:
    """Asks the model to fold the previous summary and some turns into one short summary."""

    def __init__(self, llm: CompletingModel, *, max_words: int = 150) -> None:
        self._llm = llm
        self.max_words = max_words

    def messages(self, previous: Summary | None,
                 turns: Sequence[ChatMessage]) -> list[Mapping[str, str]]:
        """The chat messages sent to the model."""
        earlier = previous.text.strip() if previous is not None else "(none yet)"
        lines = [f"{_speaker(m)}: {m.content.strip()}" for m in turns]
        request = (f"Previous summary:\n{earlier}\n\nNew turns:\n" + "\n".join(lines)
                   + "\n\nWrite the updated summary.")
        return [{"role": "system", "content": _INSTRUCTIONS.format(max_words=self.max_words)},
                {"role": "user", "content": request}]

    async def summarize(self, previous: Summary | None, turns: Sequence[ChatMessage]) -> str:
        """The new summary's text; LanguageModelError when the model fails or answers nothing."""
        messages = self.messages(previous, turns)
        log.debug("summarizing %d turns: %r", len(turns), messages)
        answer = _LABEL.sub("", (await self._llm.complete(messages)).strip()).strip()
        if not answer:
            model = getattr(self._llm, "model", "the language model")
            raise LanguageModelError(f"{model} answered with an empty summary", code="model_error")
        clipped = _clip(answer, self.max_words)
        if clipped != answer:
            log.info("the summary ran to %d words; clipped to %d", len(answer.split()),
                     len(clipped.split()))
        log.debug("summary: %r", clipped)
        return clipped


def _speaker(message: ChatMessage) -> str:
    return "User" if message.role is ChatRole.USER else "Assistant"


def _clip(text: str, max_words: int) -> str:
    """At most max_words words, cut at the last sentence end within them when there is one."""
    words = text.split()
    if len(words) <= max_words:
        return text
    head = " ".join(words[:max_words])
    # The summary is counted against every prompt's token budget: an overlong one must not grow it.
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    return head[: ends[-1]] if ends else head


# -- the step between turns --------------------------------------------------------------------


async def maybe_summarize(book: SummaryBook, summarizer: Summarizer, *,
                          max_history_tokens: int | None, threshold: float,
                          model_name: str) -> Summary | None:
    """Fold the oldest uncovered turns into a new summary when they pass the threshold; returns
    it, or None when nothing was due. A model failure propagates as LanguageModelError."""
    if max_history_tokens is None:
        return None
    reloads = book.reloads
    uncovered = await asyncio.to_thread(book.uncovered_turns)
    chosen = turns_to_summarize(uncovered, max_history_tokens, threshold)
    if not chosen:
        return None
    previous = book.latest
    text = await summarizer.summarize(previous, chosen)
    if book.latest is not previous:
        # Another summary was saved while the model worked: this one folds the wrong previous text.
        log.info("a newer summary appeared while summarizing; dropping this one")
        return None
    if book.reloads != reloads:
        # The store was read again meanwhile (retention, a purge): some of `chosen` may be deleted.
        log.info("the summaries were reloaded while summarizing; dropping this one")
        return None
    summary = await asyncio.to_thread(book.save, text, chosen, model_name)
    log.info("summarized %d more turns (%d in all, up to %s) with %s; %d turns stay uncovered",
             len(chosen), summary.turns, summary.covers_until, model_name,
             len(uncovered) - len(chosen))
    return summary


# -- in the prompt -----------------------------------------------------------------------------


class SummaryContextProvider:
    """The latest summary as one System message ahead of the turns (from memory: no disk per prompt)."""

    def __init__(self, book: SummaryBook) -> None:
        self._book = book

    async def get_context(self, current_prompt: str, n: int) -> Sequence[ChatMessage]:
        """[the latest summary as a System message] or [] when there is none; n does not apply."""
        summary = self._book.latest
        if summary is None:
            return []
        return [ChatMessage(ChatRole.SYSTEM, SUMMARY_PREFIX + summary.text, summary.created,
                            {KIND: SUMMARY})]
