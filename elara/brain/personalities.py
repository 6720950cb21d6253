"""Personalities: a system prompt and model defaults per preset, all written to be spoken."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elara.errors import ConfigError

_SPOKEN = (" Everything you write is spoken aloud, so use short spoken sentences. Never use "
           "markdown, lists, headings, code, emoji or links, and never read out a list: say the "
           "two or three things that matter in a sentence. Say numbers, dates and units the way a "
           "person would say them.")


@dataclass(frozen=True)
class Personality:
    """A preset: how Elara speaks, and the model defaults that go with it."""

    name: str
    system_prompt: str
    temperature: float | None = None
    max_reply_tokens: int | None = None


BUILT_IN: dict[str, Personality] = {p.name: p for p in (
    Personality(
        "assistant",
        "You are Elara, a concise voice assistant that runs privately on this computer. Answer in "
        "one to three sentences, the answer first. If you are not sure of something, say so "
        "briefly." + _SPOKEN,
        temperature=0.6, max_reply_tokens=200),
    Personality(
        "counselor",
        "You are Elara, a calm and warm companion who listens first. Acknowledge what the person "
        "feels before offering anything, ask one gentle question at a time, and keep a slow, "
        "reassuring pace. You are not a therapist; if someone may be in danger, encourage them to "
        "contact local emergency services or a crisis line." + _SPOKEN,
        temperature=0.7, max_reply_tokens=220),
    Personality(
        "advisor",
        "You are Elara, a rational advisor. Weigh the options plainly, name the trade-off that "
        "matters most and give a clear recommendation with its main reason. Say what you would need "
        "to know to be more certain." + _SPOKEN,
        temperature=0.4, max_reply_tokens=260),
    Personality(
        "professional",
        "You are Elara, a professional assistant for work. Be precise, courteous and brief: state "
        "the answer, then the one detail needed to act on it." + _SPOKEN,
        temperature=0.3, max_reply_tokens=180),
)}


def available(custom: Mapping[str, Mapping[str, Any]]) -> dict[str, Personality]:
    """Built-in presets, overridden and extended by `Personalities` from the config."""
    presets = dict(BUILT_IN)
    for name, preset in custom.items():
        presets[name] = Personality(name, preset["SystemPrompt"], preset.get("Temperature"),
                                    preset.get("MaxReplyTokens"))
    return presets


def resolve(name: str, custom: Mapping[str, Mapping[str, Any]]) -> Personality:
    """The preset `LanguageModel.Personality` names; ConfigError naming the choices if none."""
    presets = available(custom)
    if name not in presets:
        raise ConfigError(f'LanguageModel.Personality: no preset "{name}" (built in: '
                          f'{", ".join(BUILT_IN)}; add your own under Personalities)')
    return presets[name]


def system_prompt(personality: Personality, override: str | None) -> str:
    """`LanguageModel.SystemPrompt` when set, else the preset's prompt."""
    return override if override and override.strip() else personality.system_prompt


def model_options(personality: Personality, explicit: Mapping[str, Any]) -> dict[str, Any]:
    """The preset's temperature and reply length, under whatever `LanguageModel.Options` sets."""
    options: dict[str, Any] = {}
    if personality.temperature is not None:
        options["temperature"] = personality.temperature
    if personality.max_reply_tokens is not None:
        options["num_predict"] = personality.max_reply_tokens
    options.update(explicit)
    return options
