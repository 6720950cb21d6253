"""Loading the configured voice engines: wake word, Whisper, Piper (blocking; seconds each)."""

from __future__ import annotations

from elara.settings import Settings
from elara.voice import models
from elara.voice.stt import Transcriber
from elara.voice.tts import Synthesizer
from elara.voice.wake import WakeWordDetector


def load_wake(settings: Settings) -> WakeWordDetector:
    """The configured wake-word models, loaded."""
    records = models.resolve_wake_words(settings.wake_word.models, models.default_models_dirs())
    ww = settings.wake_word
    return WakeWordDetector([r.path for r in records], threshold=ww.threshold,
                            trigger_level=ww.trigger_level, refractory_seconds=ww.refractory_seconds)


def load_transcriber(settings: Settings) -> Transcriber:
    """The configured Whisper model, loaded."""
    stt = settings.speech_to_text
    record = models.resolve_whisper(stt.model, models.default_models_dirs())
    return Transcriber(record.path, language=stt.language, beam_size=stt.beam_size,
                       window_seconds=stt.window_seconds, no_speech_threshold=stt.no_speech_threshold)


def load_synthesizer(settings: Settings) -> Synthesizer:
    """The configured Piper voice, loaded."""
    voice = models.resolve_voice(settings.text_to_speech.voice, models.default_models_dirs())
    return Synthesizer(voice.path, voice.config_path,
                       length_scale=settings.text_to_speech.length_scale)
