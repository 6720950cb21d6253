"""Computed answers (arithmetic, unit conversions, the calendar): the exact words Elara says without
the model, and the questions that only look computable and must still reach it. The calendar is
seen from a fixed clock: Monday, November 23rd, 2026, 15:05 in the local zone."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from elara.skills import dates
from elara.skills.commands import LocalCommands
from elara.skills.intents import match
from elara.skills.numbers import in_digits, say_number

NOW = datetime(2026, 11, 23, 14, 5, tzinfo=UTC)
ZONE = timezone(timedelta(hours=1))

#: (question, the intent stored as metadata.intent, what Elara says)
COMPUTED = [
    # Arithmetic, in digits and in words, with the symbols Whisper writes.
    ("What is 17 times 3?", "calculate", "17 times 3 is 51."),
    ("What's seventeen times three?", "calculate", "17 times 3 is 51."),
    ("Hey Jarvis, what's 7 x 8?", "calculate", "7 times 8 is 56."),
    ("What's 15% of 80?", "calculate", "15 percent of 80 is 12."),
    ("fifteen percent of eighty", "calculate", "15 percent of 80 is 12."),
    ("What's a quarter of 80?", "calculate", "A quarter of 80 is 20."),
    ("What is three quarters of eighty?", "calculate", "Three quarters of 80 is 60."),
    ("What is two thirds of ninety?", "calculate", "Two thirds of 90 is 60."),
    ("Half of 80.", "calculate", "Half of 80 is 40."),
    ("What is 144 divided by 12?", "calculate", "144 divided by 12 is 12."),
    ("What is 10 divided by 3?", "calculate", "10 divided by 3 is about 3.33."),
    ("What is 2 divided by 3?", "calculate", "2 divided by 3 is about 0.667."),
    ("What's the square root of 81?", "calculate", "The square root of 81 is 9."),
    ("What is the square root of two?", "calculate", "The square root of 2 is about 1.41."),
    ("2 plus 2", "calculate", "2 plus 2 is 4."),
    ("What's 2+2?", "calculate", "2 plus 2 is 4."),
    ("What's 3 squared?", "calculate", "3 squared is 9."),
    ("What is one and a half times four?", "calculate", "1.5 times 4 is 6."),
    ("What is 5 - 8?", "calculate", "5 minus 8 is minus 3."),
    ("Subtract 3 from 10.", "calculate", "10 minus 3 is 7."),
    ("What is 2 to the power of 10?", "calculate", "2 to the power of 10 is 1024."),
    ("Can you tell me what a hundred and twenty divided by four is?", "calculate", "120 divided by 4 is 30."),
    ("What is 1.5 million divided by 3?", "calculate", "1500000 divided by 3 is 500000."),
    ("What is 7 divided by 0?", "calculate", "You can't divide by zero."),
    # Units: length, weight, volume, temperature, time.
    ("How many minutes are in three hours?", "convert", "There are 180 minutes in 3 hours."),
    ("How many minutes in an hour?", "convert", "There are 60 minutes in an hour."),
    ("How many seconds in a day?", "convert", "There are 86400 seconds in a day."),
    ("What's 70 Fahrenheit in Celsius?", "convert", "70 degrees Fahrenheit is about 21.1 degrees Celsius."),
    ("70°F in Celsius", "convert", "70 degrees Fahrenheit is about 21.1 degrees Celsius."),
    ("What is 100 degrees Celsius in Fahrenheit?", "convert", "100 degrees Celsius is 212 degrees Fahrenheit."),
    ("Convert 5 miles to kilometres.", "convert", "5 miles is about 8.05 kilometers."),
    ("How many kilometers is 5 miles?", "convert", "5 miles is about 8.05 kilometers."),
    ("How many feet are there in a mile?", "convert", "There are 5280 feet in a mile."),
    ("How many ounces in a pound?", "convert", "There are 16 ounces in a pound."),
    ("Convert 10 kg to pounds.", "convert", "10 kilograms is about 22 pounds."),
    ("How many grams in an ounce?", "convert", "There are about 28.3 grams in an ounce."),
    ("How many pounds is a stone?", "convert", "A stone is 14 pounds."),
    ("How many cups in a litre?", "convert", "There are about 4.23 cups in a liter."),
    ("How many ounces in a cup?", "convert", "There are 8 fluid ounces in a cup."),
    ("How many teaspoons in a tablespoon?", "convert", "There are 3 teaspoons in a tablespoon."),
    # The calendar, from Monday, November 23rd, 2026.
    ("What's the date on Friday?", "which_day", "Friday is November twenty-seventh."),
    ("What's the date tomorrow?", "which_day", "Tomorrow is Tuesday, November twenty-fourth."),
    ("What day is it tomorrow?", "which_day", "Tomorrow is Tuesday, November twenty-fourth."),
    ("What day was it yesterday?", "which_day", "Yesterday was Sunday, November twenty-second."),
    ("What's the date in two weeks?", "which_day", "In two weeks it will be Monday, December seventh."),
    ("What date is it two weeks from now?", "which_day", "In two weeks it will be Monday, December seventh."),
    ("What day is Christmas this year?", "which_day", "Christmas is on Friday, December twenty-fifth."),
    ("What day does Christmas fall on this year?", "which_day", "Christmas is on Friday, December twenty-fifth."),
    ("What day is New Year's Day next year?", "which_day",
     "New Year's Day is on Friday, January first, twenty twenty-seven."),
    ("What day of the week is the fourth of July?", "which_day", "July fourth, twenty twenty-seven is a Sunday."),
    ("What day is March 3rd, 2027?", "which_day", "March third, twenty twenty-seven is a Wednesday."),
    ("What day is February 29th this year?", "which_day", "There is no February twenty-ninth this year."),
    ("How many days until Christmas?", "days_until", "Christmas is in thirty-two days."),
    ("How many days are left until New Year's Eve?", "days_until", "New Year's Eve is in thirty-eight days."),
    ("How many days until the 3rd of March?", "days_until",
     "March third, twenty twenty-seven is in one hundred days."),
    ("How many days till Friday?", "days_until", "Friday is in four days."),
]

#: questions that only look computable: the model answers them
LOOK_ALIKES = [
    "What is the meaning of life?",
    "What is the time in Tokyo?",
    "How many people live in Paris?",
    "What's 5 plus the number of planets?",
    "How many days did it take to build Rome?",
    "Convert me to Buddhism.",
    "What is five times?",
    "What is a quarter past three?",
    "What is the square root of a banana?",
    "What is 2 plus 3 times 4?",
    "Is 17 times 3 51?",
    "What's 5 factorial?",
    "What is 2 plus 2 in binary?",
    "What's 10 percent of my salary?",
    "What is 3 times the speed of light?",
    "Two plus two equals five.",
    "What is one?",
    "How many cups of coffee should I drink a day?",
    "How many feet does a spider have?",
    "How many calories in a banana?",
    "How many ounces in a pint of beer?",
    "How many miles to London?",
    "Convert 5 dollars to euros.",
    "What is 20 degrees in Celsius?",
    "How many seconds in a year?",
    "How many inches tall is the Eiffel Tower?",
    "How many days are in a month?",
    "How many days until my birthday?",
    "How many days until the weekend?",
    "How many weeks until Christmas?",
    "What's the date next Friday?",
    "What day is it in Tokyo?",
    "What's the date of Easter?",
    "How long is left until Christmas?",
]


def commands(now: datetime = NOW) -> LocalCommands:
    """Local commands with a fixed clock; a computed answer never touches the timers."""
    return LocalCommands(None, max_seconds=86400, clock=lambda: now, local_zone=ZONE)  # type: ignore[arg-type]


@pytest.mark.parametrize(("question", "intent", "said"), COMPUTED)
def test_a_computable_question_is_answered_without_the_model(question, intent, said):
    reply = commands().answer(question)
    assert reply is not None, question
    assert (reply.intent, reply.text) == (intent, said)
    assert reply.store and reply.act is None and not reply.expects_answer


@pytest.mark.parametrize("question", LOOK_ALIKES)
def test_a_question_that_only_looks_computable_goes_to_the_model(question):
    assert match(question) is None
    assert commands().answer(question) is None


def test_the_tables_cover_40_computed_questions_and_20_look_alikes():
    assert len(COMPUTED) >= 40 and len(LOOK_ALIKES) >= 20
    kinds = {intent for _, intent, _ in COMPUTED}
    assert kinds == {"calculate", "convert", "which_day", "days_until"}


def test_the_calendar_is_the_local_one():
    # 23:30 UTC on the 23rd is already the 24th an hour east.
    late = commands(datetime(2026, 11, 23, 23, 30, tzinfo=UTC))
    reply = late.answer("How many days until Christmas?")
    assert reply is not None and reply.text == "Christmas is in thirty-one days."


def test_a_weekday_is_the_next_one_and_a_past_date_the_next_year():
    friday = commands(datetime(2026, 11, 27, 12, 0, tzinfo=UTC))
    assert friday.answer("What's the date on Friday?").text == "Friday is December fourth."
    assert friday.answer("How many days until Friday?").text == "Friday is in seven days."
    christmas = commands(datetime(2026, 12, 25, 12, 0, tzinfo=UTC))
    assert christmas.answer("How many days until Christmas?").text == "Christmas is today."
    boxing_day = commands(datetime(2026, 12, 26, 12, 0, tzinfo=UTC))
    assert boxing_day.answer("How many days until Christmas?").text == "Christmas is in three hundred sixty-four days."
    assert boxing_day.answer("What day is Christmas this year?").text == (
        "Christmas was on Friday, December twenty-fifth.")


def test_february_29th_is_the_next_leap_day():
    day = dates.parse("what day is february 29 th")
    assert day == dates.WhichDay(dates.DayOfYear(2, 29))
    assert dates.answer(day, NOW.date()) == "February twenty-ninth, twenty twenty-eight is a Tuesday."
    assert dates.parse("what day is february 30 th") is None


@pytest.mark.parametrize(("text", "line"), [
    ("What's seventeen times three?", "what's 17 times 3?"),
    ("one and a half", "1 and a half"),
    ("twenty-five percent", "25 percent"),
    ("17×3", "17 times 3"),
    ("12 / 4", "12 divided by 4"),
    ("5-3", "5 minus 3"),
    ("70°F", "70 degrees f"),
    ("how many milliseconds in a second", "how many milliseconds in a sec"),
    ("the second of March", "the 2nd of march"),
    ("1.5 million", "1500000"),
])
def test_in_digits(text, line):
    assert in_digits(text) == line


@pytest.mark.parametrize(("number", "options", "said"), [
    (51.0, {}, "51"),
    (12.0, {}, "12"),
    (2.5, {}, "2.5"),
    (0.1 + 0.2, {}, "0.3"),
    (10 / 3, {}, "about 3.33"),
    (2 / 3, {}, "about 0.667"),
    (-2.0, {}, "minus 2"),
    (0.0, {}, "0"),
    (1e100, {}, "1 times 10 to the power of 100"),
    (3.0 ** 40, {}, "about 1.22 times 10 to the power of 19"),
    (8.04672, {"significant": 3}, "about 8.05"),
    (160.9344, {"significant": 3}, "about 161"),
    (5280.0, {"significant": 3}, "5280"),
    (0.0295735, {"significant": 3}, "about 0.0296"),
    (21.1111, {"decimals": 1}, "about 21.1"),
    (212.0, {"decimals": 1}, "212"),
])
def test_say_number(number, options, said):
    assert say_number(number, **options) == said
