"""`elara history list|export|purge|verify|rekey`: the decrypted history, on this machine's terminal only."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta
from itertools import groupby
from pathlib import Path

from elara.cli.memory import reload_daemon_memory
from elara.conversation.messages import ChatMessage
from elara.conversation.records import TOOL_CALL, TOOL_RESULT, kind_of, superseded
from elara.conversation.rekey import rekey as rekey_store
from elara.conversation.store import encode_message
from elara.memory.retention import forget_before
from elara.service import answering, keys
from elara.service.paths import status_socket
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
    purge = sub.add_parser("purge", help="delete messages older than an age, and what was derived "
                                          "from them")
    purge.add_argument("--older-than", required=True, type=parse_age, metavar="AGE",
                       help="e.g. 30d, 12h, 2w")
    purge.set_defaults(handler=_purge)
    verify = sub.add_parser("verify", help="check every file decrypts; exit 1 if any does not")
    verify.set_defaults(handler=_verify)
    rekey = sub.add_parser(
        "rekey", help="re-encrypt every message to the passphrase in a key file (resumable)")
    rekey.add_argument("--to-key-file", required=True, type=Path, metavar="PATH",
                       help="the new passphrase, in a file (a trailing newline is ignored)")
    rekey.add_argument("--from-key-file", type=Path, metavar="PATH",
                       help="the current passphrase, when it is not the one Elara is configured with")
    rekey.set_defaults(handler=_rekey)


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
    for message in answering.open_store(settings, create_key=False).read_tail(args.limit):
        when = message.timestamp_utc.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        print(f"{when}  {_label(message):<9}  {message.content}")
    return 0


def _label(message: ChatMessage) -> str:
    """Who said it; a tool's call and result by what they are ("tool call elara/set_timer"); a
    question the person went on with (stored again whole after it) says so."""
    kind = kind_of(message)
    if kind in (TOOL_CALL, TOOL_RESULT):
        failed = " (failed)" if message.metadata.get("failed") == "true" else ""
        return f"{kind.replace('_', ' ')} {message.metadata.get('tool', '?')}{failed}:"
    if superseded(message):
        return f"{message.role.value} (went on)"
    return message.role.value


def _export(args: argparse.Namespace, settings: Settings) -> int:
    messages = (stored.message for stored in answering.open_store(settings, create_key=False).iter_messages())
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
    """Delete every message older than --older-than and every record derived from a deleted turn
    (summaries kept per Context.RetentionKeepSummaries); a running daemon forgets them too."""
    cutoff = datetime.now(UTC) - args.older_than
    r = forget_before(answering.open_store(settings, create_key=False), cutoff, turns_only=False,
                      keep_summaries=settings.context.retention_keep_summaries)
    print(f"deleted {r.deleted} messages older than {cutoff:%Y-%m-%d %H:%M} UTC or derived from "
          f"them ({r.turns_deleted} turns, {r.summaries_deleted} summaries, "
          f"{r.embeddings_deleted} embeddings, {r.facts_deleted} facts, {r.others_deleted} other)")
    if r.deleted:
        reload_daemon_memory()
    return 0


def _verify(args: argparse.Namespace, settings: Settings) -> int:
    report = answering.open_store(settings, create_key=False).verify()
    for path in report.unreadable:
        print(f"unreadable: {path}")
    print(f"{report.readable} readable, {len(report.unreadable)} unreadable")
    return 1 if report.unreadable else 0


def _rekey(args: argparse.Namespace, settings: Settings) -> int:
    """Re-encrypt the history to the key in --to-key-file; 78 for a bad key file or a wrong
    current key, 1 when the daemon runs or some files open with neither key."""
    new_file = args.to_key_file.expanduser().absolute()
    new = keys.read_key_file(new_file, "--to-key-file")
    if args.from_key_file is not None:
        old_file = args.from_key_file.expanduser().absolute()
        current = keys.Key(keys.read_key_file(old_file, "--from-key-file"),
                           keys.KeySource(keys.KEY_FILE, old_file))
    else:
        current = keys.resolve(settings)
    socket_path = status_socket()
    if _answers(socket_path):
        print(f"elara: Elara is running (it answers at {socket_path}) and would keep writing with "
              "the old key; stop it first (`systemctl --user stop elara`, or end `elara run`), "
              "then run the rekey again", file=sys.stderr)
        return 1
    root = answering.store_root(settings)
    report = rekey_store(root, current.passphrase, new)
    if report.unreadable and not report.converted and not report.already:
        print(f"elara: none of the {report.total} message files in {root} opens with the current "
              f"key ({current.source.describe()}) or the new one; fix: configure the key the "
              "history was written with, or name it with --from-key-file", file=sys.stderr)
        return 78
    for path in report.unreadable:
        print(f"left alone (opens with neither key): {path}")
    print(f"{report.converted} re-encrypted, {report.already} already under the new key, "
          f"{len(report.unreadable)} left alone ({root})")
    if report.unreadable:
        print("run the rekey again after a restore or with --from-key-file; "
              "`elara history verify` shows what still does not open")
        return 1
    if new == current.passphrase:
        print("the new key is the one Elara already uses: nothing to change")
        return 0
    print(_what_to_change(current.source, new_file))
    return 0


def _what_to_change(source: keys.KeySource, new_file: Path) -> str:
    """The configuration change that makes Elara use the new key, for where the old one came from."""
    then = ("\nUntil then Elara stops with \"wrong encryption key\" (exit 78). If a run was "
            "interrupted, or something wrote with the old key meanwhile, run the rekey again first.")
    if source.kind == keys.GENERATED:
        return (f"now make Elara use the new key: replace the generated key file with it\n"
                f"  install -m 600 {new_file} {source.path}\n"
                f"(the old key in {source.path} is no longer needed), or set "
                f"Context.EncryptionKeyFile to {new_file}." + then)
    if source.kind == keys.KEY_FILE:
        return (f"now make Elara use the new key: set Context.EncryptionKeyFile to {new_file} "
                f"(it is {source.path}), or copy the new key over {source.path}." + then)
    if source.kind == keys.CREDENTIAL:
        return (f"now make Elara use the new key: put it in the file the unit's "
                f"LoadCredential=elara-key:... line names (systemd copies it to {source.path} at "
                f"start), or re-encrypt it with systemd-creds, then restart Elara." + then)
    return (f"now make Elara use the new key: set Context.EncryptionKeyFile to {new_file} (or "
            f"ELARA__Context__EncryptionKeyFile={new_file}) and remove Context.EncryptionKey "
            "from your configuration." + then)


def _answers(path: Path) -> bool:
    """Does a daemon answer on the status socket? (A stale socket file does not.)"""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True
