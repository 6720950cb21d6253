"""`elara run`: loads every model, opens the microphone and speaker, and runs the voice loop until
SIGTERM or SIGINT; reloads its configuration on SIGHUP; tells systemd how it is doing. The only
module that knows every part."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from dataclasses import dataclass

from elara import __version__, wiring
from elara.audio.capture import Microphone
from elara.audio.playback import Speaker
from elara.config import load_settings_with_sources
from elara.dialogue import Dialogue
from elara.errors import ElaraError, LanguageModelError
from elara.logs import configure as configure_logging
from elara.memory.manager import Memory
from elara.notify import SystemdNotifier
from elara.paths import status_socket
from elara.settings import Settings
from elara.status import StatusServer
from elara.voice.engines import load_synthesizer, load_transcriber, load_wake
from elara.voice.endpoint import Segmenter
from elara.voice.loop import VoiceLoop
from elara.voice.speech import SpeechSink
from elara.voice.stt import phantom_reason
from elara.voice.vad import create_vad
from elara.voice.wake import WakeWordDetector

log = logging.getLogger(__name__)

#: dialogue states in which background memory work is held
BUSY_STATES = frozenset({"listening", "transcribing", "thinking", "speaking"})

STATUS_TEXT = {
    "idle": "waiting for the wake word", "listening": "listening",
    "transcribing": "transcribing", "thinking": "thinking", "speaking": "speaking",
    "follow_up": "listening for a follow-up",
}


@dataclass
class Counters:
    """What the daemon itself counts (the loop counts the rest)."""

    reloads: int = 0
    rejected_reloads: int = 0


class Daemon:
    """The always-on assistant: one voice loop over one microphone and one speaker."""

    def __init__(self, settings: Settings, config_path: str | None = None,
                 config_files: tuple = ()) -> None:
        self.settings = settings
        self.config_path = config_path
        self.started_at = time.monotonic()
        self.notifier = SystemdNotifier()
        self.counters = Counters()
        self._stop = asyncio.Event()
        self._reload_requested = asyncio.Event()
        self.loop: VoiceLoop | None = None
        self.microphone: Microphone | None = None
        self.speaker: Speaker | None = None
        self._runner: asyncio.Task | None = None
        self._warming: asyncio.Task | None = None  # checking and loading the model in Ollama
        self._config_files: tuple[str, ...] = tuple(str(p) for p in config_files)

    def request_stop(self) -> None:
        """Ask the daemon to finish (what SIGTERM and SIGINT do)."""
        self._stop.set()

    async def run(self) -> int:
        """Start everything, run until asked to stop, shut down cleanly; returns the exit status."""
        s = self.settings
        self.store = wiring.open_store(s)  # a wrong key stops start-up before anything loads
        self.notifier.status("loading models")
        wake, transcriber, synthesizer = await asyncio.gather(
            asyncio.to_thread(load_wake, s), asyncio.to_thread(load_transcriber, s),
            asyncio.to_thread(load_synthesizer, s))
        log.info("models loaded: wake word %s, speech-to-text %s (%.1f s), voice %s (%.1f s)",
                 ", ".join(wake.names), s.speech_to_text.model, transcriber.load_seconds,
                 s.text_to_speech.voice, synthesizer.load_seconds)
        self.llm = wiring.make_language_model(s)
        self._warming = asyncio.create_task(self._check_model(self.llm), name="model-check")
        self.memory = await self._open_memory(s)
        self.monitor = wiring.make_monitor(s)
        self.speaker = Speaker(s.audio.output_device)
        self.microphone = Microphone(s.audio.input_device)
        self.speech = SpeechSink(synthesizer, self.speaker,
                                 first_chunk_words=s.text_to_speech.first_chunk_words)
        self.orchestrator = wiring.make_orchestrator(s, self.store, self.llm, self.speech,
                                                     self.memory, self.monitor)
        self.loop = VoiceLoop(
            dialogue=Dialogue.from_settings(s.listening, s.audio), wake=wake,
            vad=create_vad(s.listening.vad), vad_threshold=s.listening.vad_threshold,
            segmenter=Segmenter.from_settings(s.listening, s.speech_to_text),
            transcriber=transcriber, phantom_reason=self._phantom_filter(s),
            orchestrator=self.orchestrator, speech=self.speech,
            pre_roll_ms=s.listening.pre_roll_ms, speaker_tail_ms=s.audio.speaker_tail_ms,
            wake_phrases=_phrases(wake))
        self.loop.on_state = self._state_changed
        status = StatusServer(status_socket(), self.snapshot,
                              {"reload-memory": lambda: self.memory.reload_facts()})
        self._install_signals()
        await status.start()
        await self.microphone.start()
        self._runner = self._start_runner()
        # Only now is Elara really listening: models loaded, microphone open.
        self.notifier.ready(STATUS_TEXT["idle"])
        log.info("Elara %s is ready (started in %.1f s)", __version__, time.monotonic() - self.started_at)
        helpers = [asyncio.create_task(self._serve_reloads(), name="reloads"),
                   asyncio.create_task(self._daily_retention(), name="retention")]
        if self.notifier.watchdog_interval:
            helpers.append(asyncio.create_task(self._watchdog(), name="watchdog"))
        failure: BaseException | None = None
        try:
            failure = await self._wait_for_stop()
        finally:
            log.info("stopping")
            self.notifier.stopping()
            for task in (*helpers, self._runner, self._warming):
                task.cancel()
            await asyncio.gather(*helpers, self._runner, self._warming, return_exceptions=True)
            await self.loop.shutdown()
            await self.memory.worker.stop()
            await status.stop()
            await self.microphone.stop()
            await self.speaker.stop()
            await self.llm.aclose()
            self.notifier.close()
        if failure is not None:
            raise failure
        log.info("stopped")
        return 0

    async def _wait_for_stop(self) -> BaseException | None:
        stopper = asyncio.create_task(self._stop.wait())
        try:
            while True:
                runner = self._runner
                await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
                if stopper.done():
                    return None
                if runner is self._runner:  # not replaced by a reload: the loop ended
                    return runner.exception() if not runner.cancelled() else None
        finally:
            stopper.cancel()

    async def _open_memory(self, settings: Settings) -> Memory:
        memory = Memory(settings, self.store, lambda: self.llm)
        await asyncio.to_thread(memory.apply_retention)
        await memory.load()
        memory.worker.start()
        return memory

    async def _daily_retention(self) -> None:
        while True:
            await asyncio.sleep(24 * 3600)
            try:
                await asyncio.to_thread(self.memory.apply_retention)
            except ElaraError as exc:  # a store problem today; tomorrow may be better
                log.error("retention failed: %s", exc)

    def _state_changed(self, state: str) -> None:
        self.notifier.status(STATUS_TEXT.get(state, state))
        # From the wake word to the end of the spoken reply the CPU belongs to Whisper, the
        # model's answer and Piper; memory work waits for the gap after it.
        if state in BUSY_STATES:
            self.memory.worker.pause()
        else:
            self.memory.worker.resume()

    def _start_runner(self) -> asyncio.Task:
        return asyncio.create_task(self.loop.run(self.microphone.frames()), name="voice-loop")

    def _phantom_filter(self, settings: Settings):
        threshold = settings.speech_to_text.no_speech_threshold
        return lambda transcript: phantom_reason(transcript, no_speech_threshold=threshold)

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
        loop.add_signal_handler(signal.SIGHUP, self._reload_requested.set)

    # -- watchdog ------------------------------------------------------------------------------

    async def _watchdog(self) -> None:
        interval = self.notifier.watchdog_interval
        while True:
            # A hung audio loop stops the pings and systemd restarts us; a microphone being
            # reopened after it vanished is not hung, it is recovering.
            stalled = time.monotonic() - self.loop.last_progress > 2 * interval
            if not stalled or not self.microphone.is_open:
                self.notifier.watchdog()
            else:
                log.warning("the audio loop has made no progress for %.0f s", 2 * interval)
            await asyncio.sleep(interval)

    # -- reload --------------------------------------------------------------------------------

    async def _serve_reloads(self) -> None:
        while True:
            await self._reload_requested.wait()
            self._reload_requested.clear()
            await self.reload()

    async def reload(self) -> bool:
        """Read the configuration again and apply it; an invalid one is logged and not applied."""
        self.notifier.reloading()
        try:
            new, sources = await asyncio.to_thread(load_settings_with_sources, self.config_path)
            await self._apply(self.settings, new)
        except ElaraError as exc:
            self.counters.rejected_reloads += 1
            log.error("configuration reload rejected, keeping the running configuration: %s", exc)
            self.notifier.ready(STATUS_TEXT.get(self.loop.dialogue.state, ""))
            return False
        self.settings = new
        self._config_files = tuple(str(p) for p in sources.files)
        self.counters.reloads += 1
        log.info("configuration reloaded")
        self.notifier.ready(STATUS_TEXT.get(self.loop.dialogue.state, ""))
        return True

    async def _apply(self, old: Settings, new: Settings) -> None:
        """Everything that can fail (a model, a device) is prepared first; then it is swapped in."""
        parts: dict[str, object] = {}
        if new.wake_word != old.wake_word:
            wake = await asyncio.to_thread(load_wake, new)
            parts.update(wake=wake, wake_phrases=_phrases(wake))
        if new.speech_to_text != old.speech_to_text:
            parts["transcriber"] = await asyncio.to_thread(load_transcriber, new)
            parts["segmenter"] = Segmenter.from_settings(new.listening, new.speech_to_text)
        synthesizer = None
        if (new.text_to_speech.voice, new.text_to_speech.length_scale) != (
                old.text_to_speech.voice, old.text_to_speech.length_scale):
            synthesizer = await asyncio.to_thread(load_synthesizer, new)
        microphone = speaker = None
        if new.audio.input_device != old.audio.input_device:
            microphone = Microphone(new.audio.input_device)
        if new.audio.output_device != old.audio.output_device:
            speaker = Speaker(new.audio.output_device)
        llm = self.llm
        if new.language_model != old.language_model:
            llm = wiring.make_language_model(new)
        memory = self.memory
        if (new.memory, new.context) != (old.memory, old.context):
            memory = Memory(new, self.store, lambda: self.llm)
            await memory.load()

        # Nothing below can fail on bad settings: swap the new parts in.
        configure_logging(new.logging.level)
        for key in ("storage_root", "encryption_key", "encryption_key_file"):
            if getattr(new.context, key) != getattr(old.context, key):
                log.warning("Context.%s changed: it takes effect when Elara restarts",
                            "".join(w.title() for w in key.split("_")))
        if memory is not self.memory:
            await self.memory.worker.stop()
            self.memory = memory
            memory.worker.start()
            if self.loop.dialogue.state in BUSY_STATES:
                memory.worker.pause()
            self.orchestrator.observers = [memory.worker]
        else:
            await memory.reload_facts()  # `elara memory forget` from another process
        self.monitor.num_ctx = wiring.make_monitor(new).num_ctx
        await self.orchestrator.reconfigure(
            builder=wiring.make_builder(new, self.store, self.memory, self.monitor),
            renderer=wiring.make_renderer(new), llm=llm, context_size=new.context.last_n)
        if llm is not self.llm:
            old_llm, self.llm = self.llm, llm
            await old_llm.aclose()
            self._warming.cancel()  # a check of the old model is moot now
            self._warming = asyncio.create_task(self._check_model(llm), name="model-check")
        if new.listening != old.listening or new.audio != old.audio:
            parts.update(dialogue=Dialogue.from_settings(new.listening, new.audio),
                         segmenter=Segmenter.from_settings(new.listening, new.speech_to_text),
                         vad_threshold=new.listening.vad_threshold,
                         pre_roll_ms=new.listening.pre_roll_ms,
                         speaker_tail=new.audio.speaker_tail_ms / 1000)
            if new.listening.vad != old.listening.vad:
                parts["vad"] = create_vad(new.listening.vad)
        if new.speech_to_text.no_speech_threshold != old.speech_to_text.no_speech_threshold:
            parts["phantom_reason"] = self._phantom_filter(new)
        self.speech.reconfigure(synthesizer=synthesizer, player=speaker,
                                first_chunk_words=new.text_to_speech.first_chunk_words)
        if speaker is not None:
            old_speaker, self.speaker = self.speaker, speaker
            await old_speaker.close()
        if parts:
            self.loop.reconfigure(**parts)
        if microphone is not None:
            await self._swap_microphone(microphone)

    async def _swap_microphone(self, microphone: Microphone) -> None:
        old, old_runner = self.microphone, self._runner
        await microphone.start()
        self.microphone = microphone
        self._runner = self._start_runner()
        old_runner.cancel()
        await asyncio.gather(old_runner, return_exceptions=True)
        await old.stop()
        log.info("now listening on %s", microphone.device.label())

    # -- status --------------------------------------------------------------------------------

    def snapshot(self) -> dict:
        """What `elara status` shows."""
        s, loop = self.settings, self.loop
        c = loop.counters
        return {
            "state": loop.dialogue.state,
            "pid": os.getpid(),
            "version": __version__,
            "uptime_seconds": round(time.monotonic() - self.started_at, 1),
            "models": {
                "wake_word": list(loop.wake.names),
                "speech_to_text": s.speech_to_text.model,
                "voice": s.text_to_speech.voice,
                "language_model": s.language_model.model,
                "ollama": s.language_model.host,
            },
            "counters": {
                "wakes": c.wakes, "turns": c.turns,
                "false_wake_drops": c.no_speech + c.rejected_utterances,
                "dropped_frames": self.microphone.dropped_frames,
                "overflows": self.microphone.overflows,
                "model_errors": c.model_errors,
                "reloads": self.counters.reloads,
                "rejected_reloads": self.counters.rejected_reloads,
            },
            "last_turn": loop.last_timings,
            "context_window": _usage(self.monitor.last),
            "memory": {
                "facts": len(self.memory.facts.facts()) if self.memory.facts else None,
                "summarized_turns": (self.memory.summaries.latest.turns
                                     if self.memory.summaries and self.memory.summaries.latest else 0),
                "indexed_turns": len(self.memory.index) if self.memory.index is not None else None,
                "jobs_pending": self.memory.worker.pending,
                "jobs_done": self.memory.worker.counters.done,
                "jobs_failed": self.memory.worker.counters.failed,
            },
            "context": {"last_n": self.orchestrator.context_size,
                        "store": str(self.store.root)},
            "config_files": list(self._config_files),
        }


def _usage(usage) -> dict | None:
    if usage is None:
        return None
    return {"parts": dict(usage.parts), "total": usage.total, "num_ctx": usage.num_ctx,
            "fraction": round(usage.fraction, 3)}


def _phrases(wake: WakeWordDetector) -> tuple[str, ...]:
    return tuple(name.replace("_", " ") for name in wake.names)
