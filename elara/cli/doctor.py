"""`elara doctor`: check that Elara can run here, and say how to fix what can't."""

from __future__ import annotations

import argparse
import sys

from elara.errors import ElaraError
from elara.service.doctor import Check, run_checks
from elara.settings import Settings

__all__ = ["add_commands", "format_check", "run_checks"]


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `doctor`."""
    doctor = commands.add_parser(
        "doctor", help="check the configuration, sound devices, models, Ollama, the encryption "
                       "key, the history and the systemd units; exit 1 if anything fails")
    # An invalid configuration is one of the findings, not a reason to refuse (exit 1, not 78).
    doctor.set_defaults(handler=_doctor, tolerate_config_error=True)


def format_check(check: Check) -> str:
    """`✓ name: detail`, or `✗ name: detail` and an indented `fix:` line."""
    line = f"{'✓' if check.ok else '✗'} {check.name}: {check.detail}"
    if not check.ok and check.fix:
        line += f"\n    fix: {check.fix}"
    return line


def _print(check: Check) -> None:
    print(format_check(check), flush=True)


def _doctor(args: argparse.Namespace, settings: Settings | None,
            error: ElaraError | None = None) -> int:
    # The configuration is loaded again by its own check, which reports an error as a finding.
    checks = run_checks(args.config, report=_print)
    failures = [check for check in checks if not check.ok]
    if failures:
        print(f"{len(failures)} of {len(checks)} checks failed: "
              + ", ".join(check.name for check in failures))
        sys.stdout.flush()
        return 1
    print(f"all {len(checks)} checks passed")
    return 0
