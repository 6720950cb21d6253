"""Questions about the calendar answered without the model: "what's the date on Friday", "what day
is Christmas this year", "how many days until the 3rd of March", "what's the date in two weeks". Pure.

`parse` reads the question from a normalised line (`numbers.in_digits`: "the 3 rd of march"); the
answer needs today, which the caller knows (`answer(question, today)`). "next Friday" is left to
the model: people mean two different days by it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

from elara.skills import spoken

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")


@dataclass(frozen=True)
class DaysAhead:
    """A day counted from today (tomorrow is 1); said is how many ahead, in words ("two weeks")."""

    days: int
    said: str = ""


@dataclass(frozen=True)
class NextWeekday:
    """The first such weekday after today (0 is Monday)."""

    weekday: int


@dataclass(frozen=True)
class DayOfYear:
    """A holiday or a date: in `year`, in the year `years_ahead` of this one, or else the next to come."""

    month: int
    day: int
    name: str | None = None  # "Christmas"; None: it is said as the date
    year: int | None = None
    years_ahead: int | None = None


Day = DaysAhead | NextWeekday | DayOfYear


@dataclass(frozen=True)
class WhichDay:
    """Which date, and which weekday, a day is."""

    day: Day


@dataclass(frozen=True)
class DaysUntil:
    """How many days from today until a day."""

    day: NextWeekday | DayOfYear


# --- the days ----------------------------------------------------------------------------------

_RELATIVE = {"today": 0, "tomorrow": 1, "tomorrows": 1, "the day after tomorrow": 2, "yesterday": -1,
             "yesterdays": -1, "the day before yesterday": -2}
_HOLIDAYS = {
    "christmas": (12, 25, "Christmas"), "christmas day": (12, 25, "Christmas Day"),
    "christmas eve": (12, 24, "Christmas Eve"), "new years eve": (12, 31, "New Year's Eve"),
    "new year": (1, 1, "New Year's Day"), "new years": (1, 1, "New Year's Day"),
    "new years day": (1, 1, "New Year's Day"), "halloween": (10, 31, "Halloween"),
    "valentines day": (2, 14, "Valentine's Day"), "valentines": (2, 14, "Valentine's Day"),
    "saint valentines day": (2, 14, "Valentine's Day"), "independence day": (7, 4, "Independence Day"),
    "saint patricks day": (3, 17, "Saint Patrick's Day"), "st patricks day": (3, 17, "Saint Patrick's Day"),
}
_MONTH = rf"(?P<month>{'|'.join(_MONTHS)})"
_DAY = r"(?P<day>\d{1,2})(?: (?:st|nd|rd|th))?"
_YEAR = r"(?P<year>\d{4}|(?:19|20|21) \d{2})"
_IN_YEAR = rf"(?: (?:(?P<which>this|next) year|(?:in )?{_YEAR}))?"
_DATES = [re.compile(rf"^{p}{_IN_YEAR}$") for p in (
    rf"(?:the )?{_DAY} of {_MONTH}", rf"{_MONTH} (?:the )?{_DAY}", rf"{_DAY} {_MONTH}",
    rf"(?P<holiday>{'|'.join(_HOLIDAYS)})")]
_WEEKDAY = re.compile(rf"^(?:on |this |this coming |the coming |coming )?(?P<weekday>{'|'.join(_WEEKDAYS)})$")
_AHEAD = [re.compile(p) for p in (
    r"^in (?P<n>\d+|a) (?P<unit>days?|weeks?)(?: time)?$",
    r"^(?P<n>\d+|a) (?P<unit>days?|weeks?) from (?:now|today)$",
)]


def parse_day(phrase: str) -> Day | None:
    """The day a phrase names: "tomorrow", "in 2 weeks", "friday", "christmas this year", "the 3 rd of march"."""
    if phrase in _RELATIVE:
        return DaysAhead(_RELATIVE[phrase])
    m = _WEEKDAY.match(phrase)
    if m:
        return NextWeekday(_WEEKDAYS.index(m["weekday"]))
    for pattern in _AHEAD:
        m = pattern.match(phrase)
        if m:
            n = 1 if m["n"] == "a" else int(m["n"])
            unit = m["unit"].rstrip("s")
            said = ("a " if m["n"] == "a" else f"{spoken.number_words(n)} ") + unit + ("s" if n != 1 else "")
            return DaysAhead(n * (7 if unit == "week" else 1), said) if n <= 9999 else None
    for pattern in _DATES:
        m = pattern.match(phrase)
        if m:
            return _day_of_year(m)
    return None


def _day_of_year(m: re.Match[str]) -> DayOfYear | None:
    """The holiday or date a match names, if there is such a day (in a leap year, when no year is said)."""
    if m.groupdict().get("holiday"):
        month, day, name = _HOLIDAYS[m["holiday"]]
    else:
        month, day, name = _MONTHS.index(m["month"]) + 1, int(m["day"]), None
    year = int(m["year"].replace(" ", "")) if m["year"] else None
    if year is not None and not 1000 <= year <= 2999:
        return None
    try:
        date(year or 2000, month, day)
    except ValueError:
        return None
    years_ahead = {"this": 0, "next": 1}.get(m["which"] or "")
    return DayOfYear(month, day, name, year, years_ahead)


# --- the questions -----------------------------------------------------------------------------

_WHICH = [re.compile(rf"^{p}$") for p in (
    r"(?:what is|whats|what s|tell me) the date (?:on |for |of )?(?P<day>.+?)",
    r"what date (?:is it|will it be|was it|is|will be|was|does|did) (?:on )?(?P<day>.+?)(?: fall on| fall)?",
    r"what will (?:the date|it) be (?:on )?(?P<day>.+?)",
    r"(?:what is|whats|what s) the date going to be (?:on )?(?P<day>.+?)",
    r"(?:what is|whats|what s) (?P<day>tomorrows|yesterdays) date",
    r"(?:what|which) (?:day|day of the week|weekday) (?:is it|will it be|was it|is|will be|was|does|did|falls) "
    r"(?:on )?(?P<day>.+?)(?: (?:fall|falls|land|lands)(?: on)?| on)?(?P<tail> this year| next year)?",
)]
_UNTIL = [re.compile(rf"^{p}$") for p in (
    r"how many (?:more )?(?:days|sleeps) (?:are (?:there |left )?|is it |are we |left |to go |remain |remaining )*"
    r"(?:until|till|til|to|before) (?P<day>.+?)",
    r"how many days away is (?P<day>.+?)",
)]


def parse(line: str) -> WhichDay | DaysUntil | None:
    """The calendar question a normalised line asks, or None."""
    for pattern in _WHICH:
        m = pattern.match(line)
        if m:
            day = parse_day(m["day"] + (m.groupdict().get("tail") or ""))
            return WhichDay(day) if day is not None else None
    for pattern in _UNTIL:
        m = pattern.match(line)
        if m:
            day = parse_day(m["day"])
            return DaysUntil(day) if isinstance(day, NextWeekday | DayOfYear) else None
    return None


# --- the answers -------------------------------------------------------------------------------


def resolve(day: Day, today: date) -> date | None:
    """The date a day is, seen from today; None when there is none (February 29th in 2027)."""
    if isinstance(day, DaysAhead):
        return today + timedelta(days=day.days)
    if isinstance(day, NextWeekday):
        return today + timedelta(days=(day.weekday - today.weekday() - 1) % 7 + 1)
    if day.year is not None or day.years_ahead is not None:
        year = day.year if day.year is not None else today.year + (day.years_ahead or 0)
        return _date(year, day.month, day.day)
    for year in range(today.year, today.year + 9):  # the next one to come: Feb 29th within eight years
        found = _date(year, day.month, day.day)
        if found is not None and found >= today:
            return found
    return None


def _date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def answer(question: WhichDay | DaysUntil, today: date) -> str:
    """The spoken answer: "Friday is November twenty-seventh.", "Christmas is in thirty-two days."."""
    when = resolve(question.day, today)
    if when is None:  # only a DayOfYear has none: February 29th in a year that is not a leap year
        return f"There is no {_name(question.day, today)}."
    if isinstance(question, DaysUntil):
        return _days_until(question.day, when, today)
    return _which_day(question.day, when, today)


def _which_day(day: Day, when: date, today: date) -> str:
    with_year = when.year != today.year
    verb = "was" if when < today else "is"
    if isinstance(day, DaysAhead):
        subject = {0: "Today", 1: "Tomorrow", 2: "The day after tomorrow", -1: "Yesterday",
                   -2: "The day before yesterday"}.get(day.days)
        if subject is None:
            return f"In {day.said} it will be {spoken.say_date(when, year=with_year)}."
        return f"{subject} {verb} {spoken.say_date(when, year=with_year)}."
    if isinstance(day, NextWeekday):
        return f"{_capital(_name(day, today))} is {_month_day(when, with_year)}."
    if day.name is None:
        return f"{_capital(_month_day(when, with_year))} {verb} a {_WEEKDAYS[when.weekday()].capitalize()}."
    return f"{day.name} {verb} on {spoken.say_date(when, year=with_year)}."


def _days_until(day: Day, when: date, today: date) -> str:
    name = day.name if isinstance(day, DayOfYear) and day.name else None
    subject = _capital(name or (_name(day, today) if isinstance(day, NextWeekday)
                                else _month_day(when, when.year != today.year)))
    days = (when - today).days
    if days == 0:
        return f"{subject} is today."
    if days == 1:
        return f"{subject} is tomorrow."
    if days == -1:
        return f"{subject} was yesterday."
    if days < 0:
        return f"{subject} was {spoken.number_words(-days)} days ago."
    return f"{subject} is in {spoken.number_words(days)} days."


def _name(day: Day, today: date) -> str:
    """How a day is named in an answer: "Friday", "Christmas", "February twenty-ninth, twenty twenty-seven"."""
    if isinstance(day, NextWeekday):
        return _WEEKDAYS[day.weekday].capitalize()
    if isinstance(day, DayOfYear):
        year = day.year if day.year is not None else today.year + (day.years_ahead or 0)
        said = f"{_MONTHS[day.month - 1].capitalize()} {spoken.ordinal_words(day.day)}"
        return f"{said} in {spoken.year_words(year)}" if year != today.year else f"{said} this year"
    return "such day"  # unreachable: a day counted from today always is one


def _month_day(when: date, with_year: bool) -> str:
    """"November twenty-seventh", with ", twenty twenty-seven" when asked."""
    said = f"{_MONTHS[when.month - 1].capitalize()} {spoken.ordinal_words(when.day)}"
    return f"{said}, {spoken.year_words(when.year)}" if with_year else said


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
