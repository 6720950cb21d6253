"""The reply started ahead: begun on the words so far before the turn is known to be over, held
unheard until it is, and dropped if the words change.

Drops run one after another: a dropped reply's `speech.stop()` must not release the hold of the
reply started after it, so each drop, and each new reply started ahead, waits for the drops
before it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from elara.brain.orchestrator import TurnResult
from elara.conversation.messages import PromptReady
from elara.voice.events import Dropped, Prompt, TurnEvent
from elara.voice.parts import LoopCounters, VoiceParts

log = logging.getLogger(__name__)


@dataclass
class HeldReply:
    """A reply started before the turn was confirmed over, held unheard until it is."""

    text: str
    started: float
    ended: asyncio.Event  # set: the turn is judged over, store the person's words
    commit: asyncio.Event  # set: the person can no longer go on, keep the reply
    holding: asyncio.Event  # set once the speech sink holds this reply's audio
    task: asyncio.Task[TurnResult]


class ReplyAhead:
    """Starts, adopts and drops the reply started ahead; owns its task and the drops' queue."""

    def __init__(self, *, clock: Callable[[], float], counters: LoopCounters,
                 record: Callable[[TurnEvent], None]) -> None:
        self._clock = clock
        self._counters = counters
        self._record = record
        self.held: HeldReply | None = None
        #: the last drop in the queue (each waits for the one before)
        self.dropping: asyncio.Task[None] | None = None

    def start(self, text: str, parts: VoiceParts) -> HeldReply:
        """Drop any reply held, and start one for `text`, held unheard."""
        text = text.strip()
        self.drop("a newer transcript", parts)
        ended, commit, holding = asyncio.Event(), asyncio.Event(), asyncio.Event()
        prompt = PromptReady(text, source="voice", continues=parts.dialogue.continues)
        previous = self.dropping

        async def answer() -> TurnResult:
            if previous is not None:  # its stop() must not release this reply's hold
                await asyncio.gather(previous, return_exceptions=True)
            if not commit.is_set():  # the turn may have been confirmed while the drop finished
                parts.speech.hold()
            holding.set()
            return await parts.orchestrator.on_prompt_ready(prompt, commit=commit, ended=ended)

        log.debug("answering ahead: %s", text)
        started = self._clock()
        self._record(Prompt(at=started))
        self.held = HeldReply(text=text, started=started, ended=ended, commit=commit, holding=holding,
                              task=asyncio.create_task(answer(), name="reply-ahead"))
        return self.held

    def drop(self, why: str, parts: VoiceParts) -> None:
        """Drop the reply held, if any, unheard."""
        held, self.held = self.held, None
        if held is None:
            return
        self._counters.speculations_discarded += 1
        log.info("dropped the reply started ahead: %s", why)
        self._record(Dropped(at=self._clock(), why=why))
        speech = parts.speech

        async def drop() -> None:
            held.task.cancel()
            await asyncio.gather(held.task, return_exceptions=True)
            await speech.stop()  # the held audio is dropped unheard

        self.after_drops(drop, "drop-reply-ahead")

    def after_drops(self, then: Callable[[], Awaitable[Any]], name: str) -> None:
        """Run `then` once the drops before it are done; the next drop (and the next reply
        started ahead) waits for it in turn."""
        previous = self.dropping

        async def drop() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            await then()

        self.dropping = asyncio.create_task(drop(), name=name)

    @property
    def settled(self) -> bool:
        """True when no drop is under way."""
        return self.dropping is None or self.dropping.done()

    async def drops_done(self) -> None:
        """Return once every drop queued so far is done."""
        if self.dropping is not None:
            await asyncio.gather(self.dropping, return_exceptions=True)

    def adopt(self, text: str, parts: VoiceParts) -> HeldReply | None:
        """The reply held for exactly `text`, taken over by the turn; any other is dropped."""
        held = self.held
        if held is not None and held.text == text and not held.task.cancelled():
            self.held = None
            return held
        self.drop("the final words differ", parts)
        return None

    @staticmethod
    async def audio_ready(held: HeldReply, parts: VoiceParts) -> None:
        """Wait until the held reply's first audio is synthesized, or the reply is over."""
        async def ready() -> None:
            await held.holding.wait()
            await parts.speech.audio_ready()

        waiter = asyncio.ensure_future(ready())
        try:
            await asyncio.wait({waiter, held.task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
