"""What each slow or stateful part of a running Elara is built from: its slice of the settings.

A slice is a small frozen dataclass whose every field names the setting it holds (`read`); the
part's one factory receives the slice alone, so it cannot read a setting its slice does not hold.
A reload takes a part over exactly when its slice is equal and every part it is made with is taken
over too (`kept`): computed from the slices, never listed by hand. Parts not named in `PARTS` are
cheap and built anew each time, except what a running daemon never replaces: the store it opened
and the satellites' links, whose settings are declared restart-only; a reload only warns of them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self

from elara.settings import (
    ContextSettings,
    LanguageModelSettings,
    McpServerSettings,
    MemorySettings,
    Settings,
    WakeWordSettings,
    each_setting,
    parse_engine,
    restart_only_keys,
)


def read(key: str, derive: Callable[[Any], Any] | None = None) -> Any:
    """A slice field holding the setting `key` ("Section.Key", or "Section" for a whole section),
    or, with `derive`, what the part makes of it (so another value that means the same to the part
    changes nothing)."""
    return field(metadata={"setting": key, "derive": derive})


@functools.cache
def _attribute_paths() -> dict[str, tuple[str, ...]]:
    """Every config key ("LanguageModel", "LanguageModel.Model", "Personalities") → where
    `Settings` holds it."""
    sections = {section.metadata["key"]: (section.name,) for section in fields(Settings)}
    return {**sections, **{s.key: tuple(s.attribute.split(".")) for s in each_setting() if s.attribute is not None}}


def setting_keys() -> tuple[str, ...]:
    """Every setting's config key, one per value a person can set ("Audio.InputDevice", …;
    "Personalities" and "Satellites" are keys of their own)."""
    paths = _attribute_paths()
    sections = {key.partition(".")[0] for key in paths if "." in key}
    return tuple(key for key in paths if key not in sections)


def setting_value(settings: Settings, key: str) -> Any:
    """The value `settings` hold for the config key `key` (a whole section for "Section")."""
    value: Any = settings
    for name in _attribute_paths()[key]:
        value = getattr(value, name)
    return value


def _covered(key: str) -> frozenset[str]:
    """`key` and, for a section, each of its keys."""
    return frozenset(k for k in _attribute_paths() if k == key or k.startswith(f"{key}."))


@dataclass(frozen=True)
class Slice:
    """The settings one part is built from; each field is `read` from one setting or section."""

    @classmethod
    def of(cls, settings: Settings) -> Self:
        """This slice of `settings`."""
        values = {}
        for item in fields(cls):
            value, derive = setting_value(settings, item.metadata["setting"]), item.metadata["derive"]
            values[item.name] = derive(value) if derive is not None else value
        return cls(**values)

    @classmethod
    def keys(cls) -> frozenset[str]:
        """Every config key the slice holds (a whole section holds each of its keys)."""
        return frozenset().union(*(_covered(item.metadata["setting"]) for item in fields(cls)))


# ---------------------------------------------------------------------------------------------
# the parts' slices


@dataclass(frozen=True)
class LanguageModelSlice(Slice):
    """The language model: its section, and the personalities its preset may name."""

    language_model: LanguageModelSettings = read("LanguageModel")
    personalities: Mapping[str, Any] = read("Personalities")


@dataclass(frozen=True)
class MemorySlice(Slice):
    """Memory (facts, summaries, retrieval) over the history as `Context` keeps it."""

    memory: MemorySettings = read("Memory")
    context: ContextSettings = read("Context")


@dataclass(frozen=True)
class TimersSlice(Slice):
    """The timers, the announcements waiting to be said and the model watch: built from no
    setting, they outlive every reload."""


@dataclass(frozen=True)
class WakeWordSlice(Slice):
    """The wake-word detector: its models, thresholds, gate and verifiers."""

    wake_word: WakeWordSettings = read("WakeWord")

    def without_verifiers(self) -> WakeWordSlice:
        """The same detector without `WakeWord.Verifiers` (what enrolling trains one with)."""
        return WakeWordSlice(dataclasses.replace(self.wake_word, verifiers=()))


@dataclass(frozen=True)
class VadSlice(Slice):
    """The voice-activity detector."""

    kind: str = read("Listening.Vad")


@dataclass(frozen=True)
class SpeechToTextSlice(Slice):
    """The speech-to-text engine: local Whisper, or a Wyoming service with Whisper standing by."""

    model: str = read("SpeechToText.Model")
    language: str | None = read("SpeechToText.Language")
    beam_size: int = read("SpeechToText.BeamSize")
    noise_suppression: int = read("SpeechToText.NoiseSuppression")
    window_seconds: float = read("SpeechToText.WindowSeconds")
    no_speech_threshold: float = read("SpeechToText.NoSpeechThreshold")
    engine: str = read("SpeechToText.Engine")
    fallback_to_local: bool = read("SpeechToText.FallbackToLocal")
    timeout_seconds: float = read("SpeechToText.TimeoutSeconds")


@dataclass(frozen=True)
class SecondCheckSlice(Slice):
    """The second Whisper model: it reads again the wake windows the first check turns down, and
    a question's doubtful words; loaded only where one of them asks for it."""

    model: str | None = read("WakeWord.ConfirmSecondModel")
    checks_wakes: bool = read("WakeWord.ConfirmFrom", lambda confirm_from: confirm_from > 0)
    beam_size: int = read("WakeWord.ConfirmBeamSize")
    reads_questions: bool = read("SpeechToText.ReadAgainBySecondModel")
    reads_again: bool = read("SpeechToText.ReadAgainBeamSize", lambda beam_size: beam_size > 0)
    first_model: str = read("SpeechToText.Model")
    local_first: bool = read("SpeechToText.Engine", lambda engine: parse_engine(engine) is None)
    window_seconds: float = read("SpeechToText.WindowSeconds")
    no_speech_threshold: float = read("SpeechToText.NoSpeechThreshold")


@dataclass(frozen=True)
class TextToSpeechSlice(Slice):
    """The text-to-speech engine: local Piper, or a Wyoming service with Piper standing by."""

    voice: str = read("TextToSpeech.Voice")
    length_scale: float = read("TextToSpeech.LengthScale")
    engine: str = read("TextToSpeech.Engine")
    remote_voice: str | None = read("TextToSpeech.RemoteVoice")
    fallback_to_local: bool = read("TextToSpeech.FallbackToLocal")
    timeout_seconds: float = read("TextToSpeech.TimeoutSeconds")


@dataclass(frozen=True)
class MicrophoneSlice(Slice):
    """The microphone."""

    device: int | str | None = read("Audio.InputDevice")


@dataclass(frozen=True)
class SpeakerSlice(Slice):
    """The speaker; it stays open, keeping what it plays, while echo cancelling needs it."""

    device: int | str | None = read("Audio.OutputDevice")
    latency_ms: int = read("Audio.OutputLatencyMs")
    echo_cancellation: bool = read("Audio.EchoCancellation")


@dataclass(frozen=True)
class EchoSlice(Slice):
    """The echo canceller, which learns the room between one microphone and one speaker."""

    echo_cancellation: bool = read("Audio.EchoCancellation")
    canceller: str = read("Audio.EchoCanceller")


@dataclass(frozen=True)
class ToolServersSlice(Slice):
    """The MCP servers whose tools the model may call (none while tools are off)."""

    enabled: bool = read("Tools.Enabled")
    servers: tuple[McpServerSettings, ...] = read("Tools.McpServers")


# ---------------------------------------------------------------------------------------------
# the parts, and what a reload takes over


@dataclass(frozen=True)
class Part:
    """A slow or stateful part: the slice it is built from and the parts it is made with."""

    slice: type[Slice]
    needs: tuple[str, ...] = ()


#: Every slow or stateful part, by its name in `build.Runtime`, each after the parts it needs.
PARTS: dict[str, Part] = {
    "llm": Part(LanguageModelSlice),
    "memory": Part(MemorySlice, needs=("llm",)),  # it asks the model for facts, summaries, vectors
    "timers": Part(TimersSlice),
    "tool_servers": Part(ToolServersSlice),
    "wake": Part(WakeWordSlice),
    "vad": Part(VadSlice),
    "transcriber": Part(SpeechToTextSlice),
    "second_check": Part(SecondCheckSlice),
    "synthesizer": Part(TextToSpeechSlice),
    "microphone": Part(MicrophoneSlice),
    "speaker": Part(SpeakerSlice),
    "echo": Part(EchoSlice, needs=("microphone", "speaker")),
}


def kept(previous: Settings, settings: Settings) -> frozenset[str]:
    """The parts a reload from `previous` to `settings` takes over from the running runtime: each
    whose slice is equal and whose every needed part is taken over too. The rest are built anew."""
    taken: set[str] = set()
    for name, part in PARTS.items():
        if all(need in taken for need in part.needs) and part.slice.of(previous) == part.slice.of(settings):
            taken.add(name)
    return frozenset(taken)


def restart_only_changes(previous: Settings, settings: Settings) -> list[str]:
    """The settings only a restart applies (`restart=True` where they are declared) whose value
    differs: a reload keeps the running value, and warns."""
    return [key for key in restart_only_keys() if setting_value(previous, key) != setting_value(settings, key)]
