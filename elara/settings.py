"""Typed, frozen settings: one dataclass per config section, bound by elara.config."""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any
from urllib.parse import urlparse

import pydantic


def setting(key: str, *, doc: str, restart: bool = False, secret: bool = False,
            check: Callable[[Any], str | None] | None = None, default: Any = MISSING,
            **limits: Any) -> Any:
    """Declare a field's config key name; `doc`, its meaning for people (one line, in
    docs/configuration.md); `restart`, when a reload (SIGHUP) does not apply it; its range
    (`min`, `max`) or `choices`; a custom `check` or `normalize` (its docstring's first line says
    what it accepts, for the docs); and secrecy (never shown). A `default` is for a list's entries,
    whose keys may be left out; a section's values all come from the packaged appsettings.json."""
    if default is not MISSING:
        limits["default"] = default
    return field(default=default, metadata={"key": key, "doc": doc, "restart": restart,
                                            "secret": secret, "check": check, **limits})


def section(key: str) -> Any:
    """Declare a section of Settings by its config key; its class's docstring says what it holds."""
    return field(metadata={"key": key})


def _http_url(value: str) -> str | None:
    """An http(s) URL."""
    parsed = urlparse(value if "://" in value else f"http://{value}")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "expected an http(s) URL such as http://127.0.0.1:11434"
    return None


_DURATION = re.compile(r"^-?(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$|^-?\d+$")


def _keep_alive(value: float | str) -> str | None:
    """A duration such as "30m" or "1h", a number of seconds, or -1."""
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
    """`local`, `wyoming://host:port`, `tcp://host:port` or `unix:///path`."""
    try:
        parse_engine(value)
    except ValueError as exc:
        return str(exc)
    return None


def _not_blank(value: str) -> str | None:
    """Not empty."""
    return "expected a non-empty string" if not value.strip() else None


def _ollama_options(value: Mapping[str, Any]) -> dict[str, Any]:
    """Ollama's option names and types, as its official client declares them."""
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
    """Any of `card`, `phone`, `email`."""
    unknown = [v for v in value if v not in REDACTIONS]
    return f"expected a list of {', '.join(REDACTIONS)}" if unknown else None


_PRESET_KEYS = {"systemprompt": "SystemPrompt", "temperature": "Temperature",
                "maxreplytokens": "MaxReplyTokens"}


def _personalities(value: Mapping[str, Any]) -> dict[str, Any]:
    """{name: {SystemPrompt, Temperature 0–2, MaxReplyTokens > 0}}."""
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

    provider: str = setting(
        "Provider", choices=("auto", "ollama", "embedded"),
        doc="Who answers: `auto` is Ollama when it answers and has the model, else the embedded "
            "model (checked again between turns).")
    host: str = setting("Host", check=_http_url, doc="Ollama's address.")
    model: str = setting("Model", check=_not_blank,
                         doc="The Ollama model that answers (`ollama pull` it first).")
    api: str = setting(
        "Api", choices=("chat", "generate"),
        doc="`chat` sends structured messages (/api/chat); `generate` sends a User:/Assistant: "
            "transcript (/api/generate).")
    personality: str = setting(
        "Personality", check=_not_blank,
        doc="The preset that sets how Elara speaks, its temperature and reply length: `assistant`, "
            "`counselor`, `advisor`, `professional`, or one of `Personalities`.")
    system_prompt: str | None = setting(
        "SystemPrompt", doc="Your own instructions to the model, used instead of the personality's; "
                            "null: the personality's.")
    keep_alive: float | str | None = setting(
        "KeepAlive", check=_keep_alive,
        doc="How long Ollama keeps the model loaded after a request (`-1`: for ever).")
    timeout_seconds: float = setting(
        "TimeoutSeconds", min=1, max=3600,
        doc="Longest wait for Ollama to connect, or for the model to send the next piece of a reply.")
    options: Mapping[str, Any] = setting(
        "Options", normalize=_ollama_options,
        doc="Ollama model options (such as num_ctx), over the personality's temperature and reply "
            "length; the embedded model takes them too.")
    embedded_model: str | None = setting(
        "EmbeddedModel", check=_not_blank,
        doc="A GGUF chat model for the embedded provider (a path; `.gguf` may be left off); null: "
            "the built-in SmolLM2-135M-Instruct.")
    embedded_threads: int | None = setting(
        "EmbeddedThreads", min=1, max=256,
        doc="CPU threads llama.cpp uses for the embedded model; null: one a CPU, at most 4.")


@dataclass(frozen=True)
class ContextSettings:
    """`Context`: how much history reaches the model, and where and how it is stored."""

    last_n: int = setting(
        "LastN", min=0, max=1000,
        doc="At most this many of the latest stored messages reach the model with each question; "
            "the history grows by appending and, when full, drops its oldest in one block (down to "
            "about half), so the model need not read it all again each turn.")
    storage_root: str | None = setting(
        "StorageRoot", restart=True,
        doc="The directory of the encrypted history; null: `Conversation` under the cache directory "
            "(~/.cache/elara).")
    encryption_key: str = setting(
        "EncryptionKey", secret=True, check=_not_blank, restart=True,
        doc="The passphrase the history is encrypted with; left at the default with no history yet, "
            "a random key is generated into ~/.config/elara/key instead.")
    encryption_key_file: str | None = setting(
        "EncryptionKeyFile", restart=True,
        doc="A file holding the passphrase, used instead of EncryptionKey (the systemd credential "
            "`elara-key` wins over both).")
    max_history_tokens: int | None = setting(
        "MaxHistoryTokens", min=0,
        doc="Token budget for the history in the prompt (about 4 characters a token); the oldest "
            "exchanges are left out first; null: no budget.")
    retention_days: int | None = setting(
        "RetentionDays", min=1,
        doc="Delete turns older than this many days, at start and once a day; null: keep everything.")
    retention_keep_summaries: bool = setting(
        "RetentionKeepSummaries", doc="Keep the summaries of the turns retention deletes.")
    redact: tuple[str, ...] = setting(
        "Redact", check=_redactions,
        doc="What is masked in your words before they are stored or sent, and in her replies before "
            "they are stored: card numbers, phone numbers, email addresses.")


@dataclass(frozen=True)
class MemorySettings:
    """`Memory`: what Elara remembers beyond the last few turns."""

    summaries: bool = setting(
        "Summaries", doc="Summarise older turns as they pile up, so the model still hears of them.")
    summary_threshold: float = setting(
        "SummaryThreshold", min=0.1, max=1.0,
        doc="Summarise once the turns not yet summarised fill this share of Context.MaxHistoryTokens.")
    facts: str = setting(
        "Facts", choices=("model", "explicit", "off"),
        doc='Facts kept about you: `model` finds them after each turn and on request (the built-in '
            'model, which invents them, only on request), `explicit` only on "remember …" and '
            '"forget …", `off` none.')
    max_facts: int = setting("MaxFacts", min=1, max=1000,
                             doc="Most facts kept; the oldest goes first.")
    retrieval: bool = setting(
        "Retrieval", doc="Bring back older turns like the question, found by embedding similarity.")
    retrieval_top_k: int = setting("RetrievalTopK", min=1, max=20,
                                   doc="How many older turns retrieval brings back at most.")
    retrieval_min_score: float = setting(
        "RetrievalMinScore", min=0.0, max=1.0,
        doc="How similar to the question an older turn must be to be brought back.")
    embedding_model: str = setting("EmbeddingModel", check=_not_blank,
                                   doc="The Ollama embedding model retrieval uses.")


@dataclass(frozen=True)
class AudioSettings:
    """`Audio`: which devices, and how Elara keeps from hearing itself."""

    input_device: int | str | None = setting(
        "InputDevice", doc="The microphone, by name or index; null: the system's default.")
    output_device: int | str | None = setting(
        "OutputDevice", doc="The speaker, by name or index; null: the system's default.")
    output_latency_ms: int = setting(
        "OutputLatencyMs", min=10, max=1_000,
        doc="Output latency asked of the speaker: lower is heard sooner, with more risk of gaps on a "
            "busy machine.")
    speaker_tail_ms: int = setting(
        "SpeakerTailMs", min=0, max=10_000,
        doc="Without echo cancelling, how long after she stops speaking the microphone still counts "
            "as her echo: the wake word stays muted and speech counts as silence.")
    echo_cancellation: bool = setting(
        "EchoCancellation",
        doc="Take her own voice out of the microphone, with what she plays as the reference; off: "
            "she mutes the wake word while she speaks.")
    echo_canceller: str = setting(
        "EchoCanceller", choices=("speex", "webrtc"),
        doc="Which canceller: speexdsp's (keeps a person talking over her) or WebRTC's AEC3 (takes "
            "out more echo, and more of that person too).")
    barge_in: bool | None = setting(
        "BargeIn", doc="The wake word said over a reply or an announcement stops it; null: exactly "
                       "when echo cancellation is on.")
    stop_without_wake_word: bool = setting(
        "StopWithoutWakeWord",
        doc='"Stop" without the wake word silences a reply (needs echo cancellation) or a ringing '
            'timer.')


def _at_least_one(value: tuple[str, ...]) -> str | None:
    """At least one."""
    return None if value else "expected at least one model"


@dataclass(frozen=True)
class WakeWordSettings:
    """`WakeWord`: which wake words, and how sure the detector must be."""

    models: tuple[str, ...] = setting(
        "Models", check=_at_least_one,
        doc="The wake words: built-in names (such as hey_jarvis) or paths to openWakeWord .onnx "
            "models.")
    threshold: float = setting(
        "Threshold", min=0.0, max=1.0,
        doc="The score from which a detection is confident: it wakes at once, or after a looser "
            "check with ConfirmConfident.")
    trigger_level: int = setting(
        "TriggerLevel", min=1, max=50,
        doc="How many 80 ms frames in a row must score at or above Threshold to wake.")
    refractory_seconds: float = setting(
        "RefractorySeconds", min=0, max=60,
        doc="After a detection, how long before the wake word can be detected again.")
    vad_threshold: float = setting(
        "VadThreshold", min=0.0, max=0.99,
        doc="openWakeWord's Silero gate: a frame scores only if speech was heard just before it "
            "(0: off).")
    confirm_from: float = setting(
        "ConfirmFrom", min=0.0, max=1.0,
        doc="Scores from here up to Threshold wake only if Whisper hears the wake phrase (0: no "
            "check; at most Threshold).")
    confirm_confident: bool = setting(
        "ConfirmConfident",
        doc="Scores from Threshold up are checked too, by a looser rule (needs ConfirmFrom above 0 "
            "and a local Whisper).")
    confirm_beam_size: int = setting("ConfirmBeamSize", min=1, max=10,
                                     doc="The beam a local Whisper checks a wake with.")
    confirm_second_model: str | None = setting(
        "ConfirmSecondModel",
        doc="A second Whisper model that reads again what the first check turned down, and a "
            "question's doubtful words; null, empty or SpeechToText.Model: none.")
    verifiers: tuple[str, ...] = setting(
        "Verifiers",
        doc="Your voice's verifiers, made by `elara wake enroll`; relative paths are under the "
            "config directory.")
    shorten_pauses: bool = setting(
        "ShortenPauses",
        doc='A second copy of the models hears pauses inside speech cut short, so "Hey … Jarvis" '
            'still wakes (off with VadThreshold 0).')


@dataclass(frozen=True)
class ListeningSettings:
    """`Listening`: how an utterance is found after the wake word, and the follow-up window."""

    mode: str = setting(
        "Mode", choices=("wake_word", "continued"),
        doc="`wake_word`: every question starts with the wake word; `continued`: after a reply you "
            "may go on without it.")
    vad: str = setting(
        "Vad", choices=("silero", "energy"),
        doc="The voice-activity detector: `silero` (a small network) or `energy` (the signal's level, "
            "no model).")
    vad_threshold: float = setting(
        "VadThreshold", min=0.0, max=1.0,
        doc="The speech probability from which a frame counts as speech.")
    pre_roll_ms: int = setting("PreRollMs", min=0, max=5_000,
                               doc="Audio kept from before the detected start of speech.")
    end_silence_ms: int = setting(
        "EndSilenceMs", min=80, max=10_000,
        doc="Silence that ends an utterance when the words so far are not judged (or TurnJudgment "
            "is off).")
    min_speech_ms: int = setting("MinSpeechMs", min=0, max=10_000,
                                 doc="Speech needed for an utterance to count (a cough doesn't).")
    max_utterance_seconds: float = setting(
        "MaxUtteranceSeconds", min=1, max=120,
        doc="The longest utterance: it ends there, whatever follows.")
    no_speech_timeout_seconds: float = setting(
        "NoSpeechTimeoutSeconds", min=0.5, max=120,
        doc="Give up when nothing is said this long after the wake word.")
    follow_up_seconds: float = setting(
        "FollowUpSeconds", min=0, max=120,
        doc="How long she listens without the wake word after a reply (in `continued` mode, or "
            "when her reply asked a question).")
    turn_judgment: str = setting(
        "TurnJudgment", choices=("transcript", "off"),
        doc="`transcript`: each pause is judged by the words so far; `off`: every pause of "
            "EndSilenceMs ends the turn.")
    finished_ms: int = setting(
        "FinishedMs", min=0, max=10_000,
        doc="Silence that ends a turn whose words end a sentence (at most EndSilenceMs).")
    uncertain_pause_ms: int | None = setting(
        "UncertainPauseMs", min=0, max=10_000,
        doc="Silence that ends an undecided pause; null: 400 ms where going on over her reply is "
            "heard (echo cancelling), else 1300 ms.")
    max_pause_ms: int = setting(
        "MaxPauseMs", min=80, max=10_000,
        doc='The longest pause after unfinished words ("the capital of …"); at least EndSilenceMs.')
    speculative_reply: bool = setting(
        "SpeculativeReply",
        doc="Start the reply (the model and its first sentence, not yet heard) before the pause is "
            "over.")
    go_on_ms: int = setting(
        "GoOnMs", min=0, max=10_000,
        doc="After your speech ends, how long going on still continues the same question, her reply "
            "begun or not (0: off).")


@dataclass(frozen=True)
class SpeechToTextSettings:
    """`SpeechToText`: the Whisper model, how its output is trusted, and where it runs."""

    model: str = setting(
        "Model", check=_not_blank,
        doc="The Whisper model: `tiny.en`, `base`, or a CTranslate2 Whisper directory.")
    language: str | None = setting(
        "Language", doc="The language a multilingual model hears; null: it detects the language.")
    beam_size: int = setting(
        "BeamSize", min=1, max=10,
        doc="Whisper's beam size: wider hears more words, and answers later.")
    read_again_beam_size: int = setting(
        "ReadAgainBeamSize", min=0, max=10,
        doc="Words the end-of-turn judgment doubts are read again with this beam (0, or not above "
            "BeamSize with the same model: read once).")
    read_again_by_second_model: bool = setting(
        "ReadAgainBySecondModel",
        doc="Doubtful words are read again by WakeWord.ConfirmSecondModel (when it is another model) "
            "rather than by Model.")
    noise_suppression: int = setting(
        "NoiseSuppression", min=0, max=4,
        doc="WebRTC noise suppression of each utterance before a local Whisper reads it: 0 off, 1 "
            "(mild) to 4.")
    window_seconds: float = setting(
        "WindowSeconds", min=5, max=30,
        doc="The window Whisper reads a short utterance in: shorter is faster, and hears fewer words.")
    no_speech_threshold: float = setting(
        "NoSpeechThreshold", min=0.0, max=1.0,
        doc="Whisper's no-speech probability above which an utterance may be a phantom, and is "
            "dropped.")
    early_start_ms: int = setting(
        "EarlyStartMs", min=0, max=10_000,
        doc="Silence after which Whisper starts reading, before the utterance is known to be over.")
    engine: str = setting(
        "Engine", check=_engine,
        doc="Where speech is read: `local` (Whisper in Elara's process) or a Wyoming service.")
    fallback_to_local: bool = setting(
        "FallbackToLocal",
        doc="The local Whisper answers while the service is down (false: a spoken apology).")
    timeout_seconds: float = setting(
        "TimeoutSeconds", min=0.5, max=120,
        doc="Longest wait for each answer from the speech-to-text service.")


@dataclass(frozen=True)
class TextToSpeechSettings:
    """`TextToSpeech`: the Piper voice, its pace, and where it runs."""

    voice: str = setting(
        "Voice", check=_not_blank,
        doc="The Piper voice: a built-in name, or a .onnx file with its .onnx.json beside it.")
    length_scale: float = setting("LengthScale", min=0.3, max=3.0,
                                  doc="Speaking pace: above 1 slower, below 1 faster.")
    first_chunk_words: int = setting(
        "FirstChunkWords", min=0, max=100,
        doc="A long first sentence is cut at a clause after this many words, so she starts sooner "
            "(0: off).")
    engine: str = setting(
        "Engine", check=_engine,
        doc="Where speech is made: `local` (Piper in Elara's process) or a Wyoming service.")
    remote_voice: str | None = setting(
        "RemoteVoice", doc="The voice to ask the service for (null: its default); Voice stays the "
                           "local one.")
    fallback_to_local: bool = setting(
        "FallbackToLocal", doc="The local Piper voice answers while the service is down.")
    timeout_seconds: float = setting(
        "TimeoutSeconds", min=0.5, max=120,
        doc="Longest wait for each answer from the text-to-speech service.")


@dataclass(frozen=True)
class IntentsSettings:
    """`Intents`: everyday commands (timers, the time, "stop") answered without the model."""

    enabled: bool = setting(
        "Enabled", doc='Answer timers, the time and date, and "stop" without the model.')


@dataclass(frozen=True)
class TimersSettings:
    """`Timers`: how long a timer may run and how long one rings."""

    max_hours: float = setting("MaxHours", min=0.01, max=8_760,
                               doc="The longest timer Elara agrees to set.")
    ring_seconds: float = setting("RingSeconds", min=1, max=3_600,
                                  doc="How long a finished timer rings unless stopped.")


_SOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")


def _source_name(value: str) -> str | None:
    """Letters, digits, _ and -, at most 32, not `elara` (the built-in tools' name)."""
    if not _SOURCE_NAME.match(value):
        return "expected a short name of letters, digits, _ and - (it prefixes the server's tools)"
    return "`elara` names the built-in tools; choose another Name" if value.casefold() == "elara" else None


def _tool_patterns(value: tuple[str, ...]) -> str | None:
    """`source/tool` or `source/*` entries (`elara` is the built-in tools' source)."""
    bad = [v for v in value if v.count("/") != 1 or not all(v.split("/"))]
    return f"expected entries like \"home/turn_off\" or \"home/*\", not {bad[0]!r}" if bad else None


@dataclass(frozen=True)
class McpServerSettings:
    """One entry of `Tools.McpServers`: an MCP server whose tools the model may call."""

    name: str = setting("Name", check=_source_name,
                        doc="The server's name: its tools are offered as `Name_tool` and allowed as "
                            "`Name/tool`.")
    command: str | None = setting("Command", check=_not_blank, default=None,
                                  doc="The program that serves MCP on stdio (or give Url).")
    args: tuple[str, ...] = setting("Args", doc="The program's arguments.", default=())
    env: Mapping[str, str] | None = setting("Env", default=None,
                                            doc="Environment variables the program gets, besides "
                                                "PATH, HOME and the like.")
    url: str | None = setting("Url", check=_http_url,
                              doc="A streamable-HTTP MCP server's address (or give Command).", default=None)
    headers_file: str | None = setting(
        "HeadersFile", check=_not_blank, default=None,
        doc="A JSON file of HTTP headers sent to Url (such as Authorization), kept out of the config.")
    timeout_seconds: float = setting("TimeoutSeconds", min=0.5, max=600, default=15.0,
                                     doc="Longest wait for the server to start, or for one tool call.")


def _unique_sources(value: tuple[McpServerSettings, ...]) -> str | None:
    """Each Name once; each with either Command (stdio) or Url (HTTP)."""
    names = [s.name.casefold() for s in value]
    if len(set(names)) != len(names):
        return "each MCP server needs its own Name"
    both = [s.name for s in value if (s.command is None) == (s.url is None)]
    return f"{both[0]}: give either Command (stdio) or Url (streamable HTTP)" if both else None


@dataclass(frozen=True)
class ToolsSettings:
    """`Tools`: what the model may do — the built-in tools, MCP servers' tools, and which of them
    run without asking."""

    enabled: bool = setting("Enabled", doc="Offer tools to a model that can call them.")
    mcp_servers: tuple[McpServerSettings, ...] = setting(
        "McpServers", check=_unique_sources,
        doc="MCP servers whose tools the model may call: a list of {Name, Command, Args, Env} "
            "(stdio) or {Name, Url, HeadersFile} (streamable HTTP).")
    allow: tuple[str, ...] = setting(
        "Allow", check=_tool_patterns,
        doc="Tools that may run besides the built-in read-only ones: `source/tool` or `source/*` "
            "(`elara/*` is the built-in timers, reminders and facts).")
    confirm: tuple[str, ...] = setting(
        "Confirm", check=_tool_patterns,
        doc="Allowed tools Elara asks about aloud first, run only on a yes.")
    max_rounds: int = setting("MaxRounds", min=1, max=10,
                              doc="The most rounds of tool calls in one turn before she must answer.")


@dataclass(frozen=True)
class AnnouncementsSettings:
    """`Announcements`: what Elara says without being asked."""

    startup: bool = setting(
        "Startup", restart=True, doc="Say \"I'm ready.\" when the daemon starts listening.")


@dataclass(frozen=True)
class LoggingSettings:
    """`Logging`: how much the daemon says."""

    level: str = setting(
        "Level", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        doc="The daemon's log level (DEBUG shows what was said); other commands log warnings only, "
            "unless -v.")


def _satellite_uri(value: str) -> str | None:
    """`tcp://host:port`, `wyoming://host:port` or `unix:///path`."""
    try:
        address = None if value.strip().lower() == "local" else parse_engine(value)
    except ValueError as exc:
        return str(exc).replace("expected local, ", "expected ")
    return None if address is not None else "expected tcp://host:port or unix:///path"


@dataclass(frozen=True)
class SatelliteSettings:
    """One entry of `Satellites`: a wyoming-satellite in another room."""

    name: str = setting(
        "Name", check=_not_blank, restart=True,
        doc="The room's name: its turns and timers are marked with it, and its timers ring there.")
    uri: str = setting("Uri", check=_satellite_uri, restart=True,
                       doc="Where the satellite listens.")


def _unique_names(value: tuple[SatelliteSettings, ...]) -> str | None:
    """Each Name once."""
    names = [s.name.strip().casefold() for s in value]
    return "each satellite needs its own Name" if len(set(names)) != len(names) else None


@dataclass(frozen=True)
class Settings:
    """The whole configuration, one field per section."""

    language_model: LanguageModelSettings = section("LanguageModel")
    context: ContextSettings = section("Context")
    memory: MemorySettings = section("Memory")
    personalities: Mapping[str, Any] = setting(
        "Personalities", normalize=_personalities,
        doc="Your own personality presets by name, each with its SystemPrompt and, if you like, "
            "Temperature and MaxReplyTokens.")
    audio: AudioSettings = section("Audio")
    wake_word: WakeWordSettings = section("WakeWord")
    listening: ListeningSettings = section("Listening")
    speech_to_text: SpeechToTextSettings = section("SpeechToText")
    text_to_speech: TextToSpeechSettings = section("TextToSpeech")
    intents: IntentsSettings = section("Intents")
    timers: TimersSettings = section("Timers")
    tools: ToolsSettings = section("Tools")
    announcements: AnnouncementsSettings = section("Announcements")
    logging: LoggingSettings = section("Logging")
    satellites: tuple[SatelliteSettings, ...] = setting(
        "Satellites", check=_unique_names, restart=True,
        doc="wyoming-satellites in other rooms, for which this Elara is the hub: a list of "
            "{Name, Uri}.")


@dataclass(frozen=True)
class SettingInfo:
    """One setting as its metadata declares it, for the docs and the reload."""

    key: str  # the config key path: "Context.LastN", "Satellites[].Name"
    attribute: str | None  # its path in Settings ("context.last_n"); None inside a list's entries
    section: str  # the section it is listed under: "Context", "Satellites"
    type: Any
    metadata: Mapping[str, Any]


def each_setting() -> Iterator[SettingInfo]:
    """Every setting, section by section in Settings' order, a list's entry fields after the list."""
    hints = typing.get_type_hints(Settings)
    for top in fields(Settings):
        name, tp = top.metadata["key"], hints[top.name]
        if is_dataclass(tp):
            inner = typing.get_type_hints(tp)
            for f in fields(tp):
                key = f"{name}.{f.metadata['key']}"
                yield SettingInfo(key, f"{top.name}.{f.name}", name, inner[f.name], f.metadata)
                yield from _entry_settings(key, name, inner[f.name])
            continue
        yield SettingInfo(name, top.name, name, tp, top.metadata)
        yield from _entry_settings(name, name, tp)


def _entry_settings(key: str, section: str, tp: Any) -> Iterator[SettingInfo]:
    """The fields of a list's entries ("Satellites[].Name"), when the list holds objects."""
    entry = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else None
    if isinstance(entry, type) and is_dataclass(entry):
        inner = typing.get_type_hints(entry)
        for f in fields(entry):
            yield SettingInfo(f"{key}[].{f.metadata['key']}", None, section, inner[f.name], f.metadata)


def restart_only_keys() -> tuple[str, ...]:
    """The config keys of the settings a reload (SIGHUP) does not apply, as declared by
    `restart=True` ("Context.StorageRoot", …). A list's entries count as the list ("Satellites")."""
    return tuple(s.key for s in each_setting() if s.metadata.get("restart") and s.attribute is not None)
