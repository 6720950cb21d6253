"""Typed, frozen settings: one dataclass per config section, bound by elara.config."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
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


#: An engine that runs in Elara's own process.
LOCAL = "local"


@dataclass(frozen=True)
class ServiceAddress:
    """Where a Wyoming service listens: a TCP host and port, or a Unix socket path."""

    host: str | None = None
    port: int | None = None
    path: str | None = None

    def __str__(self) -> str:
        return f"unix://{self.path}" if self.path is not None else f"tcp://{self.host}:{self.port}"


def parse_engine(value: str) -> ServiceAddress | None:
    """`local` → None; `wyoming://host:port`, `tcp://host:port` or `unix:///path` → the address.

    Raises ValueError saying what is expected when the value is none of these."""
    text = value.strip()
    if text.lower() == LOCAL:
        return None
    parsed = urlparse(text)
    if parsed.scheme == "unix":
        path = (parsed.netloc + parsed.path) if parsed.netloc else parsed.path
        if not path:
            raise ValueError(f"{value!r} names no socket file; expected unix:///path/to/socket")
        return ServiceAddress(path=path)
    if parsed.scheme in ("wyoming", "tcp"):
        try:
            port = parsed.port
        except ValueError:
            port = None
        if not parsed.hostname or port is None:
            raise ValueError(f"{value!r} needs a host and a port, such as wyoming://127.0.0.1:10300")
        return ServiceAddress(host=parsed.hostname, port=port)
    raise ValueError(f"{value!r}: expected local, wyoming://host:port or unix:///path")


def _engine(value: str) -> str | None:
    try:
        parse_engine(value)
    except ValueError as exc:
        return str(exc)
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


REDACTIONS = ("card", "phone", "email")


def _redactions(value: tuple[str, ...]) -> str | None:
    unknown = [v for v in value if v not in REDACTIONS]
    return f"expected a list of {', '.join(REDACTIONS)}" if unknown else None


_PRESET_KEYS = {"systemprompt": "SystemPrompt", "temperature": "Temperature",
                "maxreplytokens": "MaxReplyTokens"}


def _personalities(value: Mapping[str, Any]) -> dict[str, Any]:
    """Custom presets: {name: {SystemPrompt, Temperature, MaxReplyTokens}}."""
    presets: dict[str, Any] = {}
    for name, preset in value.items():
        if not isinstance(preset, Mapping):
            raise ValueError(f".{name}: expected an object with SystemPrompt, Temperature, MaxReplyTokens")
        clean: dict[str, Any] = {}
        for key, item in preset.items():
            canonical = _PRESET_KEYS.get(key.casefold())
            if canonical is None:
                raise ValueError(f".{name}.{key}: unknown key (known: {', '.join(_PRESET_KEYS.values())})")
            if canonical == "SystemPrompt" and not (isinstance(item, str) and item.strip()):
                raise ValueError(f".{name}.SystemPrompt: expected a non-empty string")
            if canonical == "Temperature" and not (isinstance(item, (int, float)) and 0 <= item <= 2):
                raise ValueError(f".{name}.Temperature: expected a number from 0 to 2")
            if canonical == "MaxReplyTokens" and not (isinstance(item, int) and item > 0):
                raise ValueError(f".{name}.MaxReplyTokens: expected an integer > 0")
            clean[canonical] = item
        if "SystemPrompt" not in clean:
            raise ValueError(f".{name}.SystemPrompt: missing (a preset needs its prompt)")
        presets[name] = clean
    return presets


@dataclass(frozen=True)
class LanguageModelSettings:
    """`LanguageModel`: which provider answers (Ollama or the embedded llama.cpp), which model,
    how to ask it."""

    provider: str = setting("Provider", choices=("auto", "ollama", "embedded"))
    host: str = setting("Host", check=_http_url)
    model: str = setting("Model", check=_not_blank)
    api: str = setting("Api", choices=("chat", "generate"))
    personality: str = setting("Personality", check=_not_blank)
    system_prompt: str | None = setting("SystemPrompt")
    keep_alive: float | str | None = setting("KeepAlive", check=_keep_alive)
    timeout_seconds: float = setting("TimeoutSeconds", min=1, max=3600)
    options: Mapping[str, Any] = setting("Options", normalize=_ollama_options)
    #: A GGUF chat model for the embedded provider; None means the built-in SmolLM2-135M-Instruct.
    embedded_model: str | None = setting("EmbeddedModel", check=_not_blank)
    #: CPU threads llama.cpp uses; None means min(4, the number of CPUs).
    embedded_threads: int | None = setting("EmbeddedThreads", min=1, max=256)


@dataclass(frozen=True)
class ContextSettings:
    """`Context`: how much history reaches the model, and where and how it is stored."""

    last_n: int = setting("LastN", min=0, max=1000)
    storage_root: str | None = setting("StorageRoot")
    encryption_key: str = setting("EncryptionKey", secret=True, check=_not_blank)
    encryption_key_file: str | None = setting("EncryptionKeyFile")
    max_history_tokens: int | None = setting("MaxHistoryTokens", min=0)
    retention_days: int | None = setting("RetentionDays", min=1)
    retention_keep_summaries: bool = setting("RetentionKeepSummaries")
    redact: tuple[str, ...] = setting("Redact", check=_redactions)


@dataclass(frozen=True)
class MemorySettings:
    """`Memory`: what Elara remembers beyond the last few turns."""

    summaries: bool = setting("Summaries")
    summary_threshold: float = setting("SummaryThreshold", min=0.1, max=1.0)
    facts: str = setting("Facts", choices=("model", "explicit", "off"))
    max_facts: int = setting("MaxFacts", min=1, max=1000)
    retrieval: bool = setting("Retrieval")
    retrieval_top_k: int = setting("RetrievalTopK", min=1, max=20)
    retrieval_min_score: float = setting("RetrievalMinScore", min=0.0, max=1.0)
    embedding_model: str = setting("EmbeddingModel", check=_not_blank)


@dataclass(frozen=True)
class AudioSettings:
    """`Audio`: which devices, and how Elara keeps from hearing itself."""

    input_device: int | str | None = setting("InputDevice")
    output_device: int | str | None = setting("OutputDevice")
    output_latency_ms: int = setting("OutputLatencyMs", min=10, max=1_000)
    speaker_tail_ms: int = setting("SpeakerTailMs", min=0, max=10_000)
    # her own voice taken out of the microphone, with what she plays as the reference; off: she
    # mutes the wake word while she speaks
    echo_cancellation: bool = setting("EchoCancellation")
    # which canceller: speexdsp's (keeps a person talking over her) or WebRTC's AEC3
    echo_canceller: str = setting("EchoCanceller", choices=("speex", "webrtc"))
    # the wake word over a reply stops it; null: exactly when echo cancellation is on
    barge_in: bool | None = setting("BargeIn")
    # "stop" without the wake word silences a reply (needs echo cancellation) or a ringing timer
    stop_without_wake_word: bool = setting("StopWithoutWakeWord")


@dataclass(frozen=True)
class WakeWordSettings:
    """`WakeWord`: which wake words, and how sure the detector must be."""

    models: tuple[str, ...] = setting("Models", check=lambda v: None if v else "expected at least one model")
    threshold: float = setting("Threshold", min=0.0, max=1.0)
    trigger_level: int = setting("TriggerLevel", min=1, max=50)
    refractory_seconds: float = setting("RefractorySeconds", min=0, max=60)
    # openWakeWord's Silero gate: no wake unless speech was heard just before (0 = off)
    vad_threshold: float = setting("VadThreshold", min=0.0, max=0.99)
    # scores from here to Threshold wake only if Whisper hears the wake word (0 = off)
    confirm_from: float = setting("ConfirmFrom", min=0.0, max=1.0)
    # scores from Threshold up are checked too, with a looser rule (needs ConfirmFrom > 0)
    confirm_confident: bool = setting("ConfirmConfident")
    # the beam a local Whisper checks a wake with
    confirm_beam_size: int = setting("ConfirmBeamSize", min=1, max=10)
    # a second Whisper model that reads again what the first check turned down (null: none)
    confirm_second_model: str | None = setting("ConfirmSecondModel")
    # per-user verifiers (`elara wake enroll`); relative paths are under the config directory
    verifiers: tuple[str, ...] = setting("Verifiers")
    # a second copy of the models hears pauses inside speech cut short (off with VadThreshold 0)
    shorten_pauses: bool = setting("ShortenPauses")


@dataclass(frozen=True)
class ListeningSettings:
    """`Listening`: how an utterance is found after the wake word, and the follow-up window."""

    mode: str = setting("Mode", choices=("wake_word", "continued"))
    vad: str = setting("Vad", choices=("silero", "energy"))
    vad_threshold: float = setting("VadThreshold", min=0.0, max=1.0)
    pre_roll_ms: int = setting("PreRollMs", min=0, max=5_000)
    end_silence_ms: int = setting("EndSilenceMs", min=80, max=10_000)
    min_speech_ms: int = setting("MinSpeechMs", min=0, max=10_000)
    max_utterance_seconds: float = setting("MaxUtteranceSeconds", min=1, max=120)
    no_speech_timeout_seconds: float = setting("NoSpeechTimeoutSeconds", min=0.5, max=120)
    follow_up_seconds: float = setting("FollowUpSeconds", min=0, max=120)
    turn_judgment: str = setting("TurnJudgment", choices=("transcript", "off"))
    finished_ms: int = setting("FinishedMs", min=0, max=10_000)
    # null: 400 ms where going on over her reply is heard (echo cancelling), else 1300 ms
    uncertain_pause_ms: int | None = setting("UncertainPauseMs", min=0, max=10_000)
    max_pause_ms: int = setting("MaxPauseMs", min=80, max=10_000)
    speculative_reply: bool = setting("SpeculativeReply")
    # the person may go on this long after their speech ended, her reply begun or not (0 = off)
    go_on_ms: int = setting("GoOnMs", min=0, max=10_000)


@dataclass(frozen=True)
class SpeechToTextSettings:
    """`SpeechToText`: the Whisper model, how its output is trusted, and where it runs."""

    model: str = setting("Model", check=_not_blank)
    language: str | None = setting("Language")
    beam_size: int = setting("BeamSize", min=1, max=10)
    # words the end-of-turn judgment doubts are read again with this beam (0 or ≤ BeamSize: not)
    read_again_beam_size: int = setting("ReadAgainBeamSize", min=0, max=10)
    # they are read again by WakeWord.ConfirmSecondModel (when it is another model) rather than Model
    read_again_by_second_model: bool = setting("ReadAgainBySecondModel")
    # WebRTC noise suppression of each utterance before a local Whisper reads it: 0 off, 1..4
    noise_suppression: int = setting("NoiseSuppression", min=0, max=4)
    window_seconds: float = setting("WindowSeconds", min=5, max=30)
    no_speech_threshold: float = setting("NoSpeechThreshold", min=0.0, max=1.0)
    early_start_ms: int = setting("EarlyStartMs", min=0, max=10_000)
    # local (Whisper in-process) or a Wyoming service: wyoming://host:port, unix:///path
    engine: str = setting("Engine", check=_engine)
    fallback_to_local: bool = setting("FallbackToLocal")
    timeout_seconds: float = setting("TimeoutSeconds", min=0.5, max=120)


@dataclass(frozen=True)
class TextToSpeechSettings:
    """`TextToSpeech`: the Piper voice, its pace, and where it runs."""

    voice: str = setting("Voice", check=_not_blank)
    length_scale: float = setting("LengthScale", min=0.3, max=3.0)
    first_chunk_words: int = setting("FirstChunkWords", min=0, max=100)
    # local (Piper in-process) or a Wyoming service: wyoming://host:port, unix:///path
    engine: str = setting("Engine", check=_engine)
    # the service's voice (null: its default); Voice stays the local one
    remote_voice: str | None = setting("RemoteVoice")
    fallback_to_local: bool = setting("FallbackToLocal")
    timeout_seconds: float = setting("TimeoutSeconds", min=0.5, max=120)


@dataclass(frozen=True)
class IntentsSettings:
    """`Intents`: everyday commands (timers, the time, "stop") answered without the model."""

    enabled: bool = setting("Enabled")


@dataclass(frozen=True)
class TimersSettings:
    """`Timers`: how long a timer may run and how long one rings."""

    max_hours: float = setting("MaxHours", min=0.01, max=8_760)
    ring_seconds: float = setting("RingSeconds", min=1, max=3_600)


@dataclass(frozen=True)
class AnnouncementsSettings:
    """`Announcements`: what Elara says without being asked."""

    startup: bool = setting("Startup")


@dataclass(frozen=True)
class LoggingSettings:
    """`Logging`: how much the daemon says."""

    level: str = setting("Level", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def _satellite_uri(value: str) -> str | None:
    try:
        address = None if value.strip().lower() == "local" else parse_engine(value)
    except ValueError as exc:
        return str(exc).replace("expected local, ", "expected ")
    return None if address is not None else "expected tcp://host:port or unix:///path"


@dataclass(frozen=True)
class SatelliteSettings:
    """One entry of `Satellites`: a wyoming-satellite in another room."""

    name: str = setting("Name", check=_not_blank)
    uri: str = setting("Uri", check=_satellite_uri)


def _unique_names(value: tuple[SatelliteSettings, ...]) -> str | None:
    names = [s.name.strip().casefold() for s in value]
    return "each satellite needs its own Name" if len(set(names)) != len(names) else None


@dataclass(frozen=True)
class Settings:
    """The whole configuration, one field per section."""

    language_model: LanguageModelSettings = setting("LanguageModel")
    context: ContextSettings = setting("Context")
    memory: MemorySettings = setting("Memory")
    personalities: Mapping[str, Any] = setting("Personalities", normalize=_personalities)
    audio: AudioSettings = setting("Audio")
    wake_word: WakeWordSettings = setting("WakeWord")
    listening: ListeningSettings = setting("Listening")
    speech_to_text: SpeechToTextSettings = setting("SpeechToText")
    text_to_speech: TextToSpeechSettings = setting("TextToSpeech")
    intents: IntentsSettings = setting("Intents")
    timers: TimersSettings = setting("Timers")
    announcements: AnnouncementsSettings = setting("Announcements")
    logging: LoggingSettings = setting("Logging")
    # wyoming-satellites in other rooms, for which this Elara is the hub
    satellites: tuple[SatelliteSettings, ...] = setting("Satellites", check=_unique_names)
