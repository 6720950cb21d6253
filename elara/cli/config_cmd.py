"""`elara config show|check|docs`."""

from __future__ import annotations

import argparse
import json
import sys

from elara.cli import config_docs
from elara.config import to_json
from elara.errors import ElaraError
from elara.settings import Settings


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `config show`, `config check` and `config docs`."""
    config = commands.add_parser("config", help="show or check the effective configuration")
    sub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = sub.add_parser("show", help="print the effective configuration, secrets redacted")
    show.set_defaults(handler=_show)
    check = sub.add_parser("check", help="validate the configuration: exit 0 when valid, 78 when not")
    check.set_defaults(handler=_check, tolerate_config_error=True)
    docs = sub.add_parser("docs", help="print docs/configuration.md: every setting, its type, default "
                                       "and meaning, and whether a reload applies it (Markdown)")
    docs.set_defaults(handler=_docs, tolerate_config_error=True)


def _show(args: argparse.Namespace, settings: Settings) -> int:
    print(json.dumps(to_json(settings), indent=2, ensure_ascii=False))
    return 0


def _check(args: argparse.Namespace, settings: Settings | None, error: ElaraError | None = None) -> int:
    if error is not None:
        print(f"elara: invalid configuration: {error}", file=sys.stderr)
        return error.exit_status
    files = ", ".join(str(p) for p in args.config_sources.files) or "packaged defaults only"
    print(f"configuration is valid ({files})")
    return 0


def _docs(args: argparse.Namespace, settings: Settings | None, error: ElaraError | None = None) -> int:
    # Written from the packaged defaults and the settings' metadata: your own config plays no part.
    print(config_docs.render(), end="")
    return 0
