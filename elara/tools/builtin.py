"""The tools built into Elara (source `elara`): timers and reminders, the time, facts, the history
and computed answers — each doing what the intent matcher's commands do, for a model that calls
them in any phrasing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from elara.conversation.context import read_turns
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.render import stamp
from elara.errors import StoreError, ToolRefused
from elara.memory.facts import FactBook
from elara.skills import intents as i
from elara.skills import spoken
from elara.skills.commands import LocalCommands, timer_label
from elara.skills.timers import Timer
from elara.tools import specs
from elara.tools.calls import BUILTIN, ToolOutcome, ToolSpec

log = logging.getLogger(__name__)

#: the most messages one history search gives the model
FOUND_LIMIT = 8
_COMPUTED = (i.Calculate, i.Convert, i.WhichDay, i.DaysUntil)


class HistoryReader(Protocol):
    """The part of the store a history search reads."""

    def read_tail(self, n: int, roles: Any = None) -> list[ChatMessage]:
        """The last n messages (of these roles), oldest first."""


Handler = Callable[[Mapping[str, Any]], Awaitable[str]]


class BuiltinTools:
    """The `elara` tool source: timers and the clock through the local commands, facts through
    the fact book (when facts are on), the history through the store."""

    name = BUILTIN

    def __init__(self, commands: LocalCommands, *, facts: FactBook | None,
                 history: HistoryReader | None) -> None:
        self.commands = commands
        self.facts = facts
        self.history = history
        self._handlers: dict[str, Handler] = {
            specs.CURRENT_TIME.tool: self._current_time, specs.SET_TIMER.tool: self._set_timer,
            specs.SET_REMINDER.tool: self._set_reminder, specs.LIST_TIMERS.tool: self._list_timers,
            specs.CANCEL_TIMER.tool: self._cancel_timer, specs.COMPUTE.tool: self._compute}
        if facts is not None:
            self._handlers[specs.REMEMBER_FACT.tool] = self._remember
            self._handlers[specs.FORGET_FACT.tool] = self._forget
        if history is not None:
            self._handlers[specs.SEARCH_HISTORY.tool] = self._search

    def specs(self) -> list[ToolSpec]:
        """The built-in tools this Elara can run (no fact tools with facts off)."""
        return [spec for spec in specs.BUILTIN_SPECS if spec.tool in self._handlers]

    async def start(self) -> None:
        """Nothing to start."""

    async def aclose(self) -> None:
        """Nothing to stop."""

    def status(self) -> dict[str, Any]:
        """Always up."""
        return {"state": "up", "tools": [spec.tool for spec in self.specs()]}

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run one built-in tool; a refusal or a store failure is a failed outcome."""
        handler = self._handlers.get(tool)
        if handler is None:
            return ToolOutcome.error(f"there is no built-in tool {tool}")
        try:
            return ToolOutcome(await handler(arguments))
        except ToolRefused as exc:
            return ToolOutcome.error(exc.message)
        except (StoreError, OSError) as exc:
            log.error("the built-in tool %s failed: %s", tool, exc)
            return ToolOutcome.error(f"{tool} could not be carried out: {exc}")

    # -- the clock and computing -----------------------------------------------------------------

    async def _current_time(self, arguments: Mapping[str, Any]) -> str:
        now = self.commands.local_now()
        return stamp(now, now.tzinfo).strip("[]")

    async def _compute(self, arguments: Mapping[str, Any]) -> str:
        intent = i.match(str(arguments["question"]))
        if not isinstance(intent, _COMPUTED):
            raise ToolRefused("that is not a calculation, unit conversion or date question I can "
                           "work out; answer it yourself")
        return self.commands.computed(intent).text

    # -- timers and reminders --------------------------------------------------------------------

    async def _set_timer(self, arguments: Mapping[str, Any]) -> str:
        seconds = int(arguments["seconds"])
        name = str(arguments.get("name") or "").strip() or None
        timer = await self._start(seconds, name=name)
        return f"{timer_label(timer).capitalize()} set: it rings in {spoken.say_duration(seconds)}."

    async def _set_reminder(self, arguments: Mapping[str, Any]) -> str:
        text = str(arguments["text"]).strip().removeprefix("to ").strip()
        if not text:
            raise ToolRefused("a reminder needs its text")
        at, after = arguments.get("at"), arguments.get("in_seconds")
        if (at is None) == (after is None):
            raise ToolRefused("give either `at` (HH:MM) or `in_seconds`, not both or neither")
        now = self.commands.local_now()
        due = (_next_time_of_day(now, str(at)) if at is not None
               else now + timedelta(seconds=int(str(after))))
        seconds = max(1, round((due - now).total_seconds()))
        await self._start(seconds, reminder=text)
        when = spoken.say_clock(due)
        if due.date() != now.date():
            when += " tomorrow"
        return f"Reminder set for {when} ({due:%H:%M}), in {spoken.say_remaining(seconds)}: {text}."

    async def _start(self, seconds: int, *, name: str | None = None, reminder: str | None = None) -> Timer:
        commands = self.commands
        if seconds > commands.max_seconds:
            raise ToolRefused(f"timers and reminders can run for at most "
                           f"{spoken.say_duration(int(commands.max_seconds))} (Timers.MaxHours)")
        timer = await asyncio.to_thread(commands.book.start, seconds, name, commands.room,
                                        reminder=reminder)
        commands.changed()
        return timer

    async def _list_timers(self, arguments: Mapping[str, Any]) -> str:
        timers = self.commands.book.active()
        if not timers:
            return "No timers or reminders are set."
        now = self.commands.local_now()
        return "\n".join(f"{timer_label(t)}: due {t.due.astimezone(now.tzinfo):%H:%M}, "
                         f"{spoken.say_remaining(max(0.0, t.remaining(now)))} left" for t in timers)

    async def _cancel_timer(self, arguments: Mapping[str, Any]) -> str:
        active = self.commands.book.active()
        wanted = str(arguments.get("name") or "").strip().lower()
        if arguments.get("all"):
            chosen = active
        elif wanted:
            chosen = [t for t in active if wanted in (t.name or "").lower()
                      or wanted in (t.reminder or "").lower()]
        else:
            chosen = active if len(active) == 1 else []
            if len(active) > 1:
                raise ToolRefused("there are several; ask which one: "
                               + spoken.say_list([timer_label(t) for t in active]))
        if not chosen:
            raise ToolRefused("no such timer or reminder is set" if active else "no timers or reminders are set")
        await self.commands.cancelling(chosen)()
        return "Cancelled: " + spoken.say_list([timer_label(t) for t in chosen]) + "."

    # -- facts and the history -------------------------------------------------------------------

    async def _remember(self, arguments: Mapping[str, Any]) -> str:
        assert self.facts is not None
        try:
            fact = await asyncio.to_thread(self.facts.remember, str(arguments["fact"]))
        except ValueError as exc:
            raise ToolRefused(str(exc)) from None
        return f"Remembered: {fact.text}"

    async def _forget(self, arguments: Mapping[str, Any]) -> str:
        assert self.facts is not None
        forgotten = await asyncio.to_thread(self.facts.forget, str(arguments["fact"]))
        if not forgotten:
            raise ToolRefused("no remembered fact matches that")
        return "Forgotten: " + "; ".join(f.text for f in forgotten)

    async def _search(self, arguments: Mapping[str, Any]) -> str:
        assert self.history is not None
        words = [w for w in i.words(str(arguments["query"])) if len(w) > 2 or w.isdigit()]
        if not words:
            raise ToolRefused("give some words to search for")
        turns = await asyncio.to_thread(read_turns, self.history, 10**9)
        day = None
        if arguments.get("days_ago") is not None:
            day = (self.commands.local_now() - timedelta(days=int(arguments["days_ago"]))).date()
        found = _search(turns, words, day, self.commands.local_now())
        if not found:
            return "Nothing in the history matches that."
        return "\n".join(found)


def _next_time_of_day(now: datetime, at: str) -> datetime:
    """The next `HH:MM` in `now`'s zone, today or tomorrow."""
    hours, minutes = (int(part) for part in at.split(":"))
    due = now.replace(hour=hours, minute=minutes, second=0, microsecond=0)
    return due if due > now else due + timedelta(days=1)


def _search(turns: list[ChatMessage], words: list[str], day: Any, now: datetime) -> list[str]:
    """The newest turns (of `day`, when given) holding the most of `words`, as stamped lines,
    oldest first."""
    scored = []
    for index, message in enumerate(turns):
        local = message.timestamp_utc.astimezone(now.tzinfo)
        if day is not None and local.date() != day:
            continue
        text = message.content.lower()
        hits = sum(word in text for word in words)
        if hits:
            scored.append((hits, index, message))
    best = sorted(scored, key=lambda s: (s[0], s[1]), reverse=True)[:FOUND_LIMIT]
    lines = []
    for _, index, message in sorted(best, key=lambda s: s[1]):
        who = "The user" if message.role is ChatRole.USER else "You"
        lines.append(f"{stamp(message.timestamp_utc, now.tzinfo)} {who} said: {message.content}")
        reply = turns[index + 1] if index + 1 < len(turns) else None
        if message.role is ChatRole.USER and reply is not None and reply.role is ChatRole.ASSISTANT:
            lines.append(f"  You answered: {reply.content}")
    return lines
