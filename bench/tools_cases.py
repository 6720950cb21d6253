"""The tool bench's requests (bench.tools): everyday phrasings, each with what counts as right —
the tools it may call, each with conditions on the arguments, or no call at all.

Decisions a reader may question:
- "at six" with no morning or evening: 18:00 and 06:00 are both right (the person did not say,
  and the reminder tool has only a time of day); an hour said with pm, tonight or in the morning
  must be that one.
- A nudge "in ten minutes" may be a reminder (in_seconds 600, with the text) or a timer (600 s):
  both ring then. An explicit "timer" must be set_timer.
- The date and time: Elara stamps every user message with the date and time it was said (the
  bench's messages are stamped the same way), so answering from the stamp is as right as calling
  current_time; those rows accept no call too.
- A text argument is judged by the words that matter in it ("pasta", "mum"), not its wording.
- Only the first call is judged; a second one is shown, not counted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Condition:
    """One thing the arguments must satisfy: `test` names it ("words", "equals", "time",
    "absent", "not"), `key` is the argument, `values` what it is compared with."""

    test: str
    key: str
    values: tuple[Any, ...] = ()

    def holds(self, arguments: Mapping[str, Any]) -> bool:
        """Whether `arguments` satisfy it."""
        value = arguments.get(self.key)
        if self.test == "absent":
            return value is None or value in self.values
        if self.test == "not":
            return value not in self.values
        if value is None:
            return False
        if self.test == "words":
            text = str(value).lower()
            return all(re.search(_word_starts(group), text) for group in self.values)
        if self.test == "time":
            return _clock(value) in {_clock(v) for v in self.values}
        return value in self.values and type(value) is type(self.values[0])

    def __str__(self) -> str:
        if self.test == "absent":
            extra = "".join(f" or {v!r}" for v in self.values)
            return f"no {self.key}{extra}"
        if self.test == "not":
            return f"{self.key} not {' or '.join(map(repr, self.values))}"
        if self.test == "words":
            return f"{self.key} ~ {' & '.join(self.values)}"
        return f"{self.key} = {' or '.join(map(str, self.values))}"


def _word_starts(group: str) -> str:
    """A pattern of "a|b|%": one alternative, those made of letters or digits at a word's start."""
    return "|".join(rf"(?<![a-z0-9])(?:{alt})" if alt[:1].isalnum() else f"(?:{alt})"
                    for alt in group.split("|"))


def _clock(value: Any) -> tuple[int, int] | None:
    match = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*", str(value))
    return (int(match[1]), int(match[2])) if match else None


@dataclass(frozen=True)
class Expect:
    """A right call: this tool, with arguments meeting every condition."""

    tool: str
    conditions: tuple[Condition, ...] = ()

    def __str__(self) -> str:
        return f"{self.tool}({', '.join(map(str, self.conditions))})"


@dataclass(frozen=True)
class Case:
    """One request: its kind, its words, the right calls (none: no call is right), and whether no
    call is right as well."""

    kind: str
    request: str
    expect: tuple[Expect, ...] = ()
    none_right: bool = False

    @property
    def needs_call(self) -> bool:
        """Whether it is wrong to make no call."""
        return bool(self.expect) and not self.none_right

    def describe(self) -> str:
        """What counts as right, on one line."""
        said = " or ".join(map(str, self.expect)) or "no call"
        return said + (" or no call" if self.expect and self.none_right else "")


def call(tool: str, *conditions: Condition) -> Expect:
    """A right call of `tool`."""
    return Expect(tool, conditions)


def words(key: str, *groups: str) -> Condition:
    """`key`'s text has a word starting with each group's ("pasta", "mum|mom|mother")."""
    return Condition("words", key, groups)


def equals(key: str, *values: Any) -> Condition:
    """`key` is one of `values` (of the same JSON type)."""
    return Condition("equals", key, values)


def at(*times: str) -> Condition:
    """`at` is one of these times of day (06:00 and 6:00 alike)."""
    return Condition("time", "at", times)


def absent(key: str, *allowed: Any) -> Condition:
    """`key` is left out (or one of `allowed`)."""
    return Condition("absent", key, allowed)


def other_than(key: str, *values: Any) -> Condition:
    """`key` is none of `values` (left out is fine)."""
    return Condition("not", key, values)


def _needs(kind: str, request: str, *expect: Expect) -> Case:
    return Case(kind, request, expect)


def _time(request: str) -> Case:
    return Case("time", request, (call("current_time"),), none_right=True)


def _none(request: str) -> Case:
    return Case("no tool", request)


def _timer(request: str, seconds: int, *text: str) -> Case:
    """A timer, or a reminder with the same delay (and `text`'s words, when given)."""
    reminder = call("set_reminder", equals("in_seconds", seconds), absent("at"),
                    *((words("text", *text),) if text else ()))
    return Case("timer", request, (call("set_timer", equals("seconds", seconds)), reminder))


CASES: tuple[Case, ...] = (
    _time("What day is it today?"),
    _time("What's the date?"),
    _time("Do you know what time it is?"),
    _time("Which month are we in?"),
    _needs("timer", "Set a timer for five minutes.", call("set_timer", equals("seconds", 300))),
    _needs("timer", "Start a countdown of ninety seconds.", call("set_timer", equals("seconds", 90))),
    _needs("timer", "I need a timer for an hour and a half for the roast.",
           call("set_timer", equals("seconds", 5400))),
    _needs("timer", "Pasta timer, eight minutes please.", call("set_timer", equals("seconds", 480))),
    _timer("Could you time twenty minutes for the cake?", 1200, "cake"),
    _timer("Could you give me a nudge in ten minutes to take the pasta off?", 600, "pasta"),
    _timer("Let me know when 45 minutes are up.", 2700),
    _timer("Give me a shout in two hours to move the car.", 7200, "car"),
    _needs("reminder", "Remind me at six to call mum.",
           call("set_reminder", at("18:00", "06:00"), words("text", "mum|mom|mother"))),
    _needs("reminder", "Remind me to take my pills at 9 pm.",
           call("set_reminder", at("21:00"), words("text", "pill"))),
    _needs("reminder", "In half an hour, remind me to check the washing.",
           call("set_reminder", equals("in_seconds", 1800), words("text", "wash"))),
    _needs("reminder", "Don't let me forget to put the bins out at half past seven tonight.",
           call("set_reminder", at("19:30"), words("text", "bin"))),
    _needs("reminder", "At quarter past three, remind me to pick up the kids.",
           call("set_reminder", at("15:15", "03:15"), words("text", "kid|child"))),
    _needs("reminder", "Remind me to ring the dentist at 11 in the morning.",
           call("set_reminder", at("11:00"), words("text", "dentist"))),
    _needs("list", "What timers do I have?", call("list_timers")),
    _needs("list", "How long is left on the pasta?", call("list_timers")),
    _needs("list", "Have I got any reminders set?", call("list_timers")),
    _needs("list", "Is my cake timer still going?", call("list_timers")),
    _needs("cancel", "Cancel the pasta timer.",
           call("cancel_timer", words("name", "pasta"), other_than("all", True))),
    _needs("cancel", "Stop all the timers.", call("cancel_timer", equals("all", True))),
    _needs("cancel", "Never mind the reminder about the bins.",
           call("cancel_timer", words("name", "bin"), other_than("all", True))),
    _needs("cancel", "Scrap the timer.", call("cancel_timer")),
    _needs("remember", "Remember that my sister is called Ann.",
           call("remember_fact", words("fact", "sister", "ann"))),
    _needs("remember", "Please note that I'm allergic to peanuts.",
           call("remember_fact", words("fact", "peanut"))),
    _needs("remember", "Just so you know, my birthday is on the fourth of March.",
           call("remember_fact", words("fact", "march", "4|fourth"))),
    _needs("remember", "Keep in mind that I'm vegetarian.",
           call("remember_fact", words("fact", "vegetarian"))),
    _needs("remember", "My dog's name is Biscuit, don't forget it.",
           call("remember_fact", words("fact", "biscuit"))),
    _needs("forget", "Forget that I like tea.", call("forget_fact", words("fact", "tea"))),
    _needs("forget", "You can forget my old address now.", call("forget_fact", words("fact", "address"))),
    _needs("forget", "Please stop remembering that I work at the bakery.",
           call("forget_fact", words("fact", "bakery"))),
    _needs("history", "What did I ask you yesterday about the boiler?",
           call("search_history", words("query", "boiler"), equals("days_ago", 1))),
    _needs("history", "Have we ever talked about my knee?",
           call("search_history", words("query", "knee"), absent("days_ago"))),
    _needs("history", "What was that recipe you told me about earlier today?",
           call("search_history", words("query", "recipe"), absent("days_ago", 0))),
    _needs("history", "Remind me what I said about the car insurance yesterday.",
           call("search_history", words("query", "insurance"), equals("days_ago", 1))),
    _needs("history", "What did we say about Spain the other day?",
           call("search_history", words("query", "spain"))),
    _needs("compute", "What's 17 times 23?",
           call("compute", words("question", "17", "23", "times|x|multipl|\\*|×"))),
    _needs("compute", "How many days until Christmas?", call("compute", words("question", "christmas"))),
    _needs("compute", "What is five miles in kilometres?",
           call("compute", words("question", "mile", "kilomet|km"))),
    _needs("compute", "What's fifteen percent of 80?",
           call("compute", words("question", "15|fifteen", "percent|per cent|%", "80|eighty"))),
    _needs("compute", "How many ounces are in a pound?",
           call("compute", words("question", "ounce", "pound"))),
    _none("Tell me a joke."),
    _none("How are you?"),
    _none("What's the capital of France?"),
    _none("Thanks!"),
    _none("Who wrote Pride and Prejudice?"),
    _none("Good morning!"),
    _none("What's a good name for a goldfish?"),
    _none("Can you explain how rainbows form?"),
    _none("I'm feeling a bit tired today."),
    _none("What should I cook tonight with rice and eggs?"),
    _none("Why is the sky blue?"),
    _none("Tell me a fun fact about octopuses."),
    _none("How do you say hello in Spanish?"),
    _none("What's your favourite time of year?"),
    _none("I already set a timer on my phone, thanks."),
    _none("Do you remember the words to Happy Birthday?"),
)
