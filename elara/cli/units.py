"""`python -m elara.cli.units`: render and verify the systemd units, find the history's directory
(what scripts/install and scripts/uninstall call)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from elara.service.units import (
    PROTECT_HOME,
    REPO,
    SYSTEM_UNIT,
    USER_UNIT,
    config_from_unit,
    default_venv,
    extra_writable,
    is_below,
    render_unit,
    unit_templates,
    verify_units,
)


def main(argv: Sequence[str] | None = None) -> int:
    """`render user|system`, `verify`, `store-root`: what scripts/install and uninstall use."""
    parser = argparse.ArgumentParser(prog="python -m elara.cli.units",
                                     description="Render and verify Elara's systemd units.")
    sub = parser.add_subparsers(dest="command", required=True)
    render = sub.add_parser("render", help="print a rendered unit")
    render.add_argument("which", choices=("user", "system"))
    render.add_argument("--config", type=Path, help="passed to `elara run --config`")
    render.add_argument("--venv", type=Path, help="default: the checkout's .venv")
    render.add_argument("--repo", type=Path, default=REPO, help="default: this checkout")
    render.add_argument("--writable", type=Path, action="append", default=None,
                        help="an extra ReadWritePaths= directory (repeatable); default: the "
                             "configured Context.StorageRoot, if any")
    render.add_argument("--output", type=Path, help="write here instead of stdout")
    render.add_argument("--mkdir", action="store_true",
                        help="create the extra writable directories (mode 0700)")
    verify = sub.add_parser("verify", help="systemd-analyze verify both units")
    verify.add_argument("--config", type=Path)
    verify.add_argument("--system-user", action="store_true",
                        help="also require the elara user and the elara/audio groups")
    store = sub.add_parser("store-root", help="print the history's directory")
    store.add_argument("--config", type=Path)
    store.add_argument("--unit", type=Path,
                       help="use the --config of this installed unit's ExecStart= (if any)")
    args = parser.parse_args(argv)

    from elara.errors import ElaraError

    try:
        if args.command == "render":
            return _cmd_render(args)
        if args.command == "verify":
            import tempfile

            with tempfile.TemporaryDirectory(prefix="elara-units-") as tmp:
                problems = verify_units(Path(tmp), config=args.config,
                                        system_user=args.system_user)
            for problem in problems:
                print(problem)
            return 1 if problems else 0
        from elara.config import load_settings
        from elara.service.answering import store_root

        config = args.config
        if config is None and args.unit is not None and args.unit.is_file():
            config = config_from_unit(args.unit.read_text(encoding="utf-8"))
        print(store_root(load_settings(config)).absolute())
        return 0
    except ElaraError as exc:
        print(f"elara: {exc}", file=sys.stderr)
        return exc.exit_status
    except (OSError, ValueError) as exc:
        print(f"elara: {exc}", file=sys.stderr)
        return 1


def _cmd_render(args: argparse.Namespace) -> int:
    from elara.config import load_settings

    name = USER_UNIT if args.which == "user" else SYSTEM_UNIT
    writable = args.writable
    if writable is None:
        writable = extra_writable(load_settings(args.config))
    repo = Path(args.repo)
    venv = args.venv if args.venv is not None else default_venv(repo)
    text = render_unit(unit_templates()[name].read_text(encoding="utf-8"), venv, repo,
                       args.config, writable=writable)
    if args.which == "system":
        hidden = [p for p in (Path(venv), repo) if is_below(p, PROTECT_HOME)]
        if hidden:
            print(f"warning: {hidden[0].absolute()} is hidden from the system service by "
                  "ProtectHome=yes; use a checkout outside /home and /root (e.g. /opt/elara)",
                  file=sys.stderr)
    if args.mkdir:
        for directory in writable:
            Path(directory).expanduser().mkdir(mode=0o700, parents=True, exist_ok=True)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o644)
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
