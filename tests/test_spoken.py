"""Numbers, durations, clock times and dates in the words the voice says them with."""

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from elara.skills.spoken import (
    number_words,
    ordinal_words,
    say_clock,
    say_date,
    say_duration,
    say_list,
    say_remaining,
    year_words,
)


@pytest.mark.parametrize(("n", "words"), [
    (0, "zero"), (1, "one"), (7, "seven"), (13, "thirteen"), (19, "nineteen"), (20, "twenty"),
    (21, "twenty-one"), (40, "forty"), (99, "ninety-nine"), (100, "one hundred"), (105, "one hundred five"),
    (120, "one hundred twenty"), (999, "nine hundred ninety-nine"), (1000, "one thousand"),
    (1001, "one thousand one"), (3600, "three thousand six hundred"), (21_000, "twenty-one thousand"),
    (999_999, "nine hundred ninety-nine thousand nine hundred ninety-nine"),
])
def test_number_words(n, words):
    assert number_words(n) == words


@pytest.mark.parametrize("n", [-1, 1_000_000])
def test_number_words_outside_its_range_is_refused(n):
    with pytest.raises(ValueError, match="0 to 999,999"):
        number_words(n)


@pytest.mark.parametrize(("n", "words"), [
    (1, "first"), (2, "second"), (3, "third"), (4, "fourth"), (5, "fifth"), (8, "eighth"), (9, "ninth"),
    (11, "eleventh"), (12, "twelfth"), (13, "thirteenth"), (20, "twentieth"), (21, "twenty-first"),
    (22, "twenty-second"), (23, "twenty-third"), (30, "thirtieth"), (31, "thirty-first"), (100, "one hundredth"),
])
def test_ordinal_words(n, words):
    assert ordinal_words(n) == words


@pytest.mark.parametrize(("year", "words"), [
    (2026, "twenty twenty-six"), (2000, "two thousand"), (2005, "two thousand five"), (2010, "twenty ten"),
    (1904, "nineteen oh four"), (1999, "nineteen ninety-nine"), (1900, "nineteen hundred"),
    (2100, "twenty-one hundred"), (1000, "one thousand"), (987, "nine hundred eighty-seven"),
])
def test_year_words(year, words):
    assert year_words(year) == words


@pytest.mark.parametrize(("seconds", "words"), [
    (0, "zero seconds"), (1, "one second"), (2, "two seconds"), (59, "fifty-nine seconds"), (60, "one minute"),
    (90, "one minute and thirty seconds"), (600, "ten minutes"), (3600, "one hour"), (3605, "one hour and five seconds"),
    (3900, "one hour and five minutes"), (3661, "one hour, one minute and one second"), (7200, "two hours"),
    (3_600_000, "one thousand hours"),
])
def test_say_duration(seconds, words):
    assert say_duration(seconds) == words


def test_a_negative_duration_is_refused():
    with pytest.raises(ValueError, match="negative"):
        say_duration(-1)


@pytest.mark.parametrize(("seconds", "words"), [
    (0, "zero seconds"),
    (0.2, "one second"),  # rounded up: a timer about to ring is not already done
    (44.01, "forty-five seconds"),
    (59.5, "one minute"),
    (61.2, "one minute and one second"),
    (119.6, "two minutes"),
    (120, "two minutes"),
    (125, "about two minutes"),
    (754, "about thirteen minutes"),
    (3599.9, "one hour"),
    (3600, "one hour"),
    (5432, "about one hour and thirty-one minutes"),
    (7200, "two hours"),
])
def test_say_remaining(seconds, words):
    assert say_remaining(seconds) == words


def at(hour: int, minute: int) -> datetime:
    return datetime(2026, 11, 23, hour, minute, tzinfo=timezone(timedelta(hours=-5)))


@pytest.mark.parametrize(("hour", "minute", "words"), [
    (0, 0, "midnight"),
    (12, 0, "noon"),
    (12, 5, "twelve oh five in the afternoon"),
    (23, 59, "eleven fifty-nine at night"),
    (0, 30, "twelve thirty at night"),
    (2, 59, "two fifty-nine at night"),
    (3, 0, "three o'clock in the morning"),
    (10, 22, "ten twenty-two in the morning"),
    (11, 59, "eleven fifty-nine in the morning"),
    (15, 0, "three o'clock in the afternoon"),
    (15, 5, "three oh five in the afternoon"),
    (16, 59, "four fifty-nine in the afternoon"),
    (17, 30, "five thirty in the evening"),
    (21, 0, "nine o'clock at night"),
])
def test_say_clock(hour, minute, words):
    assert say_clock(at(hour, minute)) == words


def test_say_clock_speaks_the_datetimes_own_time_zone():
    noon_in_new_york = datetime(2026, 11, 23, 17, 0, tzinfo=UTC).astimezone(timezone(timedelta(hours=-5)))
    assert say_clock(noon_in_new_york) == "noon"


@pytest.mark.parametrize(("day", "year", "words"), [
    (date(2026, 11, 23), False, "Monday, November twenty-third"),
    (date(2026, 11, 23), True, "Monday, November twenty-third, twenty twenty-six"),
    (date(2026, 1, 1), True, "Thursday, January first, twenty twenty-six"),
    (date(2005, 2, 12), True, "Saturday, February twelfth, two thousand five"),
    (date(2000, 12, 31), True, "Sunday, December thirty-first, two thousand"),
])
def test_say_date(day, year, words):
    assert say_date(day, year=year) == words


@pytest.mark.parametrize(("items", "words"), [
    ([], ""), (["pasta"], "pasta"), (["pasta", "tea"], "pasta and tea"), (["pasta", "tea", "eggs"], "pasta, tea and eggs"),
])
def test_say_list(items, words):
    assert say_list(items) == words
