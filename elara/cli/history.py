"""`elara history list|export|purge|verify`: the decrypted history, on this machine's terminal only."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timedelta, timezone
from itertools import groupby

from elara import wiring
from elara.conversation.messages import ChatMessage
from elara.conversation.store import encode_message
from elara.settings import Settings

_AGE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register the `history` actions."""
    history = commands.add_parser("history", help="read, export, purge or verify the stored history")
    sub = history.add_subparsers(dest="history_command", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="print the latest messages")
    listing.add_argument("--limit", type=_positive, default=20, metavar="N",
                         help="how many messages (default 20)")
    listing.set_defaults(handler=_list)
    export = sub.add_parser("export", help="print the whole history, decrypted, to stdout")
    export.add_argument("--format", choices=("jsonl", "markdown"), default="jsonl")
    export.set_defaults(handler=_export)
    purge = sub.add_parser("purge", help="delete messages older than an age")
    purge.add_argument("--older-than", required=True, type=parse_age, metavar="AGE",
                       help="e.g. 30d, 12h, 2w")
    purge.set_defaults(handler=_purge)
    verify = sub.add_parser("verify", help="check every file decrypts; exit 1 if any does not")
    verify.set_defaults(handler=_verify)


def parse_age(text: str) -> timedelta:
    """`30d` → 30 days; units s, m, h, d, w."""
    match = _AGE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected an age such as 30d, 12h or 2w, got {text!r}")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def _list(args: argparse.Namespace, settings: Settings) -> int:
    for message in wiring.open_store(settings).read_tail(args.limit):
        when = message.timestamp_utc.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        print(f"{when}  {message.role.value:<9}  {message.content}")
    return 0


def _export(args: argparse.Namespace, settings: Settings) -> int:
    messages = (stored.message for stored in wiring.open_store(settings).iter_messages())
    if args.format == "jsonl":
        for message in messages:
            sys.stdout.write(encode_message(message).decode("utf-8") + "\n")
        return 0
    for day, group in groupby(messages, key=lambda m: m.timestamp_utc.astimezone().date()):
        sys.stdout.write(f"## {day.isoformat()}\n\n")
        for message in group:
            sys.stdout.write(_markdown(message))
    return 0


def _markdown(message: ChatMessage) -> str:
    when = message.timestamp_utc.astimezone().strftime("%H:%M")
    return f"**{message.role.value}** ({when}): {message.content}\n\n"


def _purge(args: argparse.Namespace, settings: Settings) -> int:
    cutoff = datetime.now(timezone.utc) - args.older_than
    deleted = wiring.open_store(settings).purge(cutoff)
    print(f"deleted {deleted} messages older than {cutoff:%Y-%m-%d %H:%M} UTC")
    return 0


def _verify(args: argparse.Namespace, settings: Settings) -> int:
    report = wiring.open_store(settings).verify()
    for path in report.unreadable:
        print(f"unreadable: {path}")
    print(f"{report.readable} readable, {len(report.unreadable)} unreadable")
    return 1 if report.unreadable else 0
