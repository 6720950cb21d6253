"""Numbers in a computed question: spoken words and symbols read as digits, results said back. Pure.

`in_digits` turns "what's seventeen × three" into "what's 17 times 3" (number words by `text2num`),
for the timer commands and the computed questions alike; the question patterns then match `NUMBER`
and read it with `value`. `say_number` says a result the
way a person would: "51", "about 3.33", "minus 2", never "12.0".
"""

from __future__ import annotations

import math
import re

from text_to_num import alpha2digit

_SYMBOLS = [(re.compile(pattern), words) for pattern, words in (
    (r"(?<=\d)\s*x\s*(?=\d)", " times "),
    (r"[×✕*]", " times "),
    (r"÷", " divided by "),
    (r"(?<=\d)\s*/\s*(?=\d)", " divided by "),
    (r"\+", " plus "),
    (r"(?<=\d)\s*[-−–]\s*(?=\d)", " minus "),
    (r"^\s*[-−]\s*(?=\d)", " minus "),
    (r"\^", " to the power of "),
    (r"%", " percent "),
    (r"℃", " degrees celsius "),
    (r"℉", " degrees fahrenheit "),
    (r"°", " degrees "),
    (r"=", " "),
)]
# text2num reads "second" as the ordinal 2nd; it is the unit ("a 90 second timer", "in a second")
# unless it follows "the" ("the second of March").
_SECOND = re.compile(r"(?<!\bthe )\bsecond\b")

#: an amount in a normalised line (digits, "a half", "2 and a half", "minus 3", "a 100" for "a hundred")
NUMBER = (r"(?:(?:minus|negative) )?(?:(?:a (?=\d{3}))?\d+(?:\.\d+)?(?: and (?:a half|a quarter|3 quarters))?"
          r"|a half|a quarter)")
_PARTS = {"a half": 0.5, "a quarter": 0.25, "3 quarters": 0.75}
# "1.5 million", as Whisper writes it: text2num would read the scale word alone
_SCALED = re.compile(r"\b(\d+(?:\.\d+)?) (thousand|million|billion|trillion)\b")
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}

#: how a question for a computed answer may begin ("what's", "how much is", "calculate") …
ASK = (r"(?:(?:what is|whats|what s|what are|how much is|how much are|calculate|compute|work out|figure out"
       r"|tell me|do you know|what does|what do|what) )*")
#: … and end ("equal", "make")
THEN = r"(?: (?:equal|equals|make|makes|come to|is|are))?"


def in_digits(text: str) -> str:
    """Lower case, arithmetic symbols as words and number words as digits: "Seventeen × 3" → "17 times 3"."""
    text = text.lower().replace("’", "'")
    for pattern, words in _SYMBOLS:
        text = pattern.sub(words, text)
    text = _SECOND.sub("sec", text)
    text = _SCALED.sub(_scaled, text)
    return alpha2digit(text, "en", threshold=0)


def _scaled(m: re.Match[str]) -> str:
    """"1.5 million" → "1500000"."""
    number = float(m[1]) * _SCALES[m[2]]
    return str(int(number)) if number == int(number) else str(number)


def value(phrase: str) -> float:
    """The amount a `NUMBER` phrase says: "2 and a half" → 2.5, "minus 3" → -3, "a 100" → 100."""
    words = phrase.split()
    sign = 1.0
    if words[0] in ("minus", "negative"):
        sign, words = -1.0, words[1:]
    if words[0] == "a" and words[1][0].isdigit():
        words = words[1:]
    said = " ".join(words)
    if said in _PARTS:
        return sign * _PARTS[said]
    return sign * (float(words[0]) + (_PARTS[" ".join(words[2:])] if len(words) > 1 else 0.0))


def say_number(x: float, *, significant: int | None = None, decimals: int = 2) -> str:
    """A number as digits to be spoken: whole numbers whole ("51"), others rounded to `decimals`
    places ("about 3.33"; small ones to three significant figures), or to `significant` figures
    when given ("about 8.05", "about 161"); "about" when rounded, "minus" when negative."""
    if not math.isfinite(x):
        raise ValueError(f"no number to say: {x}")
    if x == 0:
        return "0"
    size = math.floor(math.log10(abs(x)))
    if abs(x) >= 1e15:
        mantissa = round(x / 10 ** size, 2)
        about = "" if math.isclose(mantissa * 10.0 ** size, x, rel_tol=1e-9) else "about "
        return f"{about}{say_number(mantissa)} times 10 to the power of {size}"
    if significant is not None:
        places = max(0, significant - 1 - size)
    else:
        places = decimals if size >= 0 else max(decimals, 2 - size)
    rounded = round(x, places)
    text = f"{abs(rounded):.{places}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    exact = math.isclose(rounded, x, rel_tol=1e-9, abs_tol=1e-12)
    return ("" if exact else "about ") + ("minus " if rounded < 0 else "") + text
