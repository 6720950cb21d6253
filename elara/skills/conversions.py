"""Unit conversions worked out without the model: length, weight, volume, temperature and time
("how many ounces in a pound", "70 Fahrenheit in Celsius", "convert 5 miles to kilometers"). Pure.

The units are the everyday ones, US customary beside metric (a cup is the US cup, a ton is left
to the model); every size is the unit's exact definition in its kind's base unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from elara.skills.numbers import ASK, NUMBER, say_number, value


@dataclass(frozen=True)
class Unit:
    """A unit as it is said, and its size in its kind's base unit (metre, kilogram, litre, second, kelvin)."""

    name: str
    plural: str
    kind: str
    size: float
    offset: float = 0.0  # temperatures: base = amount · size + offset
    said: tuple[str, ...] = ()  # other names heard for it ("kilometres", "km")


_INCH = 0.0254
_POUND = 0.45359237
_GALLON = 231 * _INCH ** 3 * 1000  # 3.785411784 litres
UNITS = (
    Unit("millimeter", "millimeters", "length", 0.001, said=("millimetre", "millimetres", "mm")),
    Unit("centimeter", "centimeters", "length", 0.01, said=("centimetre", "centimetres", "cm")),
    Unit("meter", "meters", "length", 1.0, said=("metre", "metres")),
    Unit("kilometer", "kilometers", "length", 1000.0, said=("kilometre", "kilometres", "km", "kms")),
    Unit("inch", "inches", "length", _INCH),
    Unit("foot", "feet", "length", 12 * _INCH, said=("ft",)),
    Unit("yard", "yards", "length", 36 * _INCH, said=("yd", "yds")),
    Unit("mile", "miles", "length", 63360 * _INCH),
    Unit("milligram", "milligrams", "weight", 1e-6, said=("milligramme", "milligrammes", "mg")),
    Unit("gram", "grams", "weight", 0.001, said=("gramme", "grammes", "g")),
    Unit("kilogram", "kilograms", "weight", 1.0, said=("kilogramme", "kilogrammes", "kilo", "kilos", "kg", "kgs")),
    Unit("metric ton", "metric tons", "weight", 1000.0, said=("tonne", "tonnes")),
    Unit("ounce", "ounces", "weight", _POUND / 16, said=("oz",)),
    Unit("pound", "pounds", "weight", _POUND, said=("lb", "lbs")),
    Unit("stone", "stone", "weight", 14 * _POUND, said=("stones",)),
    Unit("milliliter", "milliliters", "volume", 0.001, said=("millilitre", "millilitres", "ml", "mls")),
    Unit("liter", "liters", "volume", 1.0, said=("litre", "litres")),
    Unit("teaspoon", "teaspoons", "volume", _GALLON / 768, said=("tsp",)),
    Unit("tablespoon", "tablespoons", "volume", _GALLON / 256, said=("tbsp",)),
    Unit("fluid ounce", "fluid ounces", "volume", _GALLON / 128, said=("fl oz",)),
    Unit("cup", "cups", "volume", _GALLON / 16),
    Unit("pint", "pints", "volume", _GALLON / 8),
    Unit("quart", "quarts", "volume", _GALLON / 4),
    Unit("gallon", "gallons", "volume", _GALLON),
    Unit("millisecond", "milliseconds", "time", 0.001),
    Unit("second", "seconds", "time", 1.0, said=("sec", "secs")),
    Unit("minute", "minutes", "time", 60.0, said=("min", "mins")),
    Unit("hour", "hours", "time", 3600.0, said=("hr", "hrs")),
    Unit("day", "days", "time", 86400.0),
    Unit("week", "weeks", "time", 604800.0),
    Unit("degree Celsius", "degrees Celsius", "temperature", 1.0, 273.15,
         said=("celsius", "degree celsius", "degrees celsius", "degrees c", "centigrade", "degrees centigrade")),
    Unit("degree Fahrenheit", "degrees Fahrenheit", "temperature", 5 / 9, 273.15 - 32 * 5 / 9,
         said=("fahrenheit", "degree fahrenheit", "degrees fahrenheit", "degrees f")),
    Unit("kelvin", "kelvin", "temperature", 1.0, said=("kelvins", "degrees kelvin")),
)
_BY_NAME = {name: unit for unit in UNITS for name in (unit.name.lower(), unit.plural.lower(), *unit.said)}
_NAMED = {unit.name: unit for unit in UNITS}
_FLUID_OUNCE = _NAMED["fluid ounce"]
_UNIT = "|".join(sorted(map(re.escape, _BY_NAME), key=len, reverse=True))


@dataclass(frozen=True)
class Convert:
    """An amount in one unit, asked in another; how_many: asked "how many X in Y" ("There are …")."""

    amount: float
    source: str  # a unit's name: "mile"
    target: str
    how_many: bool = False


_AMOUNT = rf"(?P<amount>{NUMBER}|an|a)"
_SOURCE = rf"(?P<source>{_UNIT})"
_TARGET = rf"(?P<target>{_UNIT})"
_HOW_MANY = [re.compile(
    rf"^{ASK}how many {_TARGET} (?:(?:are |is )?(?:there )?(?:in|to|per)|make up|make) {_AMOUNT} {_SOURCE}$")]
_PLAIN = [re.compile(rf"^{ASK}{p}$") for p in (
    rf"(?:convert )?{_AMOUNT} {_SOURCE} (?:in|to|into|in to|as) {_TARGET}",
    rf"how many {_TARGET} (?:is|are|make|makes) {_AMOUNT} {_SOURCE}",
    rf"{_AMOUNT} {_SOURCE} (?:is|equals|are|makes|is equal to) how many {_TARGET}",
)]


def parse(line: str) -> Convert | None:
    """The conversion a normalised line asks for, or None (units of different kinds too)."""
    for patterns, how_many in ((_HOW_MANY, True), (_PLAIN, False)):
        for pattern in patterns:
            m = pattern.match(line)
            if m is None:
                continue
            source, target = _BY_NAME[m["source"]], _BY_NAME[m["target"]]
            # "ounces in a cup" are fluid ounces
            source, target = _fluid(source, target), _fluid(target, source)
            if source.kind != target.kind or source == target:
                return None
            amount = 1.0 if m["amount"] in ("a", "an") else value(m["amount"])
            return Convert(amount, source.name, target.name, how_many)
    return None


def _fluid(unit: Unit, other: Unit) -> Unit:
    return _FLUID_OUNCE if unit.name == "ounce" and other.kind == "volume" else unit


def converted(conversion: Convert) -> float:
    """The amount in the target unit."""
    source, target = _NAMED[conversion.source], _NAMED[conversion.target]
    return (conversion.amount * source.size + source.offset - target.offset) / target.size


def answer(conversion: Convert) -> str:
    """The spoken answer: "There are 16 ounces in a pound.", "5 miles is about 8.05 kilometers."."""
    source, target = _NAMED[conversion.source], _NAMED[conversion.target]
    result = converted(conversion)
    if target.kind == "temperature":
        number = say_number(result, decimals=1)
    else:
        number = say_number(result, significant=3)
    # "about 1 kilometer": the unit agrees with the number said
    whole = number.removeprefix("about ")
    result_unit = target.name if whole == "1" else target.plural
    amount = _amount(conversion.amount, source)
    if conversion.how_many:
        verb = "is" if whole == "1" else "are"
        return f"There {verb} {number} {result_unit} in {amount}."
    return f"{_capital(amount)} is {number} {result_unit}."


def _amount(amount: float, unit: Unit) -> str:
    """How the amount asked about is said back: "a pound", "an hour", "3 hours", "70 degrees Fahrenheit"."""
    if amount == 1 and unit.kind != "temperature":
        return f"{'an' if unit.name[0] in 'aeiou' or unit.name == 'hour' else 'a'} {unit.name}"
    number = say_number(amount).removeprefix("about ")
    return f"{number} {unit.name if number == '1' else unit.plural}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
