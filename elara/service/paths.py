"""Where Elara keeps things: cache (the conversation store), configuration, runtime sockets,
model files."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path


def _env_dir(env: Mapping[str, str], name: str) -> Path | None:
    value = env.get(name, "")
    # systemd may pass several directories separated by ':'; the first is ours.
    first = value.split(":")[0].strip()
    return Path(first) if first else None


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """`$CACHE_DIRECTORY` (systemd's CacheDirectory=), else `$XDG_CACHE_HOME/elara`, else `~/.cache/elara`."""
    env = os.environ if env is None else env
    if (systemd := _env_dir(env, "CACHE_DIRECTORY")) is not None:
        return systemd
    if (xdg := _env_dir(env, "XDG_CACHE_HOME")) is not None:
        return xdg / "elara"
    return Path.home() / ".cache" / "elara"


def config_home(env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/elara`, else `~/.config/elara`."""
    env = os.environ if env is None else env
    if (xdg := _env_dir(env, "XDG_CONFIG_HOME")) is not None:
        return xdg / "elara"
    return Path.home() / ".config" / "elara"


def default_store_root(env: Mapping[str, str] | None = None) -> Path:
    """The conversation store's directory when `Context.StorageRoot` is null."""
    return cache_root(env) / "Conversation"


def runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the status socket lives: `$RUNTIME_DIRECTORY` (systemd's RuntimeDirectory=), else
    `$XDG_RUNTIME_DIR/elara`, else `/tmp/elara-<uid>`."""
    env = os.environ if env is None else env
    if (systemd := _env_dir(env, "RUNTIME_DIRECTORY")) is not None:
        return systemd
    if (xdg := _env_dir(env, "XDG_RUNTIME_DIR")) is not None:
        return xdg / "elara"
    return Path("/tmp") / f"elara-{os.getuid()}"


def status_socket(env: Mapping[str, str] | None = None) -> Path:
    """The daemon's status socket."""
    return runtime_dir(env) / "status.sock"


def default_models_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """Where relative model paths are looked up: the user's and the repository's `models/`.

    `$XDG_DATA_HOME/elara/models` (default `~/.local/share/elara/models`), `<config home>/models`
    (`~/.config/elara/models`) and, in a source checkout, `<repo>/models`. Missing ones are kept
    (they may be created later) but cost nothing.
    """
    env = os.environ if env is None else env
    data = env.get("XDG_DATA_HOME", "").split(":")[0].strip()
    data_home = Path(data) if data else Path.home() / ".local" / "share"
    dirs = [data_home / "elara" / "models", config_home(env) / "models"]
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").is_file():
        dirs.append(repo / "models")
    return dirs


def package_dir(module: str) -> Path | None:
    """Where an installed package lives, found without importing it (engines are slow to import)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))
