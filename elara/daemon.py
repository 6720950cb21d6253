"""`elara run`: loads every model, opens the microphone and speaker, and runs the voice loop
until SIGTERM or SIGINT. The only module that knows every part."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from dataclasses import dataclass

from elara import wiring
from elara.audio.capture import Microphone
from elara.audio.playback import Speaker
from elara.dialogue import Dialogue
from elara.errors import LanguageModelError
from elara.settings import Settings
from elara.voice import models
from elara.voice.endpoint import Segmenter
from elara.voice.loop import VoiceLoop
from elara.voice.speech import SpeechSink
from elara.voice.stt import Transcriber, phantom_reason
from elara.voice.tts import Synthesizer
from elara.voice.vad import create_vad
from elara.voice.wake import WakeWordDetector

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Engines:
    """The loaded models."""

    wake: WakeWordDetector
    transcriber: Transcriber
    synthesizer: Synthesizer


def load_engines(settings: Settings) -> Engines:
    """Resolve and load every model; ModelNotFoundError / ModelLoadError (exit 78) name the key."""
    dirs = models.default_models_dirs()
    wake_records = models.resolve_wake_words(settings.wake_word.models, dirs)
    whisper = models.resolve_whisper(settings.speech_to_text.model, dirs)
    voice = models.resolve_voice(settings.text_to_speech.voice, dirs)
    ww, stt, tts = settings.wake_word, settings.speech_to_text, settings.text_to_speech
    wake = WakeWordDetector([r.path for r in wake_records], threshold=ww.threshold,
                            trigger_level=ww.trigger_level, refractory_seconds=ww.refractory_seconds)
    transcriber = Transcriber(whisper.path, language=stt.language, beam_size=stt.beam_size,
                              window_seconds=stt.window_seconds,
                              no_speech_threshold=stt.no_speech_threshold)
    synthesizer = Synthesizer(voice.path, voice.config_path, length_scale=tts.length_scale)
    log.info("models loaded: wake word %s, speech-to-text %s (%.1f s), voice %s (%.1f s)",
             ", ".join(r.name for r in wake_records), whisper.name, transcriber.load_seconds,
             voice.name, synthesizer.load_seconds)
    return Engines(wake=wake, transcriber=transcriber, synthesizer=synthesizer)


class Daemon:
    """The always-on assistant: one voice loop over one microphone and one speaker."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.started_at = time.monotonic()
        self._stop = asyncio.Event()
        self.loop: VoiceLoop | None = None

    def request_stop(self) -> None:
        """Ask the daemon to finish (what SIGTERM and SIGINT do)."""
        self._stop.set()

    async def run(self) -> int:
        """Start everything, run until asked to stop, shut down cleanly; returns the exit status."""
        s = self.settings
        store = wiring.open_store(s)  # a wrong key stops start-up before anything is loaded
        engines = await asyncio.to_thread(load_engines, s)
        llm = wiring.make_language_model(s)
        warming = asyncio.create_task(self._check_model(llm), name="model-check")
        speaker = Speaker(s.audio.output_device)
        microphone = Microphone(s.audio.input_device)
        speech = SpeechSink(engines.synthesizer, speaker,
                            first_chunk_words=s.text_to_speech.first_chunk_words)
        orchestrator = wiring.make_orchestrator(s, store, llm, speech)
        self.loop = VoiceLoop(
            dialogue=Dialogue.from_settings(s.listening, s.audio), wake=engines.wake,
            vad=create_vad(s.listening.vad), vad_threshold=s.listening.vad_threshold,
            segmenter=Segmenter.from_settings(s.listening, s.speech_to_text),
            transcriber=engines.transcriber,
            phantom_reason=lambda t: phantom_reason(
                t, no_speech_threshold=s.speech_to_text.no_speech_threshold),
            orchestrator=orchestrator, speech=speech, pre_roll_ms=s.listening.pre_roll_ms,
            speaker_tail_ms=s.audio.speaker_tail_ms,
            wake_phrases=tuple(name.replace("_", " ") for name in engines.wake.names))
        self._install_signals()
        await microphone.start()
        log.info("Elara is ready (started in %.1f s)", time.monotonic() - self.started_at)
        runner = asyncio.create_task(self.loop.run(microphone.frames()), name="voice-loop")
        stopper = asyncio.create_task(self._stop.wait(), name="stop")
        try:
            await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            log.info("stopping")
            runner.cancel()
            stopper.cancel()
            await asyncio.gather(runner, stopper, return_exceptions=True)
            await self.loop.shutdown()
            warming.cancel()
            await microphone.stop()
            await speaker.close()
            await llm.aclose()
        if runner.done() and not runner.cancelled() and runner.exception() is not None:
            raise runner.exception()
        log.info("stopped")
        return 0

    async def _check_model(self, llm) -> None:
        try:
            await llm.check()
            await llm.warm_up()
        except LanguageModelError as exc:
            # The daemon keeps running: turns apologise until the model is back.
            log.warning("language model not ready: %s", exc)

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
