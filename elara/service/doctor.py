"""`elara doctor`: checks that Elara can run here, each one saying what is wrong and the fix.

Every check is a plain function returning `Check` values; nothing here prints, and nothing writes
to the conversation store or the configuration (the store is opened without creating its
directory or removing stale temporary files). Each check runs under a time limit (`bounded`), so
a hung sound server, model or Ollama cannot hang the doctor.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import shlex
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from elara.errors import (
    AudioDeviceError,
    ConfigError,
    ElaraError,
    LanguageModelError,
    StoreError,
    WrongKeyError,
)
from elara.settings import Settings

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elara.brain.ollama import ModelInfo
    from elara.voice.models import ModelRecord

T = TypeVar("T")

# Check names (the first word of each line `elara doctor` prints).
CONFIGURATION = "configuration"
INPUT_DEVICE = "input device"
OUTPUT_DEVICE = "output device"
MODELS = "models"  # only when the models could not be looked at (no valid configuration)
LANGUAGE_MODEL = "language model"
ENCRYPTION_KEY = "encryption key"
HISTORY = "history"
HISTORY_PERMISSIONS = "history permissions"
UNITS = "systemd units"
LISTENING = "listening setup"
SPEECH_SERVICE = "speech service"  # one check per engine set to a Wyoming service
SATELLITE = "satellite"  # one check per configured satellite
TOOLS = "tools"  # the built-in tools, then one check per MCP server

#: How a model kind is named in a check: `wake word hey_jarvis`, `speech to text tiny.en`, ...
MODEL_KINDS = {"wake_word": "wake word", "speech_to_text": "speech to text",
               "text_to_speech": "text to speech", "vad": "voice activity"}

# Time limits, in seconds.
CONFIG_SECONDS = 15.0
DEVICE_SECONDS = 15.0
MODEL_SECONDS = 60.0
OLLAMA_MAX_SECONDS = 5.0  # the HTTP timeout: min(LanguageModel.TimeoutSeconds, this)
STORE_SECONDS = 120.0
UNITS_SECONDS = 60.0
TOOLS_SECONDS = 120.0  # every MCP server starts within its TimeoutSeconds (at most 600)

NEEDS_CONFIG = "skipped: needs a valid configuration"
FIX_CONFIG_FIRST = "fix the configuration first (`elara config check` shows the problem)"

# The store removes temporary files older than five minutes when it opens. Its clock, set to the
# epoch, makes every file look new, so the doctor's open leaves them alone.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, whether it is fine, what was seen, and the fix when not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def passed(name: str, detail: str) -> Check:
    """A check that is fine."""
    return Check(name, True, detail)


def failed(name: str, detail: str, fix: str) -> Check:
    """A check that is not, with the fix."""
    return Check(name, False, detail, fix)


def bounded(seconds: float, function: Callable[[], T], on_timeout: Callable[[], T],
            on_error: Callable[[BaseException], T]) -> T:
    """`function()` in a daemon thread, waited for at most `seconds`.

    `on_timeout()` when it has not finished by then (the thread is left to finish or die with the
    process), `on_error(exc)` when it raised.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="elara-doctor-check", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        return on_timeout()
    if "error" in outcome:
        return on_error(outcome["error"])
    return outcome["value"]


def _bounded_checks(names: Iterable[str], seconds: float, function: Callable[[], list[Check]],
                    fix: str) -> list[Check]:
    """`bounded` for a check function returning Checks; a time-out or crash fails every name."""
    names = list(names)
    return bounded(
        seconds, function,
        lambda: [failed(name, f"no answer within {seconds:g} s", fix) for name in names],
        lambda exc: [failed(name, f"the check itself failed: {type(exc).__name__}: {exc}", fix)
                     for name in names])


# ---------------------------------------------------------------------------------------------
# 1. configuration


def check_config(config_path: str | os.PathLike[str] | None = None) -> tuple[Check, Settings | None]:
    """Load every configuration layer; the check and the settings (None when invalid)."""
    from elara.config import load_settings_with_sources

    try:
        settings, sources = load_settings_with_sources(config_path)
    except ElaraError as exc:
        return failed(CONFIGURATION, str(exc),
                      "correct that value in the file or the ELARA__ variable it comes from "
                      "(`elara config check` re-checks it)"), None
    files = ", ".join(str(path) for path in sources.files)
    layers = f"packaged defaults + {files}" if files else "packaged defaults only"
    return passed(CONFIGURATION, f"valid ({layers})"), settings


# ---------------------------------------------------------------------------------------------
# 2. sound devices


def check_devices(settings: Settings) -> list[Check]:
    """The configured microphone and speaker resolve to PortAudio devices."""
    from elara.audio.devices import CONFIG_KEYS, find_device

    checks = []
    devices: tuple[tuple[Literal["input", "output"], str, int | str | None], ...] = (
        ("input", INPUT_DEVICE, settings.audio.input_device),
        ("output", OUTPUT_DEVICE, settings.audio.output_device))
    for kind, name, spec in devices:
        key = CONFIG_KEYS[kind]
        try:
            device = find_device(spec, kind)
        except AudioDeviceError as exc:
            if exc.code == "portaudio_missing":
                fix = "install PortAudio: apt-get install libportaudio2"
            else:
                fix = (f"set {key} to one of the {kind} devices listed (a name or an index), "
                       "or to null for the default device")
            checks.append(failed(name, str(exc), fix))
            continue
        which = "the system default" if spec is None else f"{key} = {spec!r}"
        checks.append(passed(name, f"{device.label()} ({which})"))
    return checks


# ---------------------------------------------------------------------------------------------
# 3. models


def model_check_name(record: Any) -> str:
    """`wake word hey_jarvis`, `speech to text tiny.en`, ..."""
    return f"{MODEL_KINDS.get(record.kind, record.kind)} {record.name}"


def resolve_models(settings: Settings) -> list[Any]:
    """The configured models: a ModelRecord for each that resolves, a failed Check for each that
    doesn't, in the order wake words, Whisper, Piper voice, voice activity. The energy VAD needs
    no model and gives a passed Check."""
    from elara.service.paths import default_models_dirs
    from elara.voice import models

    dirs = default_models_dirs()
    found: list[Any] = []
    seen: set[Path] = set()

    def resolve(name: str, key: str, function: Callable[[], ModelRecord | None]) -> None:
        try:
            record = function()
        except ConfigError as exc:
            found.append(failed(name, str(exc),
                                f"install what the message names, or set {key} to a model that "
                                "resolves (`elara models` lists them)"))
            return
        if record is None:
            found.append(passed(name, "the energy detector needs no model"))
        elif record.path not in seen:
            seen.add(record.path)
            found.append(record)

    for value in settings.wake_word.models:
        resolve(f"wake word {value}", models.WAKE_WORD_KEY,
                functools.partial(models.resolve_wake_word, value, dirs))
    stt, tts, vad = settings.speech_to_text.model, settings.text_to_speech.voice, settings.listening.vad
    resolve(f"speech to text {stt}", models.SPEECH_TO_TEXT_KEY, lambda: models.resolve_whisper(stt, dirs))
    resolve(f"text to speech {tts}", models.TEXT_TO_SPEECH_KEY, lambda: models.resolve_voice(tts, dirs))
    resolve(f"voice activity {vad}", models.VAD_KEY, lambda: models.resolve_vad(vad))
    return found


def check_model(record: Any, load: Callable[[Any], float] | None = None) -> Check:
    """Load one resolved model for real (`engines.check_loads`) and say how long it took."""
    from elara.service.engines import check_loads

    load = load or check_loads
    name = model_check_name(record)
    try:
        seconds = load(record)
    except ElaraError as exc:
        return failed(name, str(exc),
                      f"reinstall it ({record.source}) or set {record.config_key} to another "
                      "model (`elara models` lists what loads)")
    where = record.source if record.source.startswith("package") else f"{record.source} {record.path}"
    return passed(name, f"loads in {seconds:.2f} s ({where})")


def _check_one_model(record: Any, load: Callable[[Any], float] | None) -> list[Check]:
    return [check_model(record, load)]


def check_models(settings: Settings, load: Callable[[Any], float] | None = None,
                 seconds: float = MODEL_SECONDS) -> list[Check]:
    """Every configured model resolves and loads, each load within `seconds`."""
    checks = []
    for item in resolve_models(settings):
        if isinstance(item, Check):
            checks.append(item)
            continue
        checks.extend(_bounded_checks(
            [model_check_name(item)], seconds, functools.partial(_check_one_model, item, load),
            f"check that the machine is not overloaded, or set {item.config_key} to a smaller model"))
    return checks


def check_listening(settings: Settings) -> Check:
    """The wake word and Whisper load as the daemon builds them (thresholds, gate, verifiers,
    beam, language, the second model), and the echo canceller it would run. With a remote speech
    engine this is the local Whisper standing by; the service has its own check."""
    from elara.service.engines import load_second_check, load_wake_word, load_whisper
    from elara.service.listening import question_reading, wake_phrases
    from elara.service.slices import SecondCheckSlice, SpeechToTextSlice, WakeWordSlice

    try:
        detector = load_wake_word(WakeWordSlice.of(settings))
        transcriber = load_whisper(SpeechToTextSlice.of(settings))
        second = load_second_check(SecondCheckSlice.of(settings))
    except ElaraError as exc:
        return failed(LISTENING, str(exc), "fix the WakeWord or SpeechToText setting the message names "
                      "(`elara config check`), or enroll again with `elara wake enroll`")
    again = question_reading(settings, transcriber, wake_phrases(detector), second=second).read_again
    detail = _wake_detail(settings, detector, second) + _whisper_detail(settings, transcriber, again)
    echo = _echo_detail(settings)
    if isinstance(echo, Check):
        return echo
    return passed(LISTENING, detail + echo)


def _wake_detail(settings: Settings, detector: Any, second: Any) -> str:
    """How the wake word listens: models, threshold, gate, verifiers, the Whisper check."""
    from elara.service.engines import verifier_paths

    wake = settings.wake_word
    gate = f", Silero gate {wake.vad_threshold:g}" if wake.vad_threshold > 0 else ""
    gate += ", pauses inside speech shortened" if detector.shortens_pauses else ""
    detail = (f"{', '.join(detector.names)} at threshold {wake.threshold:g} × {wake.trigger_level} "
              f"frame{'s' if wake.trigger_level > 1 else ''}{gate}; ")
    if detector.verified:
        paths = ", ".join(str(p) for p in verifier_paths(wake))
        detail += f"verifier for {', '.join(detector.verified)} ({paths}); "
    else:
        detail += "no verifier (optional: `elara wake enroll` trains one for your voice); "
    if wake.confirm_from > 0:
        detail += (f"Whisper checks scores from {wake.confirm_from:g} (beam {wake.confirm_beam_size})"
                   + (f", those from {wake.threshold:g} too" if wake.confirm_confident else "")
                   + (f", Whisper {wake.confirm_second_model} reading again what it turns down"
                      if second is not None else "") + "; ")
    return detail


def _whisper_detail(settings: Settings, transcriber: Any, again: Any) -> str:
    """How a question is read: the model, language, beam, the second reading, noise suppression."""
    stt = settings.speech_to_text
    by_second = again is not None and again.again.model_dir != transcriber.model_dir
    reader = f"by Whisper {settings.wake_word.confirm_second_model} " if by_second else ""
    return (f"Whisper {stt.model}, language {transcriber.language}, beam {transcriber.beam_size}"
            + (f" (doubtful words read again {reader}with beam {again.again.beam_size}, the likeliest reading kept)"
               if again is not None else "")
            + (f", WebRTC noise suppression {stt.noise_suppression}" if transcriber.clean is not None else "")
            + "; ")


def _echo_detail(settings: Settings) -> str | Check:
    """Echo cancelling and barge-in as configured; a failed check when the canceller does not load."""
    from elara.service.build import load_canceller
    from elara.service.slices import EchoSlice
    from elara.voice.echo import CANCELLER_NEEDS

    audio = settings.audio
    if audio.echo_cancellation:
        try:
            load_canceller(EchoSlice.of(settings))
        except (ImportError, OSError) as exc:
            return failed(LISTENING, f"echo cancellation is on but the {audio.echo_canceller} canceller "
                          f"(Audio.EchoCanceller) does not load: {exc}",
                          f"run scripts/setup (it installs {CANCELLER_NEEDS[audio.echo_canceller]}), "
                          "set Audio.EchoCanceller to the other one, or set Audio.EchoCancellation "
                          "to false")
        detail = f"echo cancellation {audio.echo_canceller}"
        if audio.stop_without_wake_word:
            detail += ", \"stop\" heard without the wake word"
    else:
        detail = "echo cancellation off (Audio.EchoCancellation): the wake word is muted while Elara speaks"
    barge_in = audio.echo_cancellation if audio.barge_in is None else audio.barge_in
    return detail + f", barge-in {'on' if barge_in else 'off'}"


def check_speech_services(settings: Settings) -> list[Check]:
    """Each engine set to a Wyoming service answers `describe`, and says what it runs."""
    import time

    from elara.service.engines import remote_engines
    from elara.voice.remote import describe_info

    checks = []
    for section, values, client in remote_engines(settings):
        name = f"{SPEECH_SERVICE} {client.service}"
        key, value = f"{section}.Engine", values.engine
        standby = (f"the local engine answers while it is down ({section}.FallbackToLocal)"
                   if values.fallback_to_local
                   else f"nothing answers while it is down ({section}.FallbackToLocal is false)")
        started = time.perf_counter()
        try:
            info = describe_info(client.describe())
        except ElaraError as exc:
            checks.append(failed(name, f"{exc}; {standby}",
                                 f"start the service at {value}, or set {key} to where it runs (or local)"))
            continue
        checks.append(passed(name, f"{value} answers in {time.perf_counter() - started:.3f} s: {info}; {standby}"))
    return checks


def check_satellites(settings: Settings) -> list[Check]:
    """Each configured satellite answers `describe` (which does not take it from a running hub)."""
    from elara.settings import parse_engine
    from elara.voice.remote import WyomingClient

    checks = []
    for satellite in settings.satellites:
        name = f"{SATELLITE} {satellite.name}"
        address = parse_engine(satellite.uri)
        assert address is not None, "checked when the settings were read"
        try:
            info = WyomingClient(address, f"satellite {satellite.name}", timeout=5.0,
                                 setting="its Uri in Satellites").describe()
        except ElaraError as exc:
            checks.append(failed(name, str(exc),
                                 f"start wyoming-satellite at {satellite.uri}, or fix its Uri in Satellites"))
            continue
        if info.satellite is None:
            checks.append(failed(name, f"{satellite.uri} answers but is not a satellite",
                                 "point its Uri in Satellites at a wyoming-satellite"))
            continue
        area = f" in {info.satellite.area}" if info.satellite.area else ""
        checks.append(passed(name, f"{satellite.uri} is {info.satellite.name!r}{area}"))
    return checks


# ---------------------------------------------------------------------------------------------
# 4. Ollama


def ollama_timeout(settings: Settings) -> float:
    """The doctor's HTTP timeout: LanguageModel.TimeoutSeconds, at most OLLAMA_MAX_SECONDS."""
    return min(float(settings.language_model.timeout_seconds), OLLAMA_MAX_SECONDS)


def check_language_model(settings: Settings) -> Check:
    """Which model answers (`LanguageModel.Provider`) and that it can: Ollama at LanguageModel.Host
    with LanguageModel.Model pulled, or the embedded model loading; `auto` passes with the
    embedded model when Ollama is away, saying why and how to get better answers."""
    from elara.service.answering import make_ollama
    from elara.service.slices import LanguageModelSlice

    lm = settings.language_model
    if lm.provider == "embedded":
        return check_embedded_model(settings, "LanguageModel.Provider is embedded")
    # the daemon's Ollama adapter, with the doctor's shorter wait
    shorter = dataclasses.replace(lm, timeout_seconds=ollama_timeout(settings))
    llm = make_ollama(LanguageModelSlice(shorter, settings.personalities))

    async def ask() -> ModelInfo:
        try:
            return await llm.check()
        finally:
            await llm.aclose()

    try:
        info = asyncio.run(ask())
    except LanguageModelError as exc:
        fixes = {
            "unreachable": "start Ollama (`ollama serve`, or `systemctl start ollama`), or set "
                           "LanguageModel.Host to where it runs",
            "model_missing": f"run `ollama pull {lm.model}`, or set LanguageModel.Model to a "
                             "model `ollama list` shows",
            "timeout": "check `ollama ps` and Ollama's log; a busy server may need a higher "
                       "LanguageModel.TimeoutSeconds",
        }
        fix = fixes.get(exc.code, "check Ollama's log, LanguageModel.Host and LanguageModel.Model")
        if lm.provider == "auto":
            fallback = check_embedded_model(settings, str(exc))
            if fallback.ok:
                return passed(LANGUAGE_MODEL, f"{fallback.detail}; for better answers: {fix}")
            return fallback
        return failed(LANGUAGE_MODEL, str(exc), fix)
    about = ", ".join(part for part in (info.family, info.parameter_size, info.quantization) if part)
    tools = ""
    if settings.tools.enabled:
        tools = ("; it calls tools" if info.tools else
                 "; it cannot call tools (no `tools` capability): timers and the like work only as "
                 "spoken commands; a model with tools (llama3.1, qwen2.5) can act on any phrasing")
    return passed(LANGUAGE_MODEL, f"Ollama at {lm.host} answers with {info.name}"
                  + (f" ({about})" if about else "") + tools)


def check_embedded_model(settings: Settings, why: str) -> Check:
    """The embedded GGUF model resolves and loads (`why` says why it is the one answering)."""
    from elara.brain import embedded

    async def load() -> str:
        model = await asyncio.to_thread(embedded.load_embedded, settings)
        try:
            return model.model
        finally:
            await model.aclose()

    try:
        name = asyncio.run(load())
    except ElaraError as exc:
        return failed(LANGUAGE_MODEL, str(exc),
                      "set LanguageModel.EmbeddedModel to a GGUF chat model file, or null for the "
                      "built-in one (scripts/setup installs it)")
    detail = f"the built-in model {name} answers ({why})"
    if settings.tools.enabled:
        detail += "; " + embedded.NO_TOOLS.format(accuracy=embedded.BUILTIN_TOOL_ACCURACY)
    if settings.memory.retrieval:
        detail += ("; Memory.Retrieval needs Ollama's embeddings "
                   f"({settings.memory.embedding_model}) and waits for it")
    return passed(LANGUAGE_MODEL, detail)


def check_tools(settings: Settings) -> list[Check]:
    """The built-in tools and which of them run; each MCP server starts and lists its tools."""
    from elara.service.build import close_tool_servers, open_tool_servers
    from elara.service.slices import ToolServersSlice
    from elara.tools.policy import ToolPolicy
    from elara.tools.specs import BUILTIN_SPECS

    t = settings.tools
    if not t.enabled:
        return [passed(TOOLS, "off (Tools.Enabled is false): the model is offered no tools")]
    policy = ToolPolicy(t.allow, t.confirm)

    def listing(specs: Iterable[Any]) -> str:
        marks = {(True, False): "", (True, True): " (asks first)", (False, False): " (not allowed)",
                 (False, True): " (not allowed)"}
        return ", ".join(f"{s.tool}{marks[policy.allowed(s), policy.confirms(s)]}" for s in specs) or "none"

    checks = [passed(TOOLS, f"built in: {listing(BUILTIN_SPECS)}")]

    async def servers() -> list[Check]:
        started = await open_tool_servers(ToolServersSlice.of(settings))
        try:
            return [_server_check(server.name, server.status(), listing(server.specs()))
                    for server in started]
        finally:
            await close_tool_servers(started)

    return checks + asyncio.run(servers())


def _server_check(name: str, status: dict[str, Any], tools: str) -> Check:
    check = f"{TOOLS}: {name}"
    if status.get("state") != "up":
        return failed(check, f"MCP server {name} did not start: {status.get('last_error') or 'no answer'}",
                      f"check Tools.McpServers ({name}): run its Command by hand, or open its Url")
    return passed(check, f"MCP server {name}: {tools} (allow with Tools.Allow \"{name}/…\")")


# ---------------------------------------------------------------------------------------------
# 5. the encryption key


def check_encryption_key(settings: Settings) -> Check:
    """Where the history's key comes from (elara.service.keys, generating nothing); the published default
    passphrase fails, with the fix."""
    from elara.service import answering, keys

    try:
        key = keys.resolve(settings)
    except ConfigError as exc:
        return failed(ENCRYPTION_KEY, str(exc),
                      "fix the key file's path or permissions (mode 0600, owned by this user)")
    if key.source.kind == keys.GENERATED:
        return passed(ENCRYPTION_KEY, f"from {key.source.describe()}; keep a copy somewhere safe: "
                                      "losing it loses the history")
    if key.source.kind != keys.DEFAULT:
        return passed(ENCRYPTION_KEY, f"from {key.source.describe()}")
    fix = ("set Context.EncryptionKey to a secret passphrase (in a config file only you can "
           "read, or ELARA__Context__EncryptionKey), or Context.EncryptionKeyFile, or a systemd "
           "credential `elara-key`")
    try:
        history = keys.holds_messages(answering.store_root(settings))
    except ConfigError:
        history = True
    if history:
        fix += ("; history written with the old key won't decrypt with the new one: `elara "
                "history rekey --to-key-file PATH` re-encrypts it (or export it first, or "
                "`elara history purge --older-than 0d`)")
    else:
        fix += (f"; or just start Elara (`elara run`, `elara ask`): with no history yet it "
                f"generates a random key into {keys.generated_key_path()}")
    return failed(
        ENCRYPTION_KEY,
        "Context.EncryptionKey is the default passphrase, which anyone can read: the history "
        "is not private", fix)


# ---------------------------------------------------------------------------------------------
# 6. the conversation store


class _DropRecords(logging.Filter):
    """Keeps a logger quiet while the doctor reports the same things itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


def check_store(settings: Settings) -> list[Check]:
    """The history decrypts with the configured key and its permissions are private.

    Reads only: a store directory that does not exist yet is fine and is not created.
    """
    from elara.service import answering

    root = answering.store_root(settings)
    if not os.path.lexists(root):
        return [passed(HISTORY, f"no history yet ({root} does not exist; Elara creates it on first use)")]
    if not root.is_dir():
        return [failed(HISTORY, f"the history path {root} is not a directory",
                       "move it away, or set Context.StorageRoot to a directory")]
    return [check_store_decrypts(settings, root), check_store_permissions(root)]


def check_store_decrypts(settings: Settings, root: Path) -> Check:
    """Open the existing store at `root` with the configured key and try every message file."""
    from elara.conversation.store import ConversationStore
    from elara.service import keys

    store_log = logging.getLogger("elara.conversation.store")
    quiet = _DropRecords()
    store_log.addFilter(quiet)  # the default-key and skipped-file warnings are reported below
    try:
        try:
            key = keys.resolve(settings)  # generates nothing
            store = ConversationStore(root, key.passphrase, clock=lambda: _EPOCH)
            report = store.verify()
        except ConfigError as exc:
            return failed(HISTORY, str(exc), "fix the key file (see the encryption key check)")
        except WrongKeyError as exc:
            return failed(HISTORY, f"{exc} (the key now comes from {key.source.describe()})",
                          "set Context.EncryptionKey (or Context.EncryptionKeyFile) to the "
                          "passphrase the history was written with")
        except StoreError as exc:
            return failed(HISTORY, str(exc),
                          f"make {root} readable by the user running Elara (`chmod 700 "
                          f"{shlex.quote(str(root))}`), or set Context.StorageRoot")
    finally:
        store_log.removeFilter(quiet)
    total = report.readable + len(report.unreadable)
    if report.unreadable:
        return failed(
            HISTORY,
            f"{len(report.unreadable)} of {total} message files in {root} don't decrypt or "
            "parse (damaged, or written with another key); Elara skips them",
            "run `elara history verify` to see which, then move them out of the directory")
    if not total:
        return passed(HISTORY, f"no messages yet ({root})")
    return passed(HISTORY, f"all {total} messages decrypt ({root})")


def _user_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def check_store_permissions(root: Path) -> Check:
    """The directory is mode 0700 and owned by this user; each message file is mode 0600 and ours."""
    from elara.conversation.store import NAME_PATTERN

    uid = os.getuid()
    me = _user_name(uid)
    quoted = shlex.quote(str(root))
    problems: list[str] = []
    fixes: list[str] = []
    try:
        info = root.stat()
        wrong_mode: list[tuple[str, int]] = []
        foreign: list[str] = []
        files = 0
        with os.scandir(root) as entries:
            for entry in entries:
                if not NAME_PATTERN.fullmatch(entry.name):
                    continue
                st = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    continue
                files += 1
                if stat.S_IMODE(st.st_mode) != 0o600:
                    wrong_mode.append((entry.name, stat.S_IMODE(st.st_mode)))
                if st.st_uid != uid:
                    foreign.append(entry.name)
    except OSError as exc:
        return failed(HISTORY_PERMISSIONS, f"cannot read {root}: {exc.strerror or exc}",
                      f"sudo chown -R {me}: {quoted} && chmod 700 {quoted}")

    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != uid:
        problems.append(f"{root} is owned by {_user_name(info.st_uid)}, not {me}")
    if foreign:
        problems.append(f"{len(foreign)} message files are owned by another user (e.g. {min(foreign)})")
    if info.st_uid != uid or foreign:
        fixes.append(f"sudo chown -R {me}: {quoted}")
    if mode != 0o700:
        problems.append(f"{root} has mode {mode:04o}, not 0700")
        fixes.append(f"chmod 700 {quoted}")
    if wrong_mode:
        name, bad = min(wrong_mode)
        problems.append(f"{len(wrong_mode)} message files are not mode 0600 (e.g. {name} is {bad:04o})")
        fixes.append(f"chmod 600 {quoted}/*.json")
    if problems:
        return failed(HISTORY_PERMISSIONS, "; ".join(problems), " && ".join(fixes))
    return passed(HISTORY_PERMISSIONS,
                  f"directory 0700 and {files} message files 0600, all owned by {me}")


# ---------------------------------------------------------------------------------------------
# 7. systemd units


def check_units(config_path: str | os.PathLike[str] | None = None) -> Check:
    """The packaged systemd units render (with `--config config_path`, if given) and pass
    `systemd-analyze verify` (elara.service.units). Renders into a temporary directory only."""
    try:
        from elara.service.units import verify_units
    except ImportError as exc:
        return failed(UNITS, f"unit check unavailable ({exc})",
                      "update Elara to a version with elara/service/units.py; meanwhile check the units "
                      "with `systemd-analyze verify`")
    try:
        with tempfile.TemporaryDirectory(prefix="elara-doctor-") as tmp:
            explicit = config_path or os.environ.get("ELARA_CONFIG")
            config = Path(explicit).expanduser() if explicit else None
            problems = list(verify_units(Path(tmp), config=config))
    except (ElaraError, OSError, ValueError) as exc:
        return failed(UNITS, f"the units could not be checked: {exc}",
                      "install systemd (`systemd-analyze`) or check the units by hand")
    if problems:
        return failed(UNITS, "; ".join(problems),
                      "fix what `systemd-analyze verify` reports in the units under systemd/")
    return passed(UNITS, "elara.service and elara-system.service verify")


# ---------------------------------------------------------------------------------------------
# all of them


def run_checks(config_path: str | os.PathLike[str] | None = None, *,
               report: Callable[[Check], None] | None = None,
               load_model: Callable[[Any], float] | None = None) -> list[Check]:
    """Run every check in order; `report` is called with each as it finishes.

    Checks that need settings fail with NEEDS_CONFIG when the configuration is invalid.
    `load_model` replaces `engines.check_loads` (tests share one load per model).
    """
    results: list[Check] = []

    def emit(checks: Iterable[Check]) -> None:
        for check in checks:
            results.append(check)
            if report is not None:
                report(check)

    config = bounded(
        CONFIG_SECONDS, lambda: check_config(config_path),
        lambda: (failed(CONFIGURATION, f"reading the configuration took over {CONFIG_SECONDS:g} s",
                        "check the config files are ordinary files (not a pipe or a hung mount)"), None),
        lambda exc: (failed(CONFIGURATION, f"{type(exc).__name__}: {exc}",
                            "check the config files (`elara config check`)"), None))
    emit([config[0]])
    settings = config[1]
    if settings is None:
        emit(failed(name, NEEDS_CONFIG, FIX_CONFIG_FIRST)
             for name in (INPUT_DEVICE, OUTPUT_DEVICE, MODELS, LISTENING, LANGUAGE_MODEL, TOOLS, ENCRYPTION_KEY,
                          HISTORY))
    else:
        emit(_bounded_checks((INPUT_DEVICE, OUTPUT_DEVICE), DEVICE_SECONDS,
                             lambda: check_devices(settings),
                             "check the sound server (PulseAudio/PipeWire) is running for this user"))
        emit(check_models(settings, load_model))
        emit(_bounded_checks((LISTENING,), MODEL_SECONDS, lambda: [check_listening(settings)],
                             "check that the machine is not overloaded"))
        emit(_bounded_checks((SPEECH_SERVICE,), MODEL_SECONDS, lambda: check_speech_services(settings),
                             "check the speech services answer (their logs)"))
        emit(_bounded_checks((SATELLITE,), MODEL_SECONDS, lambda: check_satellites(settings),
                             "check the satellites answer (their logs)"))
        seconds = 2 * ollama_timeout(settings) + 5
        emit(_bounded_checks((LANGUAGE_MODEL,), seconds, lambda: [check_language_model(settings)],
                             "check Ollama (`ollama ps`, its log) and LanguageModel.Host"))
        emit(_bounded_checks((TOOLS,), TOOLS_SECONDS, lambda: check_tools(settings),
                             "check the MCP servers in Tools.McpServers start by hand"))
        emit([check_encryption_key(settings)])
        emit(_bounded_checks((HISTORY,), STORE_SECONDS, lambda: check_store(settings),
                             "check the disk holding Context.StorageRoot"))
    emit(_bounded_checks((UNITS,), UNITS_SECONDS, lambda: [check_units(config_path)],
                         "run `systemd-analyze verify` on the units by hand"))
    return results
