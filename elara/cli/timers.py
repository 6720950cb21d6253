"""`elara timers [list | cancel ID | clear]`: the timers kept in the encrypted store."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from elara.conversation.prompts import utc_now
from elara.errors import DaemonNotRunning
from elara.service import answering
from elara.service.paths import status_socket
from elara.service.status import query_status
from elara.settings import Settings
from elara.skills import spoken
from elara.skills.timers import CANCELLED, Timer, TimerBook


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register the `timers` actions (`list` when none is given)."""
    timers = commands.add_parser("timers", help="list or cancel the timers you set by voice")
    timers.set_defaults(handler=_list, all=False)
    sub = timers.add_subparsers(dest="timers_command", metavar="ACTION")
    listing = sub.add_parser("list", help="print the timers counting down or ringing")
    listing.add_argument("--all", action="store_true", help="finished and cancelled ones too")
    listing.set_defaults(handler=_list)
    cancel = sub.add_parser("cancel", help="cancel the timer with this id (or id prefix); exit 1 if none")
    cancel.add_argument("id", metavar="ID", help="a timer id from `elara timers list`, at least 4 characters")
    cancel.set_defaults(handler=_cancel)
    clear = sub.add_parser("clear", help="cancel every timer (no question asked)")
    clear.set_defaults(handler=_clear)


def open_book(settings: Settings) -> TimerBook:
    """The timers in the configured store, loaded."""
    book = TimerBook(answering.open_store(settings, create_key=False))
    book.load()
    return book


def describe(timer: Timer, now: datetime) -> str:
    """One line per timer: id, name, state, when it is due (local time) and what is left."""
    due = timer.due.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    left = timer.remaining(now)
    when = f"{spoken.say_remaining(left)} left" if timer.state == "pending" and left > 0 else timer.state
    name = f"reminder: {timer.reminder}" if timer.reminder else timer.name or "-"
    return f"{timer.id}  {name:<12}  {spoken.say_duration(timer.seconds):<28}  due {due}  {when}"


def _list(args: argparse.Namespace, settings: Settings) -> int:
    book = open_book(settings)
    timers = book.timers() if args.all else book.active()
    if not timers:
        print("no timers")
        return 0
    now = utc_now()
    for timer in timers:
        print(describe(timer, now))
    return 0


def _cancel(args: argparse.Namespace, settings: Settings) -> int:
    book = open_book(settings)
    timer = book.get(args.id.strip().lower())
    if timer is None or not timer.active:
        print(f"elara: no running timer has the id {args.id!r}; see `elara timers list`", file=sys.stderr)
        return 1
    book.set_state(timer.id, CANCELLED)
    print(f"cancelled {timer.id} ({timer.reminder or timer.name or spoken.say_duration(timer.seconds)})")
    tell_daemon()
    return 0


def _clear(args: argparse.Namespace, settings: Settings) -> int:
    cancelled = open_book(settings).cancel_all()
    print(f"cancelled {len(cancelled)} timer{'' if len(cancelled) == 1 else 's'}")
    tell_daemon()
    return 0


def tell_daemon() -> None:
    """A running daemon keeps the timers in memory: make it read them again now."""
    try:
        query_status(status_socket(), request="reload-timers")
    except DaemonNotRunning:
        pass
