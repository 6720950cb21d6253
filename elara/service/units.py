"""The systemd units: render the templates in `systemd/` for a checkout, and verify them.

`scripts/install` renders the user unit with `python -m elara.cli.units render user`; `elara doctor`
and the tests call `verify_units`, which runs `systemd-analyze verify` on both rendered units.

Templates use these placeholders:

- `@VENV@`: the virtual environment (absolute); ExecStart= is `@VENV@/bin/elara run`.
- `@REPO@`: the checkout (for Documentation= and comments).
- `@CONFIG_ARG@`: ` --config /absolute/path`, or nothing.
- `@WRITABLE@` (a line of its own): `ReadWritePaths=` for extra writable directories (a
  Context.StorageRoot outside the cache directory), or the line is dropped.

Lines starting with `#:` document the template and are dropped when rendering.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path

USER_UNIT = "elara.service"
SYSTEM_UNIT = "elara-system.service"
#: The name the system unit is installed under (/etc/systemd/system/elara.service).
SYSTEM_INSTALL_NAME = "elara.service"
SYSTEM_USER = "elara"
SYSTEM_GROUPS = ("elara", "audio")

#: this checkout (the default for rendering)
REPO = Path(__file__).resolve().parents[2]
# Characters a path can't carry into a unit file without escaping rules that differ per setting.
_UNSAFE = re.compile(r"[\"'\\$%\n\r\t;]")
_VERIFY_TIMEOUT = 30.0
# What ProtectHome=yes hides.
#: what ProtectHome=yes hides from the system service
PROTECT_HOME = ("/home", "/root", "/run/user")
_PATH_WORD = re.compile(r"@(VENV|REPO)@(\S*)")


def unit_templates() -> dict[str, Path]:
    """The unit templates by name: `elara.service` (user) and `elara-system.service` (system)."""
    directory = REPO / "systemd"
    return {name: directory / name for name in (USER_UNIT, SYSTEM_UNIT)}


def default_venv(repo: Path = REPO) -> Path:
    """The checkout's `.venv` when it has `bin/elara`, else the running interpreter's prefix."""
    candidate = repo / ".venv"
    if (candidate / "bin" / "elara").exists() or not (Path(sys.prefix) / "bin" / "elara").exists():
        return candidate
    return Path(sys.prefix)


def user_unit_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the user unit goes: `${XDG_CONFIG_HOME:-~/.config}/systemd/user/elara.service`."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME", "").split(":")[0].strip()
    root = Path(base) if base else Path(env.get("HOME") or Path.home()) / ".config"
    return root / "systemd" / "user" / USER_UNIT


def render_unit(template_text: str, venv: Path, repo: Path, config: Path | None,
                *, writable: Iterable[Path] = ()) -> str:
    """Fill a template's placeholders; paths are made absolute (`~` expanded).

    Raises ValueError for a path holding a character systemd would read differently (quotes,
    backslash, `$`, `%`, `;`, control characters); spaces are quoted."""
    venv_path = _absolute(venv, "the virtual environment")
    repo_path = _absolute(repo, "the checkout")
    config_path = _absolute(config, "--config") if config is not None else None
    extra = [_absolute(p, "a writable directory") for p in writable]

    values = {
        "@VENV@": str(venv_path),
        "@REPO@": str(repo_path),
        "@CONFIG_ARG@": f" --config {_word(config_path)}" if config_path else "",
    }
    out: list[str] = []
    for line in template_text.splitlines():
        if line.startswith("#:"):
            continue
        stripped = line.strip()
        if stripped == "@WRITABLE@":
            if extra:
                # "-" prefix: a directory that doesn't exist is skipped instead of failing start-up.
                out.append("ReadWritePaths=" + " ".join(_word(p, prefix="-") for p in extra))
            continue
        if line.startswith("#"):
            for key, value in values.items():
                line = line.replace(key, value)
        elif line.startswith("Documentation="):
            # A URL: spaces percent-encoded, and % doubled since Documentation= expands specifiers.
            line = line.replace("@REPO@", urllib.parse.quote(str(repo_path)).replace("%", "%%"))
        else:
            # A path placeholder and what follows it up to whitespace is one word, quoted if need be.
            line = _PATH_WORD.sub(
                lambda m: _word(Path(values[f"@{m[1]}@"] + m[2])), line)
            line = line.replace("@CONFIG_ARG@", values["@CONFIG_ARG@"])
        out.append(line)
    text = "\n".join(out) + "\n"
    leftover = sorted(set(re.findall(r"@[A-Z_]+@", text)))
    if leftover:
        raise ValueError(f"unknown placeholder(s) in the template: {', '.join(leftover)}")
    return text


def config_from_unit(unit_text: str) -> Path | None:
    """The `--config PATH` of a rendered unit's ExecStart=, or None."""
    for line in unit_text.splitlines():
        if line.startswith("ExecStart="):
            words = shlex.split(line[len("ExecStart="):])
            if "--config" in words[:-1]:
                return Path(words[words.index("--config") + 1])
    return None


def extra_writable(settings) -> list[Path]:
    """Directories the service must be able to write besides its CacheDirectory=: the history's
    directory when Context.StorageRoot names one (null = below the cache directory)."""
    from elara.service.answering import store_root  # imports the conversation stack; only when asked

    if not settings.context.storage_root:
        return []
    return [store_root(settings).absolute()]


def verify_units(tmpdir: Path, *, venv: Path | None = None, repo: Path | None = None,
                 config: Path | None = None, system_user: bool = False) -> list[str]:
    """Render both templates into `tmpdir` and run `systemd-analyze verify` on each.

    Returns the problems, one line each ([] when both are clean): what systemd-analyze said about
    the units, or that it is missing. systemd-analyze doesn't look up User=/Group= (systemd 252),
    so the system unit verifies on a machine without the `elara` user; pass `system_user=True`
    (when the system unit is meant to run here) to also report a missing `elara` user or
    `elara`/`audio` group."""
    repo = REPO if repo is None else Path(repo)
    venv = default_venv(repo) if venv is None else Path(venv)
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return ["systemd-analyze is not installed: it comes with the Debian package `systemd` "
                "(sudo apt-get install systemd)"]
    tmpdir = Path(tmpdir)
    problems: list[str] = []
    for name, template in unit_templates().items():
        user_mode = name == USER_UNIT
        folder = tmpdir / ("user" if user_mode else "system")
        folder.mkdir(parents=True, exist_ok=True)
        unit_file = folder / name
        try:
            text = render_unit(template.read_text(encoding="utf-8"), venv, repo, config)
        except (OSError, ValueError) as exc:
            problems.append(f"{name}: can't render {template}: {exc}")
            continue
        unit_file.write_text(text, encoding="utf-8")
        problems += _verify_one(analyze, unit_file, user_mode, tmpdir)
    if system_user:
        problems += _system_account_problems()
    return problems


# ---------------------------------------------------------------------------------------------
# helpers


def _absolute(path: Path | str, what: str) -> Path:
    result = Path(os.path.expanduser(str(path))).absolute()
    if _UNSAFE.search(str(result)):
        raise ValueError(f"{what} {str(result)!r}: a path for a systemd unit may not contain "
                         "quotes, backslashes, $, %, ; or control characters; move it")
    return result


def is_below(path: Path, roots: Iterable[str]) -> bool:
    """True when path lies under one of roots."""
    absolute = Path(os.path.expanduser(str(path))).absolute()
    return any(absolute == Path(r) or Path(r) in absolute.parents for r in roots)


def _word(path: Path, prefix: str = "") -> str:
    """One word of a systemd setting: quoted when it holds whitespace (the prefix goes inside)."""
    text = prefix + str(path)
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _verify_one(analyze: str, unit_file: Path, user_mode: bool, tmpdir: Path) -> list[str]:
    name = unit_file.name
    env = dict(os.environ)
    cmd = [analyze]
    if user_mode:
        cmd.append("--user")
        # The user manager systemd-analyze simulates needs a runtime directory, even where no
        # user session exists (a container, a system service, ssh without logind).
        runtime = env.get("XDG_RUNTIME_DIR", "")
        if not runtime or not os.path.isdir(runtime):
            runtime_dir = tmpdir / "runtime"
            runtime_dir.mkdir(mode=0o700, exist_ok=True)
            env["XDG_RUNTIME_DIR"] = str(runtime_dir)
    # --man=no: the units name no man pages; --recursive-errors=no: the exit status is about this
    # unit, not about other units it is ordered after (ollama.service, network-online.target).
    cmd += ["verify", "--man=no", "--recursive-errors=no", str(unit_file)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=_VERIFY_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return [f"{name}: systemd-analyze verify took longer than {_VERIFY_TIMEOUT:.0f} s"]
    except OSError as exc:
        return [f"{name}: can't run systemd-analyze: {exc}"]
    lines = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    # Lines about this unit are problems; lines about other units on this machine are not ours,
    # unless nothing else explains a failure.
    ours = [ln for ln in lines if name in ln or str(unit_file) in ln]
    if not ours and proc.returncode != 0:
        ours = lines or [f"systemd-analyze verify exited with status {proc.returncode}"]
    return [ln if ln.startswith((name, str(unit_file))) else f"{name}: {ln}" for ln in ours]


def _system_account_problems() -> list[str]:
    problems: list[str] = []
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        problems.append(
            f"{SYSTEM_UNIT}: user {SYSTEM_USER!r} does not exist: sudo useradd --system "
            f"--user-group --home-dir /var/lib/elara --shell /usr/sbin/nologin {SYSTEM_USER}")
    for group in SYSTEM_GROUPS:
        try:
            grp.getgrnam(group)
        except KeyError:
            problems.append(f"{SYSTEM_UNIT}: group {group!r} does not exist")
    return problems


# ---------------------------------------------------------------------------------------------
# python -m elara.service.units
