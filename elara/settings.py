"""Typed, frozen settings: one dataclass per config section, bound by elara.config."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping
from urllib.parse import urlparse

import pydantic


def setting(key: str, *, secret: bool = False, check: Callable[[Any], str | None] | None = None,
            **limits: Any) -> Any:
    """Declare a field's config key name, its range or choices, a custom check, and secrecy."""
    return field(metadata={"key": key, "secret": secret, "check": check, **limits})


def _http_url(value: str) -> str | None:
    parsed = urlparse(value if "://" in value else f"http://{value}")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "expected an http(s) URL such as http://127.0.0.1:11434"
    return None


_DURATION = re.compile(r"^-?(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$|^-?\d+$")


def _keep_alive(value: float | str) -> str | None:
    if isinstance(value, str) and not _DURATION.match(value.strip()):
        return 'expected a duration such as "30m", "1h", "-1" (forever) or a number of seconds'
    return None


def _not_blank(value: str) -> str | None:
    return "expected a non-empty string" if not value.strip() else None


def _ollama_options(value: Mapping[str, Any]) -> dict[str, Any]:
    """Check model options against the official client's own Options model."""
    import ollama  # the client owns the option names and types

    known = {name.casefold(): name for name in ollama.Options.model_fields}
    options: dict[str, Any] = {}
    for key, raw in value.items():
        name = known.get(key.casefold())
        if name is None:
            raise ValueError(f".{key}: unknown Ollama option (known: {', '.join(sorted(known.values()))})")
        options[name] = raw
    try:
        checked = ollama.Options.model_validate(options)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f".{where}: {first['msg'].lower()}, got {first.get('input')!r}") from None
    return checked.model_dump(exclude_none=True)


@dataclass(frozen=True)
class LanguageModelSettings:
    """`LanguageModel`: which Ollama, which model, how to ask it."""

    host: str = setting("Host", check=_http_url)
    model: str = setting("Model", check=_not_blank)
    api: str = setting("Api", choices=("chat", "generate"))
    system_prompt: str = setting("SystemPrompt")
    keep_alive: float | str | None = setting("KeepAlive", check=_keep_alive)
    timeout_seconds: float = setting("TimeoutSeconds", min=1, max=3600)
    options: Mapping[str, Any] = setting("Options", normalize=_ollama_options)


@dataclass(frozen=True)
class ContextSettings:
    """`Context`: how much history reaches the model, and where and how it is stored."""

    last_n: int = setting("LastN", min=0, max=1000)
    storage_root: str | None = setting("StorageRoot")
    encryption_key: str = setting("EncryptionKey", secret=True, check=_not_blank)
    max_history_tokens: int | None = setting("MaxHistoryTokens", min=0)


@dataclass(frozen=True)
class LoggingSettings:
    """`Logging`: how much the daemon says."""

    level: str = setting("Level", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


@dataclass(frozen=True)
class Settings:
    """The whole configuration, one field per section."""

    language_model: LanguageModelSettings = setting("LanguageModel")
    context: ContextSettings = setting("Context")
    logging: LoggingSettings = setting("Logging")
