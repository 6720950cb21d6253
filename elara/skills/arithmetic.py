"""Arithmetic said aloud, worked out without the model: "what is 17 times 3", "15 percent of 80",
"a quarter of 80", "the square root of 81", "3 squared". Pure.

One operation on one or two numbers, matched on the whole normalised line (`numbers.in_digits`);
"what's 2 plus 3 times 4" or "5 plus the number of planets" is no match and goes to the model.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from elara.skills import spoken
from elara.skills.numbers import ASK, NUMBER, THEN, say_number, value


@dataclass(frozen=True)
class Calculate:
    """One operation on the numbers said: ("times", (17, 3)); a fraction of is (numerator, denominator, of)."""

    operation: str
    operands: tuple[float, ...]


_A = rf"(?P<a>{NUMBER})"
_B = rf"(?P<b>{NUMBER})"
# "half", "a quarter", "3 quarters", "a 3 rd" (a third), "2 3 rds" (two thirds), "1 5 th" (one fifth)
_FRACTION = (r"(?:(?P<num>a|an|\d+) )?(?P<den>half|halves|quarter|quarters|(?:[3-9]|1\d) (?:rd|th)s?)")

#: (pattern, operation); the group named a is the first operand, even when said second ("take 3 from 10")
_PATTERNS = [(re.compile(rf"^{ASK}{pattern}{THEN}$"), operation) for pattern, operation in (
    (rf"{_A} (?:plus|added to) {_B}", "plus"),
    (rf"add {_A} (?:and|to|plus) {_B}", "plus"),
    (rf"(?:the )?sum of {_A} and {_B}", "plus"),
    (rf"{_A} (?:minus|take away|subtract) {_B}", "minus"),
    (rf"(?:subtract|take|take away) {_B} from {_A}", "minus"),
    (rf"{_A} (?:times|multiplied by) {_B}", "times"),
    (rf"multiply {_A} (?:by|and|times) {_B}", "times"),
    (rf"(?:the )?product of {_A} and {_B}", "times"),
    (rf"{_A} (?:divided by|over) {_B}", "divided by"),
    (rf"divide {_A} by {_B}", "divided by"),
    (rf"how many times does {_B} go into {_A}", "divided by"),
    (rf"{_A} (?:percent|per cent) of {_B}", "percent of"),
    (rf"{_A} (?:to the power of|to the power|raised to(?: the power of)?) {_B}", "to the power of"),
    (rf"{_A} to the (?P<b>\d+) (?:st|nd|rd|th)(?: power)?", "to the power of"),
    (rf"{_A} squared", "squared"),
    (rf"{_A} cubed", "cubed"),
    (rf"(?:the )?square root of {_A}", "square root"),
    (rf"(?:the )?cube root of {_A}", "cube root"),
    (rf"(?:the )?{_FRACTION} of {_B}", "fraction of"),
)]


def parse(line: str) -> Calculate | None:
    """The calculation a normalised line asks for, or None."""
    for pattern, operation in _PATTERNS:
        m = pattern.match(line)
        if m is None:
            continue
        if operation == "fraction of":
            fraction = _fraction(m["num"], m["den"])
            return Calculate(operation, (*fraction, value(m["b"]))) if fraction else None
        groups = [m[g] for g in ("a", "b") if m.groupdict().get(g) is not None]
        return Calculate(operation, tuple(value(g) for g in groups))
    return None


def _fraction(numerator: str | None, denominator: str) -> tuple[float, float] | None:
    """(numerator, denominator) of "a quarter", "3 quarters", "2 3 rds"; None for "2 quarter"."""
    count = 1 if numerator in (None, "a", "an") else int(numerator or 1)
    plural = denominator.endswith("s")
    if denominator in ("half", "halves"):
        size = 2
    elif denominator.startswith("quarter"):
        size = 4
    else:
        size = int(denominator.split()[0])
    if plural != (count != 1) or (size == 2 and count != 1):
        return None
    return float(count), float(size)


def result(calculation: Calculate) -> float | None:
    """The number a calculation comes to, or None when it has none (÷ 0, √ of a negative)."""
    operation, operands = calculation.operation, calculation.operands
    a = operands[0]
    try:
        if operation == "plus":
            return a + operands[1]
        if operation == "minus":
            return a - operands[1]
        if operation == "times":
            return a * operands[1]
        if operation == "divided by":
            return a / operands[1]
        if operation == "percent of":
            return a / 100 * operands[1]
        if operation == "fraction of":
            return a / operands[1] * operands[2]
        if operation in ("squared", "cubed", "to the power of"):
            exponent = {"squared": 2.0, "cubed": 3.0}.get(operation) or operands[1]
            return float(a ** exponent) if not (a < 0 and exponent != int(exponent)) else None
        if operation == "square root":
            return math.sqrt(a)
        if operation == "cube root":
            return math.copysign(abs(a) ** (1 / 3), a)
    except (ZeroDivisionError, ValueError, OverflowError):
        return None
    raise ValueError(f"unknown operation {operation!r}")


def answer(calculation: Calculate) -> str:
    """The spoken answer: "17 times 3 is 51.", "A quarter of 80 is 20.", "The square root of 2 is about 1.41."."""
    said = _said(calculation)
    number = result(calculation)
    if number is not None and not math.isfinite(number):
        number = None
    if number is None:
        if calculation.operation == "divided by":
            return "You can't divide by zero."
        if calculation.operation in ("square root", "to the power of"):
            return f"{_capital(said)} has no real answer."
        return "That number is too big to say."
    if calculation.operation in ("square root", "cube root"):
        number = round(number, 9)  # √81 comes out as 9.000000000000002
    return f"{_capital(said)} is {say_number(number)}."


def _said(calculation: Calculate) -> str:
    """The calculation read back: "17 times 3", "the square root of 81", "two thirds of 90"."""
    operation, operands = calculation.operation, calculation.operands
    numbers = [say_number(n) for n in operands]
    if operation in ("squared", "cubed"):
        return f"{numbers[0]} {operation}"
    if operation in ("square root", "cube root"):
        return f"the {operation} of {numbers[0]}"
    if operation == "fraction of":
        return f"{_fraction_words(int(operands[0]), int(operands[1]))} of {numbers[2]}"
    return f"{numbers[0]} {operation} {numbers[1]}"


def _fraction_words(count: int, size: int) -> str:
    """"half", "a quarter", "three quarters", "a third", "two fifths"."""
    if size == 2:
        return "half"
    name = "quarter" if size == 4 else spoken.ordinal_words(size)
    return f"a {name}" if count == 1 else f"{spoken.number_words(count)} {name}s"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
