"""Appsettings-style configuration: JSON layers plus `ELARA__Section__Key` variables, bound once.

Layers, later wins: the packaged defaults, `$XDG_CONFIG_HOME/elara/appsettings.json`, the file
named by `--config` (or `ELARA_CONFIG`), `appsettings.{ELARA_ENVIRONMENT}.json` beside it, then the
environment. Keys are case-insensitive, as in ASP.NET. Every problem is a ConfigError naming the
JSON path, which the command line turns into exit status 78.
"""

from __future__ import annotations

import collections.abc
import json
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from elara import settings as schema
from elara.brain import personalities
from elara.errors import ConfigError
from elara.service.paths import config_home

ENV_PREFIX = "ELARA__"
DEFAULT_FILE = "appsettings.json"


class _EnvText(str):
    """A value that came from an environment variable: text to be read as the target type."""


@dataclass(frozen=True)
class ConfigSources:
    """The files that made up a configuration, in the order they were applied."""

    files: tuple[Path, ...] = field(default_factory=tuple)


def load_settings(
    config_path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> schema.Settings:
    """Read every layer and bind it into frozen Settings; raises ConfigError on any problem."""
    settings, _ = load_settings_with_sources(config_path, env)
    return settings


def load_settings_with_sources(
    config_path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[schema.Settings, ConfigSources]:
    """Like load_settings, and also say which files were read."""
    env = os.environ if env is None else env
    merged = packaged_defaults()
    used: list[Path] = []

    user_file = config_home(env) / DEFAULT_FILE
    anchor: Path | None = None
    if user_file.is_file():
        merged = _merge(merged, _read_json(user_file), "")
        used.append(user_file)
        anchor = user_file

    explicit = config_path or env.get("ELARA_CONFIG") or None
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"config file {path} does not exist: create it or fix --config / ELARA_CONFIG"
            )
        merged = _merge(merged, _read_json(path), "")
        used.append(path)
        anchor = path

    environment = env.get("ELARA_ENVIRONMENT", "").strip()
    if environment and anchor is not None:
        overlay = anchor.parent / f"appsettings.{environment}.json"
        if overlay.is_file():
            merged = _merge(merged, _read_json(overlay), "")
            used.append(overlay)

    merged = _merge(merged, _env_overrides(env), "")
    return bind(merged), ConfigSources(files=tuple(used))


def bind(data: Mapping[str, Any]) -> schema.Settings:
    """Bind a merged JSON tree to Settings, checking every key, type and range, and the
    settings that refer to each other."""
    settings = _bind_dataclass(schema.Settings, data, "")
    personalities.resolve(settings.language_model.personality, settings.personalities)
    _check_pauses(settings.listening)
    wake = settings.wake_word
    if wake.confirm_from > wake.threshold:
        raise ConfigError(
            f"WakeWord.ConfirmFrom ({wake.confirm_from:g}) is above WakeWord.Threshold ({wake.threshold:g}): "
            "it is where doubtful scores start, below the threshold; lower it, or set it to 0 to turn "
            "the transcript check off")
    return settings


def _check_pauses(listening: schema.ListeningSettings) -> None:
    if listening.turn_judgment == "off":
        return
    if listening.max_pause_ms < listening.end_silence_ms:
        raise ConfigError(
            f"Listening.MaxPauseMs ({listening.max_pause_ms}) is shorter than Listening.EndSilenceMs "
            f"({listening.end_silence_ms}): the longest pause must be at least the plain one; raise "
            "MaxPauseMs or lower EndSilenceMs")
    if (listening.uncertain_pause_ms is not None
            and not listening.finished_ms <= listening.uncertain_pause_ms <= listening.max_pause_ms):
        raise ConfigError(
            f"Listening.UncertainPauseMs ({listening.uncertain_pause_ms}) must lie between "
            f"Listening.FinishedMs ({listening.finished_ms}) and Listening.MaxPauseMs "
            f"({listening.max_pause_ms}): an undecided pause waits longer than a finished one and "
            "no longer than an unfinished one")
    if listening.finished_ms > listening.end_silence_ms:
        raise ConfigError(
            f"Listening.FinishedMs ({listening.finished_ms}) is longer than Listening.EndSilenceMs "
            f"({listening.end_silence_ms}): a finished sentence should end the turn sooner than an "
            "unjudged pause; lower FinishedMs")


def to_json(settings: Any, *, redact: bool = True) -> dict[str, Any]:
    """The settings as a JSON tree with their config key names; secrets replaced when `redact`."""
    out: dict[str, Any] = {}
    for f in fields(settings):
        key = f.metadata.get("key", f.name)
        value = getattr(settings, f.name)
        if is_dataclass(value):
            out[key] = to_json(value, redact=redact)
        elif redact and f.metadata.get("secret") and value is not None:
            out[key] = "(redacted)"
        elif isinstance(value, Mapping):
            out[key] = dict(value)
        elif isinstance(value, tuple):
            out[key] = list(value)
        else:
            out[key] = value
    return out


# -- layers --------------------------------------------------------------------------------------


def packaged_defaults() -> dict[str, Any]:
    """The packaged appsettings.json, the first layer: every key with its default."""
    text = resources.files("elara").joinpath(DEFAULT_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a JSON object at the top level")
    return data


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for name, value in env.items():
        if not name.upper().startswith(ENV_PREFIX):
            continue
        parts = [p for p in name[len(ENV_PREFIX):].split("__")]
        if not all(parts):
            raise ConfigError(f"environment variable {name}: expected ELARA__Section__Key")
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"environment variable {name} conflicts with another one")
        node[parts[-1]] = _EnvText(value)
    return tree


def _merge(base: Mapping[str, Any], override: Mapping[str, Any], path: str) -> dict[str, Any]:
    """Deep-merge `override` into `base`; keys match case-insensitively, keeping base's spelling."""
    result = dict(base)
    by_fold = {k.casefold(): k for k in result}
    for key, value in override.items():
        canonical = by_fold.get(key.casefold(), key)
        here = f"{path}.{canonical}" if path else canonical
        current = result.get(canonical)
        if isinstance(current, dict) and isinstance(value, dict):
            result[canonical] = _merge(current, value, here)
        else:
            result[canonical] = value
        by_fold[canonical.casefold()] = canonical
    return result


# -- binding -------------------------------------------------------------------------------------


def _bind_dataclass(cls: type, data: Any, path: str) -> Any:
    if isinstance(data, _EnvText):
        data = _env_json(data, path)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path or 'configuration'}: expected an object, got {_show(data)}")
    hints = typing.get_type_hints(cls)
    by_key = {f.metadata.get("key", f.name).casefold(): f for f in fields(cls)}
    for key in data:
        if key.casefold() not in by_key:
            known = ", ".join(f.metadata.get("key", f.name) for f in fields(cls))
            where = f"{path}.{key}" if path else key
            raise ConfigError(f"{where}: unknown key (known here: {known})")
    values: dict[str, Any] = {}
    given = {k.casefold(): v for k, v in data.items()}
    for f in fields(cls):
        key = f.metadata.get("key", f.name)
        where = f"{path}.{key}" if path else key
        if key.casefold() not in given and f.default is not MISSING:
            values[f.name] = f.default  # a list entry's optional key
            continue
        if key.casefold() not in given:
            raise ConfigError(f"{where}: missing (each entry needs it)" if "[" in where else
                              f"{where}: missing (the packaged appsettings.json should define it)")
        raw = given[key.casefold()]
        tp = hints[f.name]
        if isinstance(tp, type) and is_dataclass(tp):
            values[f.name] = _bind_dataclass(tp, raw, where)
        else:
            values[f.name] = _bind_value(raw, tp, where, f.metadata)
    return cls(**values)


def _bind_value(raw: Any, tp: Any, where: str, meta: Mapping[str, Any]) -> Any:
    optional, tp = _unwrap_optional(tp)
    if raw is None or (isinstance(raw, _EnvText) and optional and raw.strip().lower() == "null"):
        if optional:
            return None
        raise ConfigError(f"{where}: expected {_describe(tp, meta)}, got null")
    value = _coerce(raw, tp, where, meta)
    check = meta.get("check")
    if check is not None:
        problem = check(value)
        if problem:
            raise ConfigError(f"{where}: {problem}, got {_show(raw)}")
    return value


def _coerce(raw: Any, tp: Any, where: str, meta: Mapping[str, Any]) -> Any:
    env = isinstance(raw, _EnvText)
    expected = _describe(tp, meta)
    origin = typing.get_origin(tp)
    if tp is bool:
        if env and raw.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            return raw.strip().lower() in ("true", "1", "yes")
        if isinstance(raw, bool):
            return raw
    elif tp in (int, float):
        value = raw
        if env:
            try:
                value = tp(raw.strip())
            except ValueError:
                pass
        # An integer setting takes only integers; a number setting takes both. Never a bool.
        accepted = (int,) if tp is int else (int, float)
        if isinstance(value, accepted) and not isinstance(value, bool):
            return _ranged(tp(value), raw, where, expected, meta)
    elif tp is str:
        if isinstance(raw, str):
            choices = meta.get("choices")
            if choices:
                for choice in choices:
                    if raw.casefold() == choice.casefold():
                        return choice
                raise ConfigError(f"{where}: expected {expected}, got {_show(raw)}")
            return str(raw)
    elif origin in (dict, collections.abc.Mapping) or tp is dict:
        value = _env_json(raw, where) if env else raw
        if isinstance(value, Mapping):
            return types.MappingProxyType(_normalize_mapping(value, where, meta))
    elif isinstance(tp, type) and is_dataclass(tp):
        value = _env_json(raw, where) if env else raw
        return _bind_dataclass(tp, value, where)
    elif origin is tuple:
        value = _env_json(raw, where) if env else raw
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list):
            (item_tp, _) = typing.get_args(tp)
            return tuple(_coerce(v, item_tp, f"{where}[{i}]", {}) for i, v in enumerate(value))
    elif origin in (types.UnionType, typing.Union):
        # Try each member in order; the first that accepts the value wins.
        for member in typing.get_args(tp):
            try:
                return _coerce(raw, member, where, meta)
            except ConfigError:
                continue
    raise ConfigError(f"{where}: expected {expected}, got {_show(raw)}")


def _normalize_mapping(value: Mapping[str, Any], where: str, meta: Mapping[str, Any]) -> dict:
    normalize = meta.get("normalize")
    if normalize is None:
        return dict(value)
    try:
        return normalize(value)
    except ValueError as exc:
        raise ConfigError(f"{where}{exc}") from None


def _ranged(value: float, raw: Any, where: str, expected: str, meta: Mapping[str, Any]) -> Any:
    low, high = meta.get("min"), meta.get("max")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ConfigError(f"{where}: expected {expected}, got {_show(raw)}")
    return value


def _env_json(raw: str, where: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return str(raw)


def _unwrap_optional(tp: Any) -> tuple[bool, Any]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) < len(typing.get_args(tp)):
            return True, args[0] if len(args) == 1 else typing.Union[tuple(args)]
    return False, tp


def _describe(tp: Any, meta: Mapping[str, Any]) -> str:
    if "expect" in meta:
        return meta["expect"]
    low, high = meta.get("min"), meta.get("max")
    bound = ""
    if low is not None and high is not None:
        bound = f" from {low} to {high}"
    elif low is not None:
        bound = f" >= {low}"
    elif high is not None:
        bound = f" <= {high}"
    if tp is int:
        return "an integer" + bound
    if tp is float:
        return "a number" + bound
    if tp is bool:
        return "true or false"
    if tp is str:
        choices = meta.get("choices")
        return "one of " + ", ".join(f'"{c}"' for c in choices) if choices else "a string"
    if typing.get_origin(tp) is tuple:
        return "a list"
    return "an object"


def _show(value: Any) -> str:
    text = json.dumps(str(value) if isinstance(value, _EnvText) else value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
