"""Numbers, durations, times and dates in the words a person says them with (US English). Pure."""

from __future__ import annotations

import math
from datetime import date, datetime

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_ORDINAL_IRREGULAR = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
                      "nine": "ninth", "twelve": "twelfth"}
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def number_words(n: int) -> str:
    """0 to 999,999 in words, US style: "one hundred five", "twenty-one"."""
    if not 0 <= n < 1_000_000:
        raise ValueError(f"number_words covers 0 to 999,999, not {n}")
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{_ONES[hundreds]} hundred" + (f" {number_words(rest)}" if rest else "")
    thousands, rest = divmod(n, 1000)
    return f"{number_words(thousands)} thousand" + (f" {number_words(rest)}" if rest else "")


def ordinal_words(n: int) -> str:
    """The ordinal in words: 1 → "first", 23 → "twenty-third", 100 → "one hundredth"."""
    words = number_words(n)
    cut = max(words.rfind(" "), words.rfind("-")) + 1
    head, last = words[:cut], words[cut:]
    if last in _ORDINAL_IRREGULAR:
        return head + _ORDINAL_IRREGULAR[last]
    return head + (last[:-1] + "ieth" if last.endswith("y") else last + "th")


def year_words(y: int) -> str:
    """A year as it is said: "nineteen oh four", "two thousand five", "twenty twenty-six"."""
    if y < 1000 or y >= 10000 or y % 1000 == 0 or 2000 < y < 2010:
        return number_words(y)
    high, low = divmod(y, 100)
    if low == 0:
        return f"{number_words(high)} hundred"
    return f"{number_words(high)} {'oh ' if low < 10 else ''}{number_words(low)}"


def _count(n: int, unit: str) -> str:
    return f"{number_words(n)} {unit}{'' if n == 1 else 's'}"


def say_duration(seconds: int) -> str:
    """A whole-second duration in hours, minutes and seconds: "one hour and five minutes"."""
    if seconds < 0:
        raise ValueError(f"a duration can't be negative ({seconds} seconds)")
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [_count(n, unit) for n, unit in ((hours, "hour"), (minutes, "minute"), (secs, "second")) if n]
    return say_list(parts) if parts else "zero seconds"


def say_remaining(seconds: float) -> str:
    """How long is left, rounded the way a person would: seconds under two minutes, "about" whole minutes above."""
    if seconds < 60:
        # Rounded up so that a timer about to ring never sounds already done.
        return say_duration(max(0, math.ceil(seconds)))
    if seconds < 120:
        return say_duration(int(seconds + 0.5))
    whole_minutes = int(seconds / 60 + 0.5) * 60
    return ("about " if abs(whole_minutes - seconds) >= 1 else "") + say_duration(whole_minutes)


def say_clock(t: datetime) -> str:
    """The time of day in t's own time zone: "ten twenty-two in the morning", "noon", "midnight"."""
    hour, minute = t.hour, t.minute
    if minute == 0 and hour in (0, 12):
        return "midnight" if hour == 0 else "noon"
    spoken = number_words(hour % 12 or 12)
    if minute == 0:
        spoken += " o'clock"
    else:
        spoken += f" {'oh ' if minute < 10 else ''}{number_words(minute)}"
    # "Three in the morning" is how people say it, so the night ends at three.
    if 3 <= hour < 12:
        period = "in the morning"
    elif 12 <= hour < 17:
        period = "in the afternoon"
    elif 17 <= hour < 21:
        period = "in the evening"
    else:
        period = "at night"
    return f"{spoken} {period}"


def say_date(d: date, *, year: bool) -> str:
    """The date with its weekday: "Monday, November twenty-third" (", twenty twenty-six" with year)."""
    spoken = f"{_WEEKDAYS[d.weekday()]}, {_MONTHS[d.month - 1]} {ordinal_words(d.day)}"
    return f"{spoken}, {year_words(d.year)}" if year else spoken


def say_list(items: list[str]) -> str:
    """Items joined as in speech: "pasta", "pasta and tea", "pasta, tea and eggs"."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"
