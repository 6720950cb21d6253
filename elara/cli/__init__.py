"""The `elara` command line."""

from __future__ import annotations

import argparse
import logging
import sys

from elara import __version__
from elara.cli import config_cmd, conversation, doctor, history, service, timers, voice, wake
from elara.cli import mcp as mcp_cli
from elara.cli import memory as memory_cli
from elara.config import load_settings_with_sources
from elara.errors import ElaraError
from elara.service.logs import configure

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command."""
    parser = argparse.ArgumentParser(
        prog="elara", description="Elara, a local and private voice assistant backed by Ollama.")
    parser.add_argument("--version", action="version", version=f"elara {__version__}")
    parser.add_argument("--config", metavar="PATH",
                        help="an appsettings JSON file layered over the defaults (or $ELARA_CONFIG)")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log at the configured level (-vv: DEBUG, which shows conversation text)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    conversation.add_commands(commands)
    voice.add_commands(commands)
    wake.add_commands(commands)
    service.add_commands(commands)
    doctor.add_commands(commands)
    memory_cli.add_commands(commands)
    mcp_cli.add_commands(commands)
    history.add_commands(commands)
    timers.add_commands(commands)
    config_cmd.add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the process exit status."""
    args = build_parser().parse_args(argv)
    try:
        # Loaded once, with the files it came from (config check and the daemon report them).
        settings, args.config_sources = load_settings_with_sources(args.config)
    except ElaraError as exc:
        if getattr(args, "tolerate_config_error", False):
            return args.handler(args, None, exc)
        print(f"elara: {exc}", file=sys.stderr)
        return exc.exit_status
    # The daemon logs at the configured level; other commands say only what went wrong unless -v.
    if args.verbose > 1:
        level = "DEBUG"
    elif args.verbose == 1 or getattr(args, "daemon", False):
        level = settings.logging.level
    else:
        level = "WARNING"
    configure(level)
    try:
        return args.handler(args, settings)
    except ElaraError as exc:
        print(f"elara: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `elara fsm | head`: the reader is gone, which is fine
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
