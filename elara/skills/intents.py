"""Recognises the everyday commands answered without the language model (timers, time, date, stop)
and the questions whose answer is computed (arithmetic, unit conversions, the calendar). Pure.

Precision over recall: a transcript is a command only when the whole utterance, once normalised, fits
one of the anchored patterns below (or of the computing modules'); anything else (None) goes to the
model as before.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from elara.skills import arithmetic, conversions, dates, numbers
from elara.skills.arithmetic import Calculate
from elara.skills.conversions import Convert
from elara.skills.dates import DaysUntil, WhichDay


@dataclass(frozen=True)
class SetTimer:
    """Start a timer; name is None for an unnamed one. The caller refuses zero or too long."""

    seconds: int
    name: str | None


@dataclass(frozen=True)
class TimerLeft:
    """How long is left on the named timer, or on the timers if name is None."""

    name: str | None


@dataclass(frozen=True)
class ListTimers:
    """Which timers are running."""


@dataclass(frozen=True)
class CancelTimer:
    """Cancel the named timer, the only one when name is None, or all of them when everything."""

    name: str | None
    everything: bool = False


@dataclass(frozen=True)
class TellTime:
    """Say the local time."""


@dataclass(frozen=True)
class TellDate:
    """Say the local date, or only the weekday."""

    weekday_only: bool = False


@dataclass(frozen=True)
class Stop:
    """Stop the reply being spoken or a ringing timer."""


Intent = (SetTimer | TimerLeft | ListTimers | CancelTimer | TellTime | TellDate | Stop
          | Calculate | Convert | WhichDay | DaysUntil)

# --- numbers and durations -------------------------------------------------------------------------

_NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand".split())
_UNITS = {**dict.fromkeys(("second", "seconds", "sec", "secs"), 1),
          **dict.fromkeys(("minute", "minutes", "min", "mins"), 60),
          **dict.fromkeys(("hour", "hours", "hr", "hrs"), 3600)}
_FRACTIONS = {("half",): 0.5, ("quarter",): 0.25, ("3", "quarters"): 0.75}
_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_DURATION_MARK = "§"  # a parsed duration in the normalised text: "§600"


def _number(tokens: list[str], i: int) -> tuple[float, int] | None:
    """An amount from tokens[i] (number words are digits by now): digits, "a 100" ("a hundred"),
    "a couple of", with an optional "and a half"."""
    if i >= len(tokens):
        return None
    value: float
    if _DIGITS.fullmatch(tokens[i]):
        value, j = float(tokens[i]), i + 1
    elif tokens[i:i + 3] == ["a", "couple", "of"]:
        value, j = 2, i + 3
    elif tokens[i:i + 2] == ["couple", "of"] or tokens[i:i + 2] == ["a", "couple"]:
        value, j = 2, i + 2
    elif tokens[i] in ("a", "an") and _unit_at(tokens, i + 1):
        value, j = 1, i + 1
    elif tokens[i] == "a" and _DIGITS.fullmatch(after := "".join(tokens[i + 1:i + 2])) and float(after) >= 100:
        value, j = float(after), i + 2  # "a hundred and twenty" reads as "a 120"
    else:
        return None
    if tokens[j:j + 3] == ["and", "a", "half"]:
        value, j = value + 0.5, j + 3
    return value, j


def _unit_at(tokens: list[str], i: int) -> bool:
    """Whether tokens[i] is a unit of time."""
    return i < len(tokens) and tokens[i] in _UNITS


def _duration_part(tokens: list[str], i: int) -> tuple[float, int, int] | None:
    """One "amount unit" piece from tokens[i]: (seconds, unit size, next index)."""
    j = i + 1 if tokens[i:i + 1] == ["a"] else i
    for phrase, fraction in _FRACTIONS.items():
        if tuple(tokens[j:j + len(phrase)]) == phrase:
            k = j + len(phrase)
            k += tokens[k:k + 1] == ["of"]
            k += tokens[k:k + 1] in (["a"], ["an"])
            if _unit_at(tokens, k):
                return fraction * _UNITS[tokens[k]], _UNITS[tokens[k]], k + 1
    found = _number(tokens, i)
    if found is None or not _unit_at(tokens, found[1]):
        return None
    amount, j = found
    unit = _UNITS[tokens[j]]
    j += 1
    if tokens[j:j + 3] == ["and", "a", "half"]:  # "an hour and a half"
        amount, j = amount + 0.5, j + 3
    return amount * unit, unit, j


def _duration(tokens: list[str], i: int) -> tuple[int, int] | None:
    """The longest duration starting at tokens[i], units largest first: (whole seconds, next index)."""
    if i >= len(tokens):
        return None
    first = _duration_part(tokens, i)
    if first is None:
        return None
    total, unit, j = first
    while j < len(tokens):
        k = j + (tokens[j] == "and")
        part = _duration_part(tokens, k) if k < len(tokens) else None
        if part is not None and part[1] < unit:
            total, unit, j = total + part[0], part[1], part[2]
            continue
        # "two minutes thirty", "an hour fifteen": a bare last number counts in the next smaller unit.
        bare = _number(tokens, j) if unit > 1 and k == j else None
        if bare is not None and bare[0] == int(bare[0]) and bare[0] < 60 and not _unit_at(tokens, bare[1]):
            total, j = total + int(bare[0]) * (unit // 60), bare[1]
        break
    return int(total + 0.5), j


# --- normalisation ---------------------------------------------------------------------------------

_LEADING = re.compile(
    r"^(?:(?:hey|hi|ok|okay|alright|all right|so|um|uh|oh|well|just|please|hey jarvis|jarvis|hey elara|elara"
    r"|can you|could you|would you|will you|i need you to|i need|i want you to|i want|i would like"
    r"|id like|go ahead and|lets|now) )+")
_TRAILING = re.compile(r"(?: (?:please|thanks|thank you|for me|jarvis|elara|now|right now|from now))+$")
# A computed question keeps "from now": "2 weeks from now" is a day.
_TRAILING_COURTESY = re.compile(r"(?: (?:please|thanks|thank you|for me|jarvis|elara))+$")


def words(text: str) -> list[str]:
    """Lower case, apostrophes dropped, hyphens and other punctuation as spaces, digits split from letters."""
    text = text.lower().replace("’", "'").replace("'", "")
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text)  # 1,000
    text = re.sub(r"(?<=\d)(?=[a-z])|(?<=[a-z])(?=\d)", " ", text)  # 10min
    text = re.sub(r"(?!(?<=\d)\.(?=\d))[^a-z0-9]", " ", text)  # keeps 1.5
    return text.split()


def _normalise(tokens: list[str]) -> str:
    """The utterance's tokens as a plain string with every duration replaced by "§<seconds>"."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        # "set a second timer" is an ordinal, not one second.
        if tokens[i:i + 3] == ["a", "sec", "timer"]:
            out.append("another")
            i += 2
            continue
        found = _duration(tokens, i)
        if found is None:
            out.append(tokens[i])
            i += 1
        else:
            out.append(f"{_DURATION_MARK}{found[0]}")
            i = found[1]
    line = " ".join(out)
    line = _LEADING.sub("", line)
    return _TRAILING.sub("", line)


def parse_duration(text: str) -> int | None:
    """The whole of text as a duration in seconds ("an hour and a half", "90 seconds"), else None."""
    tokens = words(numbers.in_digits(text))
    found = _duration(tokens, 0)
    if found is None or found[1] != len(tokens):
        return None
    return found[0]


# --- the commands ----------------------------------------------------------------------------------

# Words that can't be (part of) a timer's name: "cancel the all timer" is not a command.
_NOT_NAMES = frozenset(
    "a an the my your our this that these those it its all every each any both some timer timers for of and or "
    "to on in at with me i you is are left new another other one set start cancel stop delete remove clear "
    "how what which time long much more".split()) | frozenset(_UNITS) | _NUMBER_WORDS

_D = rf"{_DURATION_MARK}(?P<dur>\d+)"
# One or two words, as few as fit; never the words that frame the name.
_NAME_WORD = r"(?!(?:for|called|named|timer|timers)\b)[a-z]+"
_NAME = rf"(?P<name>{_NAME_WORD}(?: {_NAME_WORD})??)"
_NAME2 = rf"(?P<name2>{_NAME_WORD}(?: {_NAME_WORD})??)"
_ART = r"(?:(?:a|an|the|my|one|another|a new|new) )?"
_SET = r"(?:(?:set|start|make|create|put on|set up|give me|get|begin|run) )?"
_CALLED = rf"(?: (?:for|called|named) (?:the |my )?{_NAME2})?"

_SET_TIMER = [re.compile(p) for p in (
    rf"^{_SET}{_ART}(?:{_NAME} )?timer (?:for |of )?{_D}{_CALLED}$",  # set a pasta timer for 8 minutes
    rf"^{_SET}{_ART}{_D} (?:{_NAME} )?timer{_CALLED}$",  # a 90 second timer (for the pasta)
    rf"^{_SET}{_ART}timer (?:for|called|named) (?:the |my )?{_NAME2} (?:for )?{_D}$",  # a timer for the pasta for 8 minutes
    rf"^{_SET}{_ART}{_D} (?:countdown|count down)$",
    rf"^{_SET}{_ART}(?:countdown|count down) (?:for |of )?{_D}$",
)]
_WAKE_ME = re.compile(rf"^(?:wake me|wake me up|get me up) (?:in|after) {_D}$")

_TIMER_REF = rf"(?:the |my |that |this )?(?:{_NAME} )?timer"
_TIMER_LEFT = [re.compile(p) for p in (
    r"^how (?:long|much time|much longer) (?:is |have i got |do i have |do we have )?(?:there )?(?:left|remaining)"
    rf"(?: (?:on|for|in) {_TIMER_REF})?$",
    rf"^how (?:long|much time|much longer) (?:does|has) {_TIMER_REF} (?:got |have )?(?:left|remaining|to go)$",
    rf"^how (?:long|much time) (?:until|till|before) {_TIMER_REF} (?:goes off|is done|rings|finishes|ends)$",
    rf"^how much longer (?:on|for) {_TIMER_REF}$",
    rf"^(?:what is|whats) (?:left|remaining) on {_TIMER_REF}$",
    rf"^(?:what is |whats )?(?:the )?time (?:left|remaining) on {_TIMER_REF}$",
    rf"^check (?:on )?{_TIMER_REF}$",
    rf"^(?:what is|whats) the status of {_TIMER_REF}$",
)]
_LIST_TIMERS = re.compile(
    r"^(?:(?:what|which) timers (?:do i have|have i got|have i set|do i have running|are (?:there|running|set|on|active|going))"
    r"|(?:what are|list|show me|show|tell me) (?:all )?(?:of )?(?:my |the )?timers"
    r"|(?:do i have|are there|have i got|are) any timers(?: running| set| on| going| active)?"
    r"|how many timers (?:do i have|are (?:there|running|set))(?: running| set| on)?)$")

_CANCEL = r"(?:cancel|stop|delete|remove|clear|end|kill|dismiss|turn off|switch off)"
_CANCEL_ONE = [re.compile(p) for p in (
    rf"^{_CANCEL} {_TIMER_REF}$",
    rf"^{_CANCEL} (?:the |my |that )?timer (?:for|on) (?:the |my )?{_NAME}$",
    rf"^(?:turn|switch) {_TIMER_REF} off$",
)]
_CANCEL_ALL = re.compile(
    rf"^(?:{_CANCEL} (?:(?:all|every|each|both)(?: of)?(?: the| my)? timers?|(?:the |my )?timers)"
    r"|(?:turn|switch) (?:all (?:of )?)?(?:the |my )?timers off)$")

_TELL_TIME = re.compile(
    r"^(?:what time is it|what time it is|(?:what is|whats) the (?:current )?time"
    r"|(?:tell me|do you know|can you tell me) (?:the time|what time it is)|do you have the time|current time)$")
_TELL_DATE = re.compile(
    r"^(?:(?:what is|whats) (?:the (?:current )?date|todays date|the date today)(?: today)?"
    r"|what date is it(?: today)?|what is todays date|(?:tell me|do you know) (?:the date|todays date|what date it is"
    r"|what the date is)|todays date)$")
_TELL_WEEKDAY = re.compile(
    r"^(?:what day is (?:it|today)(?: today)?|what day of the week is (?:it|today)(?: today)?"
    r"|(?:what is|whats) the day(?: today)?|which day is it(?: today)?|(?:tell me|do you know) what day it is)$")
_STOP_WORD = (r"(?:stop(?: it| that| talking| the alarm| the ringing| ringing| the noise)?|be quiet|quiet|silence"
              r"|hush|shush|shut up|enough|thats enough|never ?mind|forget (?:about )?it|cancel(?: that| it)?"
              r"|turn it off|dismiss|thats all)")
_STOP = re.compile(rf"^(?:no |oh )?{_STOP_WORD}(?: {_STOP_WORD})*$")


def _name(match: re.Match[str], group: str = "name") -> str | None:
    """The timer name a pattern captured, or "" when it is no name (an article, a number...)."""
    name = match.groupdict().get(group)
    if name is None:
        return None
    parts = name.split()
    if any(w in _NOT_NAMES for w in parts):
        return ""
    return "wake-up" if parts == ["wake", "up"] else name


def _set_timer(line: str) -> SetTimer | None:
    wake = _WAKE_ME.match(line)
    if wake:
        return SetTimer(int(wake["dur"]), "wake-up")
    for pattern in _SET_TIMER:
        m = pattern.match(line)
        if m is None:
            continue
        names = [n for n in (_name(m), _name(m, "name2")) if n is not None]
        if "" in names or len(names) > 1:
            continue
        return SetTimer(int(m["dur"]), names[0] if names else None)
    return None


def _named(patterns: list[re.Pattern[str]], line: str) -> tuple[bool, str | None]:
    """Whether a pattern fits with an acceptable name, and that name."""
    for pattern in patterns:
        m = pattern.match(line)
        if m is not None and _name(m) != "":
            return True, _name(m)
    return False, None


def match(text: str) -> Intent | None:
    """The local command text says, or None when it is for the language model."""
    tokens = words(numbers.in_digits(text))
    line = _normalise(tokens)
    if not line:
        return None
    if _STOP.match(line):
        return Stop()
    if _TELL_TIME.match(line):
        return TellTime()
    if _TELL_DATE.match(line):
        return TellDate()
    if _TELL_WEEKDAY.match(line):
        return TellDate(weekday_only=True)
    if _LIST_TIMERS.match(line):
        return ListTimers()
    if _CANCEL_ALL.match(line):
        return CancelTimer(None, everything=True)
    found, name = _named(_CANCEL_ONE, line)
    if found:
        return CancelTimer(name)
    found, name = _named(_TIMER_LEFT, line)
    if found:
        return TimerLeft(name)
    return _set_timer(line) or _computed(tokens)


def _computed(tokens: list[str]) -> Calculate | Convert | WhichDay | DaysUntil | None:
    """The question with a computed answer the tokens ask, or None."""
    line = _TRAILING_COURTESY.sub("", _LEADING.sub("", " ".join(tokens)))
    return arithmetic.parse(line) or conversions.parse(line) or dates.parse(line)


_ANSWER_FILLER = frozenset(
    "the my a an one ones timer for its it is that this please thanks thank you oh um uh i mean meant ok okay "
    "yes yeah cancel stop delete remove clear on left how about".split())


def names_timer(text: str, names: Collection[str]) -> str | None:
    """Which one of names an ask-back answer means ("the pasta one", "pasta"), or None if not exactly one."""
    said = [w for w in words(text) if w not in _ANSWER_FILLER]
    if not said:
        return None
    meant = [n for n in names if [w for w in words(n) if w not in _ANSWER_FILLER] == said]
    return meant[0] if len(meant) == 1 else None


_YES = re.compile(
    r"^(?:(?:oh |well |um |uh )?(?:yes|yeah|yep|yup|yea|sure|ok|okay|alright|all right|of course|"
    r"absolutely|definitely|certainly|correct|right|please|go ahead|do it|go for it|please do|"
    r"do that|yes please|thats right|thats fine|fine|sounds good|why not)"
    r"(?: (?:please|thanks|thank you|do it|go ahead|please do|do that|sure|yes|jarvis|elara))*)$")
_NO = re.compile(
    r"^(?:(?:oh |well |um |uh )?(?:no|nope|nah|no thanks|no thank you|dont|do not|dont do it|"
    r"dont do that|never mind|nevermind|cancel|cancel that|stop|not now|leave it|forget it|"
    r"better not|no dont)"
    r"(?: (?:thanks|thank you|please|dont|not now|leave it|jarvis|elara|never mind))*)$")


def yes_or_no(text: str) -> bool | None:
    """True for a plain yes ("yes please", "go ahead"), False for a plain no ("no thanks",
    "don't"), None for anything else (an answer with more in it is for the model)."""
    line = " ".join(words(text))
    if _NO.match(line):
        return False
    if _YES.match(line):
        return True
    return None
