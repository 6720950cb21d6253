"""Where Elara keeps things: cache (the conversation store), configuration, runtime sockets."""

from __future__ import annotations

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
