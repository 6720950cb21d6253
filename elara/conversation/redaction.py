"""Redaction: card numbers, phone numbers and e-mail addresses replaced before text is stored.

Pure. The rules are written for text as Whisper writes speech ("4111 1111 1111 1111",
"555-123-4567", "+44 20 7946 0958", "jane.doe@example.com") and err on the side of redacting:

- e-mail ("email") → "[email address]": `local@domain.tld`; and the spoken form Whisper sometimes
  leaves, "jane dot doe at example dot com" / "jane.doe at example.com", when the local part has
  more than one word (or digits) or the domain is a well-known mail provider — "I bought it at
  amazon.com" is not an address.
- card ("card") → "[card number]": 13–19 digits, in groups separated by single spaces or dashes,
  that pass the Luhn check (the longest such span of whole groups, so "ref 12 4111 1111 1111 1111"
  keeps "12").
- phone ("phone") → "[phone number]": digit groups joined by single spaces, dashes or dots, maybe
  with the area code in parentheses ("(555) 123-4567"), that are
  international: a leading "+" and 8–15 digits ("+44 20 7946 0958"); or
  7–15 digits in two or more groups, each group after the first of 2 or more digits, the first
  of 2 or more unless it is a one-digit trunk prefix before 3 more groups ("1-800-555-0199"),
  dotted groups of at most 4 digits ("555.123.4567"); or an unbroken 10–15 digits ("5551234567").
  Not phone numbers: dates ("2026-11-22", "22.11.2026"), years and year ranges ("2026",
  "1990-2000"; a year said before a number, "in 2026 555-1234", stays), ranges of round numbers
  ("1000-2000"), times ("10:30"), amounts ("1,500", "1.500.000", "1 500 000", "$1500000",
  "3.14159265", "1234567"), IP addresses, and anything shorter than 7 digits ("3 May").

E-mail runs first (addresses contain digits), then cards (a card is also phone-shaped), then phones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

KINDS = ("card", "phone", "email")
CARD = "[card number]"
PHONE = "[phone number]"
EMAIL = "[email address]"

# --- e-mail ---------------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}\b")

#: Top-level domains the spoken form must end with: a bare "dot <word>" is too common in speech.
_SPOKEN_TLDS = ("com", "org", "net", "edu", "gov", "io", "co", "uk", "de", "fr", "nl", "info",
                "me", "us", "ca", "au", "eu")
#: Domains where a one-word local part ("jane at gmail dot com") is still clearly an address.
_MAIL_PROVIDERS = ("gmail", "googlemail", "outlook", "hotmail", "live", "yahoo", "icloud", "me",
                   "proton", "protonmail", "gmx", "aol", "mail", "fastmail", "yandex", "zoho")
_DOT = r"(?:\s+dot\s+|\.)"
_WORD = r"[A-Za-z0-9][A-Za-z0-9_-]*"
_SPOKEN_EMAIL = re.compile(
    rf"(?<![\w.@-])(?P<local>{_WORD}(?:(?:{_DOT}|\s+underscore\s+|_){_WORD})*)"
    rf"\s+at\s+(?P<domain>{_WORD}(?:{_DOT}{_WORD})*?){_DOT}(?:{'|'.join(_SPOKEN_TLDS)})\b",
    re.IGNORECASE)
_NOT_DOMAINS = {"the", "a", "an", "my", "your", "our", "his", "her", "their", "this", "that"}


def _spoken_email(match: re.Match[str]) -> str:
    local, domain = match["local"], match["domain"]
    first_domain_word = re.split(r"\s+dot\s+|\.", domain, flags=re.IGNORECASE)[0].lower()
    if first_domain_word in _NOT_DOMAINS:
        return match[0]
    several_words = re.search(r"\s+(?:dot|underscore)\s+|[._]", local, re.IGNORECASE)
    if several_words or re.search(r"\d", local) or first_domain_word in _MAIL_PROVIDERS:
        return EMAIL
    return match[0]


def redact_emails(text: str) -> str:
    """Text with written and spoken e-mail addresses replaced by "[email address]"."""
    text = _EMAIL.sub(EMAIL, text)
    return _SPOKEN_EMAIL.sub(_spoken_email, text)


# --- card numbers ---------------------------------------------------------------------------------

#: Digit groups joined by single spaces or dashes, not glued to other digits, letters or a "+".
_DIGIT_RUN = re.compile(r"(?<![\w+])\d+(?:[ -]\d+)*(?!\w)")
_GROUP = re.compile(r"\d+")


def luhn_valid(digits: str) -> bool:
    """Whether a digit string passes the Luhn checksum that card numbers carry."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card_spans(run: str) -> list[tuple[int, int]]:
    """(start, end) in `run` of Luhn-valid spans of whole groups with 13–19 digits, left to right."""
    groups = [(m.start(), m.end()) for m in _GROUP.finditer(run)]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(groups):
        best = None
        digits = ""
        for j in range(i, len(groups)):
            digits += run[groups[j][0]:groups[j][1]]
            if len(digits) > 19:
                break
            if len(digits) >= 13 and luhn_valid(digits):
                best = j  # keep looking: the longest span wins
        if best is None:
            i += 1
        else:
            spans.append((groups[i][0], groups[best][1]))
            i = best + 1
    return spans


def _redact_card_run(match: re.Match[str]) -> str:
    run = match[0]
    out, last = [], 0
    for start, end in _card_spans(run):
        out.append(run[last:start])
        out.append(CARD)
        last = end
    out.append(run[last:])
    return "".join(out)


def redact_cards(text: str) -> str:
    """Text with Luhn-valid 13–19-digit numbers replaced by "[card number]"."""
    return _DIGIT_RUN.sub(_redact_card_run, text)


# --- phone numbers --------------------------------------------------------------------------------

_PHONE_RUN = re.compile(
    r"""
    (?<![\w+@$€£¥.,/:])                     # not inside a word, number, amount, time or path
    (?P<plus>\+\s?)?
    (?:\(\d{1,5}\)|\d+)                     # the first group, maybe an area code in parentheses
    (?:(?:[ .-]|(?<=\))\ ?)(?:\(\d{1,5}\)|\d+))*
    (?!\w|[.,:/]\d)                          # not followed by more of a number
    """,
    re.VERBOSE)
_PHONE_GROUP = re.compile(r"\(?\d+\)?")


def _is_year(group: str) -> bool:
    return len(group) == 4 and 1900 <= int(group) <= 2099


def _is_date(groups: list[str], separators: set[str]) -> bool:
    """Y-M-D, D-M-Y or M-D-Y with plausible values, the way dates are written with numbers."""
    if len(groups) != 3 or len(separators) != 1:
        return False
    a, b, c = groups
    if len(a) == 4 and len(b) <= 2 and len(c) <= 2:
        return _is_year(a) and 1 <= int(b) <= 12 and 1 <= int(c) <= 31
    if len(c) == 4 and len(a) <= 2 and len(b) <= 2:
        day_first = 1 <= int(a) <= 31 and 1 <= int(b) <= 12
        month_first = 1 <= int(a) <= 12 and 1 <= int(b) <= 31
        return _is_year(c) and (day_first or month_first)
    return False


def _is_amount(groups: list[str], separators: set[str]) -> bool:
    """Thousands groups ("1.500.000", "1 500 000"; a phone number starts with 3 or more digits)
    or a range of round numbers ("1000-2000")."""
    if len(separators) != 1:
        return False
    if 1 <= len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:]):
        if separators == {"."} or len(groups[0]) < 3:
            return True
    if len(groups) == 2 and all(g.endswith("00") for g in groups) and int(groups[0]) < int(groups[1]):
        return True
    return False


def _is_ip_address(groups: list[str], separators: set[str]) -> bool:
    return (separators == {"."} and len(groups) == 4
            and all(len(g) <= 3 and int(g) <= 255 for g in groups))


def is_phone_number(candidate: str) -> bool:
    """Whether a run of digit groups (as _PHONE_RUN finds them) is a phone number by the rules above."""
    pieces = _PHONE_GROUP.split(candidate)
    groups = [g.strip("()") for g in _PHONE_GROUP.findall(candidate)]
    separators = set(pieces[1:-1])
    digits = sum(len(g) for g in groups)
    if candidate.startswith("+"):
        return 8 <= digits <= 15
    if not 7 <= digits <= 15:
        return False
    if len(groups) == 1:
        # Unbroken, 7–9 digits are more often counts and amounts than numbers to call.
        return digits >= 10
    if "." in separators and (separators != {"."} or any(len(g) > 4 for g in groups)):
        return False  # "12.345678", "3.5 1234567": decimals, not one phone number
    if (_is_date(groups, separators) or _is_amount(groups, separators)
            or _is_ip_address(groups, separators) or all(_is_year(g) for g in groups)):
        return False
    if "(" in candidate:
        return True
    if len(groups[0]) == 1 and len(groups) < 4:
        return False  # "1 5551234"; a one-digit trunk prefix comes before 3 more groups
    return all(len(g) >= 2 for g in groups[1:])


def _redact_phone_run(match: re.Match[str]) -> str:
    candidate = match[0]
    prefix = ""
    # A year said before a number ("in 2026 555-1234") belongs to the sentence, not the number.
    year = re.match(r"(\d{4}) (?=\d)", candidate)
    while year and _is_year(year[1]) and not candidate.startswith("+"):
        prefix += year[0]
        candidate = candidate[year.end():]
        year = re.match(r"(\d{4}) (?=\d)", candidate)
    return prefix + (PHONE if is_phone_number(candidate) else candidate)


def redact_phones(text: str) -> str:
    """Text with phone-like numbers replaced by "[phone number]"."""
    return _PHONE_RUN.sub(_redact_phone_run, text)


# --- the redactor ---------------------------------------------------------------------------------

_RULES: dict[str, Callable[[str], str]] = {
    "email": redact_emails,
    "card": redact_cards,
    "phone": redact_phones,
}
_ORDER = ("email", "card", "phone")


class Redactor:
    """Replaces the chosen kinds of personal numbers and addresses; `Redactor(())` changes nothing."""

    def __init__(self, kinds: Iterable[str]) -> None:
        """Redact these kinds ("card", "phone", "email"); ValueError for any other."""
        chosen = set(kinds)
        unknown = sorted(chosen - set(KINDS))
        if unknown:
            raise ValueError(f"unknown redaction kinds {', '.join(unknown)}; expected some of "
                             f"{', '.join(KINDS)}")
        self.kinds = tuple(kind for kind in _ORDER if kind in chosen)

    def __call__(self, text: str) -> str:
        """The text with every chosen kind replaced by its placeholder."""
        for kind in self.kinds:
            text = _RULES[kind](text)
        return text

    def __repr__(self) -> str:
        return f"Redactor({list(self.kinds)!r})"
