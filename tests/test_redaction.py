"""Redaction rules, as tables of what Whisper writes and what must (not) be replaced."""

from __future__ import annotations

import pytest

from elara.conversation.redaction import Redactor, is_phone_number, luhn_valid

ALL = Redactor(("card", "phone", "email"))

CARDS = [
    ("my card is 4111 1111 1111 1111", "my card is [card number]"),
    ("4111-1111-1111-1111, expiry 12/27", "[card number], expiry 12/27"),
    ("4111111111111111", "[card number]"),
    ("Amex 3782 822463 10005 please", "Amex [card number] please"),
    ("5555 5555 5555 4444.", "[card number]."),
    ("ref 12 4111 1111 1111 1111", "ref 12 [card number]"),
    ("the 13 digit one 4222222222222", "the 13 digit one [card number]"),
]
NOT_CARDS = [
    "4111 1111 1111 1112",          # fails the Luhn check
    "4111 1111 1111",               # 12 digits
    "I was born in 1990 and it is 2026 now",
    "account 41111111111111111111",  # 20 digits, too long for a card
]

PHONES = [
    ("call 555-123-4567.", "call [phone number]."),
    ("my number is +44 20 7946 0958", "my number is [phone number]"),
    ("+1 (555) 123-4567", "[phone number]"),
    ("(555) 123-4567 is the office", "[phone number] is the office"),
    ("(555)123-4567", "[phone number]"),
    ("555.123.4567", "[phone number]"),
    ("555 123 4567", "[phone number]"),
    ("1-800-555-0199", "[phone number]"),
    ("1 800 555 0199", "[phone number]"),
    ("ring 555-1234 tonight", "ring [phone number] tonight"),
    ("020 7946 0958", "[phone number]"),
    ("06 12 34 56 78", "[phone number]"),
    ("+49 (0) 30 1234567", "[phone number]"),
    ("+33 6 12 34 56 78", "[phone number]"),
    ("5551234567", "[phone number]"),
    ("in 2026 555-1234 was my number", "in 2026 [phone number] was my number"),
    ("555-123-4567, 555-765-4321", "[phone number], [phone number]"),
]
NOT_PHONES = [
    "It is 2026.",
    "Meet me on 3 May at 10:30.",
    "It costs 1,500 dollars.",
    "1,500,000 people",
    "1.500.000 Euro",
    "1 500 000 people",
    "$1500000",
    "1234567 grains of sand",
    "pi is 3.14159265",
    "12.345678",
    "from 1990-2000",
    "in 2026 2027 and 2028",
    "between 1000-2000 people",
    "on 2026-11-22 at 10:30:15",
    "on 22.11.2026",
    "on 11-22-2026",
    "the server is at 192.168.100.200",
    "3 4 5 6 7 8 9",
    "the score was 3-2",
    "+5 degrees",
    "version 3.11.4",
    "room 1204, floor 12",
]

EMAILS = [
    ("write to jane.doe@example.com.", "write to [email address]."),
    ("JOHN_SMITH+news@mail.example.co.uk", "[email address]"),
    ("bob1990@gmail.com is mine", "[email address] is mine"),
    ("jane dot doe at example dot com", "[email address]"),
    ("it is jane.doe at example.com", "it is [email address]"),
    ("jane at gmail dot com", "[email address]"),
    ("jane underscore doe at outlook dot com", "[email address]"),
]
NOT_EMAILS = [
    "I bought it at amazon.com",
    "I bought it at amazon dot com",
    "look at the dot com bubble",
    "we met at noon",
    "@elara what time is it",
]


@pytest.mark.parametrize("text, expected", CARDS)
def test_cards(text, expected):
    assert Redactor(["card"])(text) == expected
    assert ALL(text) == expected


@pytest.mark.parametrize("text", NOT_CARDS)
def test_not_cards(text):
    assert Redactor(["card"])(text) == text


@pytest.mark.parametrize("text, expected", PHONES)
def test_phones(text, expected):
    assert Redactor(["phone"])(text) == expected
    assert ALL(text) == expected


@pytest.mark.parametrize("text", NOT_PHONES)
def test_not_phones(text):
    assert ALL(text) == text


@pytest.mark.parametrize("text, expected", EMAILS)
def test_emails(text, expected):
    assert Redactor(["email"])(text) == expected
    assert ALL(text) == expected


@pytest.mark.parametrize("text", NOT_EMAILS)
def test_not_emails(text):
    assert ALL(text) == text


def test_only_the_chosen_kinds_are_redacted():
    text = "card 4111 1111 1111 1111, phone 555-123-4567, mail jane@example.com"
    assert Redactor(["email"])(text) == (
        "card 4111 1111 1111 1111, phone 555-123-4567, mail [email address]")
    assert Redactor(["phone"])(text) == (
        "card 4111 1111 1111 1111, phone [phone number], mail jane@example.com")
    assert Redactor(["card", "phone", "email"])(text) == (
        "card [card number], phone [phone number], mail [email address]")


def test_card_wins_over_phone_and_email_digits_stay_in_the_address():
    assert ALL("4111 1111 1111 1111") == "[card number]"
    assert ALL("5551234567@example.com") == "[email address]"


def test_identity_and_unknown_kinds():
    text = "4111 1111 1111 1111 555-123-4567 jane@example.com"
    assert Redactor(())(text) == text
    assert Redactor([]).kinds == ()
    with pytest.raises(ValueError, match="ssn"):
        Redactor(["card", "ssn"])


def test_luhn_and_phone_helpers():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert luhn_valid("79927398713")
    assert is_phone_number("555-123-4567") and not is_phone_number("2026-11-22")
