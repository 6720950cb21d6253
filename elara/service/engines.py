"""The speech engines, each loaded by one factory from its slice: the wake word, voice activity,
Whisper (and the second Whisper model), Piper, and the Wyoming services that may stand in for
Whisper and Piper; and the load check `elara models` and the doctor run on each model file.

`elara.voice.models` turns config values into ModelRecords without importing any engine; each
engine imports its library (openWakeWord, faster-whisper, Piper, ONNX Runtime) when constructed.
Loading blocks for seconds: the daemon calls these from a worker thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np

from elara.audio.frames import FRAME_SAMPLES, AudioFrame
from elara.errors import ConfigError, ElaraError, ModelLoadError, ModelNotFoundError, SpeechServiceError
from elara.service.paths import config_home, default_models_dirs
from elara.service.slices import (
    SecondCheckSlice,
    SpeechToTextSlice,
    TextToSpeechSlice,
    VadSlice,
    WakeWordSlice,
)
from elara.settings import (
    Settings,
    SpeechToTextSettings,
    TextToSpeechSettings,
    WakeWordSettings,
    parse_engine,
)
from elara.voice import models
from elara.voice.denoise import NoiseSuppressor
from elara.voice.models import ModelRecord
from elara.voice.remote import (
    FailoverSynthesizer,
    FailoverTranscriber,
    ServiceHealth,
    WyomingClient,
    WyomingSynthesizer,
    WyomingTranscriber,
    describe_info,
)
from elara.voice.stt import Transcriber
from elara.voice.tts import PiperSynthesizer
from elara.voice.vad import SileroVad, VoiceActivity, create_vad
from elara.voice.verifier import WakeVerifier
from elara.voice.wake import WakeWordDetector

log = logging.getLogger(__name__)

S = TypeVar("S")
T = TypeVar("T")

#: The setting that names the wake check's second model (its errors name it).
SECOND_CHECK_KEY = "WakeWord.ConfirmSecondModel"

# ---------------------------------------------------------------------------------------------
# from resolved model files


def wake_detector(records: Sequence[ModelRecord], wake: WakeWordSettings | None = None,
                  verifiers: Sequence[WakeVerifier] = ()) -> WakeWordDetector:
    """Resolved wake-word models, loaded into one detector tuned by `wake` (its defaults without)."""
    paths = [record.path for record in records]
    if wake is None:
        return WakeWordDetector(paths, verifiers=verifiers)
    return WakeWordDetector(paths, threshold=wake.threshold, trigger_level=wake.trigger_level,
                            refractory_seconds=wake.refractory_seconds, vad_threshold=wake.vad_threshold,
                            verifiers=verifiers, confirm_from=wake.confirm_from,
                            confirm_confident=wake.confirm_confident,
                            # the gate is what hears the pauses: without it there are none to shorten
                            shorten_pauses=wake.shorten_pauses and wake.vad_threshold > 0)


def verifier_paths(wake: WakeWordSettings) -> list[Path]:
    """`WakeWord.Verifiers` as files; relative paths are under the config directory."""
    return [config_home() / Path(p).expanduser() for p in wake.verifiers]


def transcriber(record: ModelRecord, stt: SpeechToTextSlice | None = None) -> Transcriber:
    """A resolved Whisper model, loaded as `stt` says (the Transcriber's defaults without)."""
    if stt is None:
        return Transcriber(record.path)
    clean = NoiseSuppressor(stt.noise_suppression) if stt.noise_suppression else None
    return Transcriber(record.path, language=stt.language, beam_size=stt.beam_size,
                       window_seconds=stt.window_seconds, no_speech_threshold=stt.no_speech_threshold,
                       clean=clean)


def synthesizer(record: ModelRecord, length_scale: float = 1.0) -> PiperSynthesizer:
    """A resolved Piper voice, loaded at `length_scale`."""
    if record.config_path is None:
        raise ModelNotFoundError(
            f"{record.config_key}: the Piper voice {record.path} has no config; put its "
            f"{record.path.name}.json next to it")
    return PiperSynthesizer(record.path, record.config_path, length_scale=length_scale)


def silero_vad(record: ModelRecord) -> SileroVad:
    """The resolved Silero VAD model, loaded."""
    return SileroVad(record.path)


# ---------------------------------------------------------------------------------------------
# each part's factory, from its slice


def load_wake_word(s: WakeWordSlice) -> WakeWordDetector:
    """The configured wake-word models, loaded with their verifiers."""
    records = models.resolve_wake_words(s.wake_word.models, default_models_dirs())
    verifiers = [WakeVerifier.load(p) for p in verifier_paths(s.wake_word)]
    return wake_detector(records, s.wake_word, verifiers)


def load_vad(s: VadSlice) -> VoiceActivity:
    """The configured voice-activity detector."""
    return create_vad(s.kind)


def load_whisper(s: SpeechToTextSlice) -> Transcriber:
    """The configured local Whisper model, loaded (through its noise suppression, if set)."""
    return transcriber(models.resolve_whisper(s.model, default_models_dirs()), s)


def load_speech_to_text(s: SpeechToTextSlice) -> Transcriber | FailoverTranscriber:
    """The configured speech-to-text engine: local Whisper, or a Wyoming service with local
    Whisper standing by (`SpeechToText.FallbackToLocal`)."""
    client = service_client("SpeechToText", s)
    if client is None:
        return load_whisper(s)
    local = _standby("SpeechToText", load_whisper, s) if s.fallback_to_local else None
    engine = FailoverTranscriber(WyomingTranscriber(client, language=s.language), local, ServiceHealth(),
                                 engine=s.engine, service="speech-to-text")
    engine.info = _describe(client, engine.health)
    return engine


def second_check_model(s: SecondCheckSlice) -> str | None:
    """The second Whisper model (`WakeWord.ConfirmSecondModel`): it reads again a wake window the
    first check turned down, and a question's doubtful words with
    `SpeechToText.ReadAgainBySecondModel`. None: not set, nothing for it to read, or the same
    model as `SpeechToText.Model`, which would only read it the same way again."""
    name = (s.model or "").strip()
    # only a local Whisper's words are read again (`listening.read_again`)
    reads_questions = s.reads_questions and s.reads_again and s.local_first
    if not name or (not s.checks_wakes and not reads_questions) or name == s.first_model.strip():
        return None
    return name


def load_second_check(s: SecondCheckSlice) -> Transcriber | None:
    """The second Whisper model (`second_check_model`) loaded, or None. Loaded for the wake
    phrases, which are English (`listening.read_again` tells it the questions' language)."""
    name = second_check_model(s)
    if name is None:
        return None
    record = models.resolve_whisper(name, default_models_dirs(), key=SECOND_CHECK_KEY)
    return Transcriber(record.path, language="en", beam_size=s.beam_size,
                       window_seconds=s.window_seconds, no_speech_threshold=s.no_speech_threshold)


def load_piper(s: TextToSpeechSlice) -> PiperSynthesizer:
    """The configured local Piper voice, loaded."""
    return synthesizer(models.resolve_voice(s.voice, default_models_dirs()), s.length_scale)


def load_text_to_speech(s: TextToSpeechSlice) -> PiperSynthesizer | FailoverSynthesizer:
    """The configured text-to-speech engine: local Piper, or a Wyoming service with the local
    voice standing by (`TextToSpeech.FallbackToLocal`)."""
    client = service_client("TextToSpeech", s)
    if client is None:
        return load_piper(s)
    local = _standby("TextToSpeech", load_piper, s) if s.fallback_to_local else None
    remote = WyomingSynthesizer(client, voice=s.remote_voice,
                                sample_rate=local.sample_rate if local is not None else 22_050)
    engine = FailoverSynthesizer(remote, local, ServiceHealth(), engine=s.engine, service="text-to-speech")
    engine.info = _describe(client, engine.health)
    if engine.info is not None:
        # wyoming-piper loads a voice on its first request (≈0.5 s): not on the first reply's time
        started = time.perf_counter()
        try:
            remote.synthesize("Ready.")
            engine.load_seconds = time.perf_counter() - started
        except SpeechServiceError as exc:
            engine.health.failed(exc)
            log.warning("%s", exc)
    return engine


def _standby(section: str, loader: Callable[[S], T], s: S) -> T | None:
    """The local engine that answers while the service is down, or None (logged) if it can't load."""
    try:
        return loader(s)
    except ElaraError as exc:
        log.warning("%s.FallbackToLocal: the local engine does not load, so nothing answers while the "
                    "service is down: %s", section, exc)
        return None


def _describe(client: WyomingClient, health: ServiceHealth) -> str | None:
    """The service's programs and models, asked at start-up; None (logged) when it does not
    answer — a service may start after Elara, and calls try it again."""
    started = time.perf_counter()
    try:
        info = describe_info(client.describe())
    except SpeechServiceError as exc:
        health.failed(exc)
        log.warning("%s", exc)
        return None
    log.info("%s at %s: %s (asked in %.3f s)", client.service, client.address, info,
             time.perf_counter() - started)
    return info


# ---------------------------------------------------------------------------------------------
# the Wyoming services


#: The engine sections that can name a Wyoming service, and the service each is.
SERVICES = {"SpeechToText": "speech-to-text", "TextToSpeech": "text-to-speech"}


class EngineSetting(Protocol):
    """Where an engine runs (`<section>.Engine`) and how long a call to its service may take."""

    @property
    def engine(self) -> str:
        """`local`, or the service's address."""

    @property
    def timeout_seconds(self) -> float:
        """How long one call to the service may take."""


def service_client(section: str, values: EngineSetting) -> WyomingClient | None:
    """A client for the service `<section>.Engine` names; None when the engine is local."""
    address = parse_engine(values.engine)
    if address is None:
        return None
    return WyomingClient(address, SERVICES[section], timeout=values.timeout_seconds,
                         setting=f"{section}.Engine (or set it to local)")


def remote_engines(settings: Settings) -> list[tuple[str, SpeechToTextSettings | TextToSpeechSettings,
                                                     WyomingClient]]:
    """The engines configured as Wyoming services: (section, its settings, a client for it)."""
    found = []
    for section, values in (("SpeechToText", settings.speech_to_text), ("TextToSpeech", settings.text_to_speech)):
        client = service_client(section, values)
        if client is not None:
            found.append((section, values, client))
    return found


# ---------------------------------------------------------------------------------------------
# checking


def check_loads(record: ModelRecord) -> float:
    """Load the model for real (and run it once on a little silence); returns the seconds it took.

    Raises ModelLoadError naming the config key and the file when it does not load.
    """
    silence = AudioFrame(np.zeros(FRAME_SAMPLES, dtype=np.int16), 0.0)
    started = time.perf_counter()
    try:
        if record.kind == "wake_word":
            wake_detector([record]).process(silence)
        elif record.kind == "speech_to_text":
            transcriber(record).transcribe(np.zeros(8_000, dtype=np.int16))
        elif record.kind == "text_to_speech":
            synthesizer(record).synthesize("Hello.")
        elif record.kind == "vad":
            silero_vad(record).speech_probability(silence)
        else:
            raise ValueError(f"unknown model kind {record.kind!r}")
    except ConfigError:  # already names the key and the file
        raise
    except Exception as exc:  # any failure to load is the model's problem here
        raise ModelLoadError(
            f"{record.config_key}: {record.name!r} ({record.path}) does not load: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return time.perf_counter() - started
