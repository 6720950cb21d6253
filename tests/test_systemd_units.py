"""The systemd units (systemd/*.service), elara.service.units, scripts/install and scripts/uninstall.

The units are checked by the real `systemd-analyze verify`; the scripts run as real processes on a
temporary home. No user manager is touched: the scripts' `systemctl` is a stand-in
(ELARA_SYSTEMCTL), and XDG_RUNTIME_DIR / DBUS_SESSION_BUS_ADDRESS are removed from their
environment.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from elara.service import units

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"
ELARA = VENV / "bin" / "elara"
INSTALL = REPO / "scripts" / "install"
UNINSTALL = REPO / "scripts" / "uninstall"
TIMEOUT = 60
PLACEHOLDER = re.compile(r"@[A-Z_]+@")
#: The user unit's writable configuration directory, where a generated history key goes.
KEY_DIRECTORY = "%E/elara"

needs_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                                   reason="systemd-analyze missing (Debian package systemd)")


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Sections → key → values (a key may repeat); comments and blank lines skipped."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"setting outside a section: {line!r}"
        key, sep, value = line.partition("=")
        assert sep, f"not a setting: {line!r}"
        current.setdefault(key, []).append(value)
    return sections


def render(name: str, config: Path | None = None, **kwargs) -> str:
    template = units.unit_templates()[name].read_text(encoding="utf-8")
    return units.render_unit(template, VENV, REPO, config, **kwargs)


# --- systemd-analyze verify -------------------------------------------------------------------


@needs_analyze
def test_both_units_pass_systemd_analyze_verify(tmp_path):
    assert units.verify_units(tmp_path, venv=VENV, repo=REPO) == []
    # What verify_units ran on: both rendered units, pointing at this checkout's elara.
    for folder, name in (("user", units.USER_UNIT), ("system", units.SYSTEM_UNIT)):
        text = (tmp_path / folder / name).read_text(encoding="utf-8")
        assert f"ExecStart={ELARA} run" in text
        assert not PLACEHOLDER.search(text)


@needs_analyze
def test_systemd_analyze_says_nothing_about_the_rendered_units(tmp_path):
    """Straight from systemd-analyze: no output at all (no warnings), exit 0, for both units —
    including the system unit's User=elara, which needn't exist on this machine."""
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env["XDG_RUNTIME_DIR"] = str(runtime)
    for mode, name in (("--user", units.USER_UNIT), ("--system", units.SYSTEM_UNIT)):
        path = tmp_path / name
        path.write_text(render(name, REPO / "config" / "appsettings.json"), encoding="utf-8")
        proc = subprocess.run(["systemd-analyze", mode, "verify", str(path)], env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), name


@needs_analyze
def test_verify_reports_a_broken_unit(tmp_path):
    """The check isn't vacuous: a venv without bin/elara is reported for both units."""
    problems = units.verify_units(tmp_path, venv=tmp_path / "no-venv", repo=REPO)
    assert len(problems) == 2, problems
    for problem, name in zip(problems, (units.USER_UNIT, units.SYSTEM_UNIT)):
        assert problem.startswith(name)
        assert "no-venv/bin/elara is not executable" in problem


def test_verify_without_systemd_analyze_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    problems = units.verify_units(tmp_path)
    assert len(problems) == 1
    assert "systemd-analyze" in problems[0] and "`systemd`" in problems[0]


def test_system_account_check_is_opt_in(tmp_path, monkeypatch):
    monkeypatch.setattr(units, "_verify_one", lambda *args: [])
    monkeypatch.setattr(units, "SYSTEM_USER", "elara-no-such-user-x")
    assert units.verify_units(tmp_path, system_user=False) == []
    problems = units.verify_units(tmp_path, system_user=True)
    assert any("'elara-no-such-user-x' does not exist" in p and "useradd" in p for p in problems)


# --- the directives ---------------------------------------------------------------------------


COMMON = {
    "Type": ["notify"],
    "NotifyAccess": ["main"],
    "Restart": ["on-failure"],
    "RestartSec": ["5"],
    "RestartPreventExitStatus": ["78"],
    "TimeoutStopSec": ["10"],
    "WatchdogSec": ["30"],
    "ExecReload": ["/bin/kill -HUP $MAINPID"],
    "NoNewPrivileges": ["yes"],
    "ProtectSystem": ["strict"],
    "PrivateTmp": ["yes"],
    "CacheDirectory": ["elara"],
    "RuntimeDirectory": ["elara"],
    "UMask": ["0077"],
}


@pytest.mark.parametrize("name", [units.USER_UNIT, units.SYSTEM_UNIT])
def test_units_have_the_required_directives(name):
    service = parse_unit(render(name))["Service"]
    for key, expected in COMMON.items():
        assert service.get(key) == expected, (name, key, service.get(key))
    assert service["ExecStart"] == [f"{ELARA} run"]
    assert "PrivateDevices" not in service  # its /dev has no sound cards
    assert "MemoryDenyWriteExecute" not in service


def test_user_unit_specifics():
    unit = parse_unit(render(units.USER_UNIT))
    service = unit["Service"]
    assert service["ProtectHome"] == ["read-only"]
    # systemd 252 applies ProtectSystem=/ProtectHome=/PrivateTmp= in a user unit only with this.
    assert service["PrivateUsers"] == ["yes"]
    assert "User" not in service and "StateDirectory" not in service
    # A generated history key goes to ~/.config/elara/key (elara.service.keys), so that stays writable.
    assert service["ConfigurationDirectory"] == ["elara"]
    assert service["ConfigurationDirectoryMode"] == ["0700"]
    assert KEY_DIRECTORY in service["ReadWritePaths"]
    assert "LoadCredential" not in service  # a commented example only
    assert unit["Install"]["WantedBy"] == ["default.target"]


def test_system_unit_specifics():
    unit = parse_unit(render(units.SYSTEM_UNIT))
    service = unit["Service"]
    assert service["User"] == ["elara"] and service["Group"] == ["elara"]
    assert service["SupplementaryGroups"] == ["audio"]
    assert service["ProtectHome"] == ["yes"]
    assert service["StateDirectory"] == ["elara"]
    assert service["LoadCredential"] == ["elara-key:/etc/elara/elara.key"]
    assert service["DevicePolicy"] == ["closed"]
    assert service["DeviceAllow"] == ["char-alsa rw"]
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


# --- render_unit -------------------------------------------------------------------------------


def test_render_makes_paths_absolute_and_quotes_spaces(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = render(units.USER_UNIT, Path("my conf/elara.json"),
                  writable=[tmp_path / "hist ory", tmp_path / "other"])
    service = parse_unit(text)["Service"]
    words = shlex.split(service["ExecStart"][0])
    assert words == [str(ELARA), "run", "--config", str(tmp_path / "my conf" / "elara.json")]
    assert units.config_from_unit(text) == tmp_path / "my conf" / "elara.json"
    assert shlex.split(service["ReadWritePaths"][-1]) == [f"-{tmp_path}/hist ory",
                                                          f"-{tmp_path}/other"]
    assert "#:" not in text and not PLACEHOLDER.search(text)
    # Without extra directories the @WRITABLE@ line disappears; the key's directory stays.
    assert parse_unit(render(units.USER_UNIT))["Service"]["ReadWritePaths"] == [KEY_DIRECTORY]
    assert units.config_from_unit(render(units.USER_UNIT)) is None


def test_render_rejects_paths_systemd_would_misread():
    for bad in ("/tmp/100%", "/tmp/$HOME", '/tmp/a"b', "/tmp/a\\b"):
        with pytest.raises(ValueError, match="may not contain"):
            render(units.USER_UNIT, Path(bad))


def test_render_rejects_unknown_placeholders():
    with pytest.raises(ValueError, match="@NOPE@"):
        units.render_unit("[Service]\nExecStart=@VENV@/bin/elara @NOPE@\n", VENV, REPO, None)


# --- scripts/install and scripts/uninstall ---------------------------------------------------


FAKE_SYSTEMCTL = """#!/bin/sh
# A stand-in for systemctl: logs its arguments; FAKE_MANAGER=down acts as if no user manager.
echo "$*" >> "$FAKE_LOG"
if [ "$FAKE_MANAGER" = down ]; then
  echo "Failed to connect to bus: No medium found" >&2
  exit 1
fi
case "$*" in
  *is-active*) [ "$FAKE_ACTIVE" = 1 ] ;;
  *) exit 0 ;;
esac
"""


@pytest.fixture
def home(tmp_path):
    """A temporary home and the environment for the scripts, with a stand-in systemctl."""
    root = tmp_path / "home"
    root.mkdir()
    fake = tmp_path / "systemctl"
    fake.write_text(FAKE_SYSTEMCTL)
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ELARA", "XDG_")) and k != "DBUS_SESSION_BUS_ADDRESS"}
    env.update(HOME=str(root), XDG_CONFIG_HOME=str(root / ".config"),
               XDG_CACHE_HOME=str(root / ".cache"), XDG_DATA_HOME=str(root / ".local/share"),
               ELARA_SYSTEMCTL=str(fake), FAKE_LOG=str(tmp_path / "systemctl.log"),
               FAKE_MANAGER="up", FAKE_ACTIVE="0")
    return root, env


def run(script: Path, *args: str, env, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(script), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def systemctl_calls(env) -> list[str]:
    log = Path(env["FAKE_LOG"])
    calls = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return calls


def unit_path(home_dir: Path) -> Path:
    return home_dir / ".config" / "systemd" / "user" / "elara.service"


def test_install_no_start_writes_the_unit_and_is_idempotent(home, tmp_path):
    home_dir, env = home
    (tmp_path / "conf").mkdir()
    config = tmp_path / "conf" / "elara.json"
    config.write_text(json.dumps({"Context": {"LastN": 3}}))

    proc = run(INSTALL, "--config", "conf/elara.json", "--no-start", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    unit = unit_path(home_dir)
    text = unit.read_text()
    exec_start = shlex.split(parse_unit(text)["Service"]["ExecStart"][0])
    assert exec_start == [str(ELARA), "run", "--config", str(config)]  # made absolute
    assert os.access(exec_start[0], os.X_OK)
    assert stat.S_IMODE(unit.stat().st_mode) == 0o644
    assert "systemctl --user daemon-reload && systemctl --user enable --now elara" in proc.stdout
    assert systemctl_calls(env) == []  # --no-start never asks the manager

    again = run(INSTALL, "--config", str(config), "--no-start", env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "up to date" in again.stdout
    assert unit.read_text() == text
    assert sorted(p.name for p in unit.parent.iterdir()) == ["elara.service"]


def test_install_without_a_user_manager_writes_the_unit_and_says_what_to_run(home):
    home_dir, env = home
    env["FAKE_MANAGER"] = "down"
    proc = run(INSTALL, env=env)
    assert proc.returncode == 1
    assert "not reachable" in proc.stderr and "Failed to connect to bus" in proc.stderr
    assert "systemctl --user daemon-reload && systemctl --user enable --now elara" in proc.stderr
    service = parse_unit(unit_path(home_dir).read_text())["Service"]
    assert service["ExecStart"] == [f"{ELARA} run"]


def test_install_enables_and_starts_and_restarts_only_on_change(home, tmp_path):
    home_dir, env = home
    proc = run(INSTALL, env=env)
    assert proc.returncode == 0, proc.stderr
    assert systemctl_calls(env) == ["--user show-environment", "--user --quiet is-active elara.service",
                                    "--user daemon-reload", "--user enable --now elara.service"]
    env["FAKE_ACTIVE"] = "1"
    assert run(INSTALL, env=env).returncode == 0
    assert not any("restart" in call for call in systemctl_calls(env))  # same unit: left alone
    config = tmp_path / "elara.json"
    config.write_text("{}")
    assert run(INSTALL, "--config", str(config), env=env).returncode == 0
    assert systemctl_calls(env)[-1] == "--user restart elara.service"


def test_install_refuses_a_bad_config(home, tmp_path):
    home_dir, env = home
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"Context": {"LastN": "six"}}))
    proc = run(INSTALL, "--config", str(config), "--no-start", env=env)
    assert proc.returncode == 78
    assert "Context.LastN" in proc.stderr
    assert not unit_path(home_dir).exists()
    missing = run(INSTALL, "--config", str(tmp_path / "nope.json"), "--no-start", env=env)
    assert missing.returncode == 78 and "does not exist" in missing.stderr


def test_install_makes_a_configured_storage_root_writable(home, tmp_path):
    home_dir, env = home
    store = tmp_path / "history"
    config = tmp_path / "elara.json"
    config.write_text(json.dumps({"Context": {"StorageRoot": str(store)}}))
    assert run(INSTALL, "--config", str(config), "--no-start", env=env).returncode == 0
    service = parse_unit(unit_path(home_dir).read_text())["Service"]
    assert service["ReadWritePaths"] == [KEY_DIRECTORY, f"-{store}"]
    assert store.is_dir() and stat.S_IMODE(store.stat().st_mode) == 0o700


def install_unit(home_dir: Path, config: Path | None = None) -> Path:
    """The unit as scripts/install writes it, plus the enable symlink, without running it."""
    unit = unit_path(home_dir)
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text(render(units.USER_UNIT, config))
    wants = unit.parent / "default.target.wants"
    wants.mkdir(exist_ok=True)
    (wants / "elara.service").symlink_to(unit)
    return unit


def fake_history(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "20261122T065511123Z_0001_user.json").write_text("{}")
    return root


def test_uninstall_keeps_the_history(home):
    home_dir, env = home
    unit = install_unit(home_dir)
    history = fake_history(home_dir / ".cache" / "elara" / "Conversation")
    proc = run(UNINSTALL, "--yes", env=env)
    assert proc.returncode == 0, proc.stderr
    assert not unit.exists() and not (unit.parent / "default.target.wants/elara.service").is_symlink()
    assert (history / "20261122T065511123Z_0001_user.json").is_file()
    assert systemctl_calls(env) == ["--user show-environment",
                                    "--user disable --now elara.service",
                                    "--user daemon-reload",
                                    "--user reset-failed elara.service"]


def test_uninstall_delete_history_removes_the_store(home):
    home_dir, env = home
    install_unit(home_dir)
    history = fake_history(home_dir / ".cache" / "elara" / "Conversation")
    env["FAKE_MANAGER"] = "down"  # and works without a user manager
    proc = run(UNINSTALL, "--delete-history", "--yes", env=env)
    assert proc.returncode == 0, proc.stderr
    assert not history.exists()
    assert (home_dir / ".cache").is_dir()
    assert not unit_path(home_dir).exists()
    assert "not reachable" in proc.stdout


def test_uninstall_delete_history_follows_the_units_config(home, tmp_path):
    home_dir, env = home
    store = fake_history(tmp_path / "elsewhere")
    default = fake_history(home_dir / ".cache" / "elara" / "Conversation")
    config = tmp_path / "elara.json"
    config.write_text(json.dumps({"Context": {"StorageRoot": str(store)}}))
    install_unit(home_dir, config)
    proc = run(UNINSTALL, "--delete-history", "--yes", env=env)
    assert proc.returncode == 0, proc.stderr
    assert not store.exists() and default.is_dir()


def test_uninstall_asks_first(home):
    home_dir, env = home
    unit = install_unit(home_dir)
    history = fake_history(home_dir / ".cache" / "elara" / "Conversation")
    proc = run(UNINSTALL, "--delete-history", env=env)  # stdin is not a terminal
    assert proc.returncode == 1
    assert "--yes" in proc.stderr and str(history) in proc.stdout
    assert unit.is_file() and history.is_dir()
    assert systemctl_calls(env) == []
