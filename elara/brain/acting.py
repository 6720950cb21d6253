"""The tool calls inside a turn: which tools a request offers, running the calls a model made
(checked, allowed, confirmed, recorded, with a filler while one is slow), and the request that
carries their results back to the model.

A tool listed in `Tools.Confirm` is not run at once: the model is told it waits for a yes and
asks; the call is kept (`Acting.pending`) until the next turn says yes or no within the window.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from elara.conversation.messages import ChatMessage
from elara.conversation.records import TOOL_CALL, TOOL_RESULT, memory_record
from elara.conversation.render import ChatRequest, GenerateRequest
from elara.tools.calls import ToolCall, ToolOutcome, ToolSpec
from elara.tools.toolbox import Toolbox

log = logging.getLogger(__name__)

#: said once in a turn while a tool takes longer than FILLER_AFTER seconds
FILLER = "One moment."
FILLER_AFTER = 1.0
#: what is said when the person says no to a confirmed tool
DECLINED = "Okay, I won't."


@dataclass(frozen=True)
class PendingCall:
    """A call that waits for the person's yes: the request that led to it, the call, until when."""

    spec: ToolSpec
    call: ToolCall
    messages: tuple[Any, ...]  # the request's messages up to and with the model's call
    until: float
    yes: bool = False  # the person's answer, once there is one


@dataclass
class ToolTurn:
    """One turn's part in tool calling: how it speaks, records and waits for its commit."""

    say: Callable[[str], Awaitable[None]]
    record: Callable[[ChatMessage], None]
    committed: Callable[[], Awaitable[object]]
    rounds: int = 0
    filled: bool = False
    asked: bool = False  # a call waits for the person's yes


class Acting:
    """Runs the calls models make, under the toolbox's rules, `max_rounds` rounds a turn at most."""

    def __init__(self, toolbox: Toolbox, *, max_rounds: int, confirm_seconds: float,
                 clock: Callable[[], datetime], monotonic: Callable[[], float] = time.monotonic,
                 filler_after: float = FILLER_AFTER) -> None:
        self.toolbox = toolbox
        self.max_rounds = max_rounds
        self.confirm_seconds = confirm_seconds
        self._clock = clock
        self._monotonic = monotonic
        self._filler_after = filler_after
        self.pending: PendingCall | None = None

    def offer(self, request: ChatRequest | GenerateRequest, llm: object) -> ChatRequest | GenerateRequest:
        """The request with the allowed tools, for a chat request to a model that calls tools."""
        if not isinstance(request, ChatRequest) or not getattr(llm, "calls_tools", False):
            return request
        return replace(request, tools=tuple(spec.function() for spec in self.toolbox.offered()))

    def answer(self, yes: bool | None) -> PendingCall | None:
        """The pending call a turn answers (`yes`: the person's yes or no, None: neither), with
        the answer; any other turn, or one too late, drops it."""
        pending, self.pending = self.pending, None
        if pending is None or yes is None:
            if pending is not None:
                log.info("the question about %s was not answered: not run", pending.spec.key)
            return None
        if self._monotonic() > pending.until:
            log.info("the yes or no to %s came too late: not run", pending.spec.key)
            return None
        return replace(pending, yes=yes)

    async def act(self, turn: ToolTurn, request: ChatRequest, said: str,
                  calls: Sequence[ToolCall]) -> ChatRequest:
        """Run one round of the model's calls; the request that gives it their results (without
        tools once the rounds are used up or a call waits for a yes)."""
        turn.rounds += 1
        assistant = {"role": "assistant", "content": said, "tool_calls": [
            {"function": {"name": c.name, "arguments": dict(c.arguments)}} for c in calls]}
        messages = (*request.messages, assistant)
        results = []
        for call in calls:
            outcome = await self._one(turn, call, messages)
            results.append({"role": "tool", "content": outcome.text, "tool_name": call.name})
        tools = request.tools if turn.rounds < self.max_rounds and not turn.asked else ()
        if not tools:
            log.info("tool rounds over (%d): the model answers now", turn.rounds)
        return ChatRequest(messages=(*messages, *results), tools=tools)

    async def _one(self, turn: ToolTurn, call: ToolCall, messages: tuple[Any, ...]) -> ToolOutcome:
        spec, refused = self.toolbox.check(call)
        turn.record(_record(TOOL_CALL, call.describe(), self._clock(), spec, call))
        if refused is not None:
            outcome = refused
        elif spec is not None and self.toolbox.policy.confirms(spec) and turn.asked:
            outcome = ToolOutcome.error("one thing at a time waits for a yes: ask about this after")
        elif spec is not None and self.toolbox.policy.confirms(spec):
            turn.asked = True
            self.pending = PendingCall(spec, call, messages, float("inf"))
            log.info("tool %s waits for the person's yes", spec.key)
            outcome = ToolOutcome(
                "Not done yet: this needs the person's yes first. Ask them in one short question "
                "whether to do it; do not say it is done.")
        elif spec is not None:
            outcome = await self.run(turn, spec, call)
        else:
            outcome = ToolOutcome.error("not run")
        turn.record(_record(TOOL_RESULT, outcome.text, self._clock(), spec, call, outcome))
        return outcome

    async def run(self, turn: ToolTurn, spec: ToolSpec, call: ToolCall) -> ToolOutcome:
        """Run an allowed call (one that changes anything only once the turn is committed), with
        the filler said once if it is slow."""
        if not spec.read_only:
            await turn.committed()
        log.info("calling tool %s", spec.key)
        log.debug("tool call %s", call.describe())
        started = self._monotonic()
        running = asyncio.ensure_future(self.toolbox.run(spec, call))
        if not turn.filled:
            done, _ = await asyncio.wait([running], timeout=self._filler_after)
            if not done:
                turn.filled = True
                await turn.say(FILLER)
        outcome = await running
        log.info("tool %s %s in %.3f s", spec.key, "failed" if outcome.failed else "done",
                 self._monotonic() - started)
        return outcome

    def asked(self) -> None:
        """The question about the pending call has been said: the window for its answer starts."""
        if self.pending is not None:
            self.pending = replace(self.pending, until=self._monotonic() + self.confirm_seconds)

    async def confirmed(self, turn: ToolTurn, pending: PendingCall) -> ChatRequest:
        """The person said yes: run the call; the request that gives the model its result."""
        outcome = await self.run(turn, pending.spec, pending.call)
        turn.record(_record(TOOL_RESULT, outcome.text, self._clock(), pending.spec, pending.call, outcome))
        result = {"role": "tool", "content": outcome.text, "tool_name": pending.call.name}
        return ChatRequest(messages=(*pending.messages, result))

    def declined(self, turn: ToolTurn, pending: PendingCall) -> None:
        """The person said no: recorded, not run."""
        log.info("tool %s not run: the person said no", pending.spec.key)
        turn.record(_record(TOOL_RESULT, "The person said no: not done.", self._clock(),
                            pending.spec, pending.call, ToolOutcome("declined", failed=True)))


def _record(kind: str, content: str, when: datetime, spec: ToolSpec | None, call: ToolCall,
            outcome: ToolOutcome | None = None) -> ChatMessage:
    """A tool call's or result's System record (`metadata.kind` tool_call / tool_result)."""
    extra = {"tool": spec.key if spec is not None else call.name}
    if outcome is not None:
        extra["failed"] = json.dumps(outcome.failed)
    return memory_record(kind, content, when, **extra)
