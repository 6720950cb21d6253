"""`elara run`: builds the runtime, runs the voice loop until SIGTERM or SIGINT, reloads the
configuration on SIGHUP, tells systemd how it is doing. It owns the lifecycle only; every part is
built in `elara.service.build`."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elara import __version__
from elara.brain.providers import AutoLanguageModel, Provider
from elara.config import load_settings_with_sources
from elara.conversation.prompts import utc_now
from elara.errors import ElaraError
from elara.service import keys
from elara.service.answering import open_store_with_key
from elara.service.build import Runtime, build, close_replaced
from elara.service.heap import HeapTrimmer
from elara.service.logs import configure as configure_logging
from elara.service.notify import SystemdNotifier
from elara.service.paths import status_socket
from elara.service.status import StatusServer
from elara.settings import Settings
from elara.skills.announcements import STARTUP, Announcement
from elara.skills.timers import Timekeeper, timer_status
from elara.voice.loop import VoiceLoop
from elara.voice.satellites import Room

log = logging.getLogger(__name__)

#: dialogue states in which background memory work is held
BUSY_STATES = frozenset({"listening", "transcribing", "thinking", "speaking", "announcing"})

STATUS_TEXT = {
    "idle": "waiting for the wake word", "listening": "listening",
    "transcribing": "transcribing", "thinking": "thinking", "speaking": "speaking",
    "follow_up": "listening for a follow-up", "announcing": "announcing",
}

#: how long retention waits between passes
RETENTION_INTERVAL = 24 * 3600


@dataclass
class Counters:
    """What the daemon itself counts (the loop counts the rest)."""

    reloads: int = 0
    rejected_reloads: int = 0


class Daemon:
    """The always-on assistant: one voice loop over one runtime, swapped whole on reload."""

    def __init__(self, settings: Settings, config_path: str | None = None,
                 config_files: tuple[object, ...] = (), *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.config_path = config_path
        self.clock = clock
        self.started_at = clock()
        self.notifier = SystemdNotifier()
        self.counters = Counters()
        self.heap = HeapTrimmer()
        self.runtime: Runtime | None = None
        self.loop: VoiceLoop | None = None
        #: a voice loop per satellite's room, by name
        self.room_loops: dict[str, VoiceLoop] = {}
        self._config_files = tuple(str(p) for p in config_files)
        self._stop = asyncio.Event()
        self._reload_requested = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._model_check: asyncio.Task[None] | None = None
        self._checked_model: Provider | None = None

    def request_stop(self) -> None:
        """Ask the daemon to finish (what SIGTERM and SIGINT do)."""
        self._stop.set()

    async def run(self) -> int:
        """Start everything, run until asked to stop, shut down cleanly; returns the exit status."""
        # A wrong or lost key stops start-up before anything loads.
        store, key = open_store_with_key(self.settings)
        self.notifier.status("loading models")
        rt = self.runtime = await build(self.settings, store, clock=self.clock)
        shown = rt.models()
        log.info("models loaded: wake word %s, speech-to-text %s (%.1f s), voice %s (%.1f s)",
                 ", ".join(rt.wake.names), shown["speech_to_text"], rt.transcriber.load_seconds,
                 shown["voice"], rt.synthesizer.load_seconds)
        await rt.memory.apply_retention()
        loop = self.loop = VoiceLoop(rt.voice, clock=self.clock, on_state=self._state_changed,
                                     announcer=rt.announcer)
        self._activate(rt)
        status = StatusServer(status_socket(), self.snapshot, {"reload": self._request_reload,
                                                               "reload-memory": self._reload_memory,
                                                               "reload-timers": self._reload_timers})
        self._install_signals()
        await status.start()
        runner = asyncio.create_task(loop.run(), name="voice-loop")
        for room in rt.rooms:
            self._start_room(room)
        # Only now is Elara really listening: models loaded, microphone open.
        self.notifier.ready(STATUS_TEXT["idle"])
        log.info("Elara %s is ready (started in %.1f s)", __version__, self.clock() - self.started_at)
        self._spawn(self._serve_reloads(), "reloads")
        self._spawn(Timekeeper(rt.timers, rt.alarms.due).run(), "timers")
        self._spawn(rt.model_watch.run(), "model-watch")
        self._spawn(keys.KeyFileWatch(key.source).run(), "key-watch")
        if self.settings.announcements.startup:
            rt.announcer.post(Announcement("I'm ready.", STARTUP, chime=False))
        self._spawn(self._daily_retention(), "retention")
        if self.notifier.watchdog_interval:
            self._spawn(self._watchdog(self.notifier.watchdog_interval), "watchdog")
        stopper = asyncio.create_task(self._stop.wait(), name="stop")
        try:
            await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            log.info("stopping")
            self.notifier.stopping()
            tasks = [runner, stopper, *self._tasks]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.shutdown()
            for room_loop in self.room_loops.values():
                await room_loop.shutdown()
            await self.runtime.alarms.settle()
            await status.stop()
            await close_replaced(self.runtime, None)
            self.notifier.close()
        if not runner.cancelled() and runner.exception() is not None:
            raise runner.exception()  # type: ignore[misc]
        log.info("stopped")
        return 0

    def _start_room(self, room: Room) -> None:
        """Connect to a satellite and run its room's voice loop (its link retries on its own)."""
        room_loop = VoiceLoop(room.voice, clock=self.clock, announcer=room.announcer)
        self.room_loops[room.name] = room_loop
        self._spawn(room.link.run(), f"satellite-{room.name}")
        self._spawn(room_loop.run(), f"room-{room.name}")

    # -- the runtime in use --------------------------------------------------------------------

    def _activate(self, rt: Runtime) -> None:
        """Start what a runtime runs in the background once it is the one in use."""
        self.runtime = rt
        rt.memory.worker.on_idle["heap"] = self.heap.soon
        rt.memory.worker.start()
        self._hold_memory_work(self.loop.state if self.loop else "idle")
        if self._model_check is None or self._checked_model is not rt.llm:
            if self._model_check is not None:
                self._model_check.cancel()  # a check of a replaced model is moot
            self._checked_model = rt.llm
            self._model_check = self._spawn(self._check_model(rt.llm), "model-check")

    async def _check_model(self, llm: Provider) -> None:
        try:
            await llm.check()
            await llm.warm_up()
        except ElaraError as exc:
            # The daemon keeps running: turns apologise until the model is back.
            log.warning("language model not ready: %s", exc)
        if isinstance(llm, AutoLanguageModel):
            await llm.watch()  # Ollama coming and going, between turns

    def _state_changed(self, state: str) -> None:
        self.notifier.status(STATUS_TEXT.get(state, state))
        self._hold_memory_work(state)
        if state == "idle":
            self.heap.soon()  # the turn, ring or command is over: what it freed goes back
        if state == "listening" and self.runtime is not None:
            # While the person speaks, the model reads the prompt up to the question.
            self.runtime.voice.orchestrator.prepare()

    def _hold_memory_work(self, state: str) -> None:
        # From the wake word to the end of the spoken reply the CPU belongs to Whisper, the
        # model's answer and Piper; memory work waits for the gap after it.
        if self.runtime is None:
            return
        if state in BUSY_STATES:
            self.runtime.memory.worker.pause()
        else:
            self.runtime.memory.worker.resume()

    async def _request_reload(self) -> None:
        """`elara mcp` changed the configuration: read it again, as on SIGHUP."""
        self._reload_requested.set()

    async def _reload_memory(self) -> None:
        assert self.runtime is not None
        await self.runtime.memory.reload()

    async def _reload_timers(self) -> None:
        """`elara timers cancel|clear` (or `elara ask`) changed the timers from another process."""
        assert self.runtime is not None
        book = self.runtime.timers
        await asyncio.to_thread(book.load)
        # A timer cancelled elsewhere stops ringing here too, and in every satellite's room.
        for announcer in (self.runtime.announcer, *(room.announcer for room in self.runtime.rooms)):
            announcer.drop(
                lambda a: a.timer_id is None or ((t := book.get(a.timer_id)) is not None and t.active))
        book.changed()

    async def _daily_retention(self) -> None:
        while True:
            await asyncio.sleep(RETENTION_INTERVAL)
            try:
                assert self.runtime is not None
                await self.runtime.memory.apply_retention()
            except ElaraError as exc:  # a store problem today; tomorrow may be better
                log.error("retention failed: %s", exc)

    # -- reload --------------------------------------------------------------------------------

    async def _serve_reloads(self) -> None:
        while True:
            await self._reload_requested.wait()
            self._reload_requested.clear()
            await self.reload()

    async def reload(self) -> bool:
        """Read the configuration again and build a runtime from it, reusing unchanged parts; it
        is swapped in at the loop's next idle moment (a turn in flight finishes on the old one).
        An invalid configuration changes nothing."""
        assert self.runtime is not None and self.loop is not None
        self.notifier.reloading()
        old = self.runtime
        try:
            new_settings, sources = await asyncio.to_thread(load_settings_with_sources, self.config_path)
            new = await build(new_settings, old.store, previous=old, clock=self.clock)
        except ElaraError as exc:
            self.counters.rejected_reloads += 1
            log.error("configuration reload rejected, keeping the running configuration: %s", exc)
            self.notifier.ready(STATUS_TEXT.get(self.loop.state, ""))
            return False
        try:
            await self.loop.swap(new.voice)
            for room in new.rooms:
                if room.name in self.room_loops:
                    await self.room_loops[room.name].swap(room.voice)
        except asyncio.CancelledError:  # stopping before the loop was idle: never used
            await close_replaced(new, old)
            raise
        configure_logging(new_settings.logging.level)
        self.settings = new_settings
        self._config_files = tuple(str(p) for p in sources.files)
        self._activate(new)
        await close_replaced(old, new)
        if new.microphone is not old.microphone and new.microphone.device is not None:
            log.info("now listening on %s", new.microphone.device.label())
        await new.memory.reload()  # `elara memory forget` from another process meanwhile
        self.counters.reloads += 1
        log.info("configuration reloaded")
        self.notifier.ready(STATUS_TEXT.get(self.loop.state, ""))
        return True

    # -- watchdog ------------------------------------------------------------------------------

    async def _watchdog(self, interval: float) -> None:
        assert self.loop is not None and self.runtime is not None
        while True:
            # A hung audio loop stops the pings and systemd restarts us; a microphone being
            # reopened after it vanished is not hung, it is recovering.
            stalled = self.clock() - self.loop.last_progress > 2 * interval
            if not stalled or not self.runtime.microphone.is_open:
                self.notifier.watchdog()
            else:
                log.warning("the audio loop has made no progress for %.0f s", 2 * interval)
            await asyncio.sleep(interval)

    # -- status --------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """What `elara status` shows: the daemon's own figures and each part's `status()`."""
        assert self.runtime is not None and self.loop is not None
        rt, loop = self.runtime, self.loop.status()
        microphone = rt.microphone.status()
        now = utc_now()
        return {
            "state": loop["state"],
            "pid": os.getpid(),
            "version": __version__,
            "uptime_seconds": round(self.clock() - self.started_at, 1),
            "tasks": len(asyncio.all_tasks()),  # a soak watches that none pile up
            "models": rt.models(),
            "counters": {**loop["counters"],
                         "dropped_frames": microphone["dropped_frames"],
                         "overflows": microphone["overflows"],
                         "reloads": self.counters.reloads,
                         "rejected_reloads": self.counters.rejected_reloads},
            "timers": [timer_status(t, now) for t in rt.timers.active()],
            "announcements": rt.announcer.status(),
            "last_turn": loop["last_turn"],
            "last_judgment": loop["last_judgment"],
            "context_window": rt.monitor.status(),
            "memory": rt.memory.status(),
            "tools": rt.tools(),
            "microphone": microphone,
            "speaker": rt.speaker.status(),
            "echo": rt.echo.status() if rt.echo is not None else None,
            "context": {"last_n": rt.settings.context.last_n, "store": str(rt.store.root)},
            "config_files": list(self._config_files),
            "satellites": [self._room_status(room) for room in rt.rooms],
        }

    def _room_status(self, room: Room) -> dict[str, Any]:
        """A satellite's link and its room's loop, for `elara status`."""
        assert self.runtime is not None
        room_loop = self.room_loops.get(room.name)
        shown = room_loop.status() if room_loop is not None else None
        return {**room.link.status(), "room_state": shown["state"] if shown else None,
                "counters": shown["counters"] if shown else None,
                "timers": [timer_status(t, utc_now()) for t in self.runtime.timers.active()
                           if t.room == room.name]}

    # -- helpers -------------------------------------------------------------------------------

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        loop.add_signal_handler(signal.SIGHUP, self._reload_requested.set)

    def _spawn(self, coroutine: Any, name: str) -> asyncio.Task[Any]:
        # The event loop holds tasks only weakly: keep each one until it is done.
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
