"""`elara memory list|forget|clear`: the facts Elara remembers about you, on this machine only."""

from __future__ import annotations

import argparse
import sys

from elara.errors import DaemonNotRunning
from elara.memory.facts import FactBook
from elara.service import answering
from elara.service.paths import status_socket
from elara.service.status import query_status
from elara.settings import Settings


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register the `memory` actions."""
    memory = commands.add_parser("memory",
                                 help="list or forget the facts Elara remembers about you")
    sub = memory.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="print every remembered fact with its id")
    listing.set_defaults(handler=_list)
    forget = sub.add_parser(
        "forget", help="delete the facts with this id (or id prefix), or containing these words; "
                       "exit 1 if none matches")
    forget.add_argument("query", nargs="+", metavar="ID",
                        help="a fact id from `elara memory list`, at least its first 4 characters, "
                             "or words of the fact")
    forget.set_defaults(handler=_forget)
    clear = sub.add_parser("clear", help="delete every remembered fact (no question asked)")
    clear.set_defaults(handler=_clear)


def open_book(settings: Settings) -> FactBook:
    """The fact book over the configured store, loaded."""
    book = FactBook(answering.open_store(settings, create_key=False), max_facts=settings.memory.max_facts)
    book.load()
    return book


def _list(args: argparse.Namespace, settings: Settings) -> int:
    facts = open_book(settings).facts()
    if not facts:
        print("no facts remembered")
        return 0
    for fact in facts:
        when = fact.created.astimezone().strftime("%Y-%m-%d")
        print(f"{fact.id}  {when}  {fact.source:<8}  {fact.text}")
    return 0


def _forget(args: argparse.Namespace, settings: Settings) -> int:
    query = " ".join(args.query)
    forgotten = open_book(settings).forget(query)
    if not forgotten:
        print(f"elara: no remembered fact matches {query!r}; see `elara memory list`",
              file=sys.stderr)
        return 1
    for fact in forgotten:
        print(f"forgot {fact.id}: {fact.text}")
    reload_daemon_memory()
    return 0


def _clear(args: argparse.Namespace, settings: Settings) -> int:
    removed = open_book(settings).clear()
    print(f"removed {removed} fact{'' if removed == 1 else 's'}")
    reload_daemon_memory()
    return 0


def reload_daemon_memory() -> None:
    """A running daemon keeps facts, the summary and the vectors in memory: make it read them
    again, so what was forgotten or purged is out of its prompts now, not after a restart."""
    try:
        query_status(status_socket(), request="reload-memory")
    except DaemonNotRunning:
        pass
