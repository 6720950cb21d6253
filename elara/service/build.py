"""The composition root: every part of a running Elara built from one `Settings`.

Start-up calls `build(settings, store)` once. A reload calls `build(new_settings, store,
previous=running)`: each slow or stateful part whose slice of the settings did not change
(`slices.kept`) is taken over from the running runtime (models take seconds to load), everything
else is built anew, and anything that can fail on bad settings (a model file, a device) fails
here, before anything is swapped. The daemon hands the new runtime's voice parts to the loop,
which swaps them in at its next idle moment; then `close_replaced` closes what the old runtime
had and the new one doesn't.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from elara.audio.capture import Microphone
from elara.audio.playback import Speaker
from elara.audio.reference import PlaybackHistory
from elara.brain.acting import Acting
from elara.brain.providers import Provider, describe
from elara.conversation.store import ConversationStore
from elara.memory.manager import Memory
from elara.service.answering import (
    ContextMonitor,
    load_language_model,
    make_commands,
    make_monitor,
    make_orchestrator,
    open_memory,
)
from elara.service.engines import (
    load_second_check,
    load_speech_to_text,
    load_text_to_speech,
    load_vad,
    load_wake_word,
)
from elara.service.listening import voice_parts, wire_wake_check
from elara.service.slices import (
    PARTS,
    EchoSlice,
    LanguageModelSlice,
    MemorySlice,
    MicrophoneSlice,
    SecondCheckSlice,
    SpeakerSlice,
    SpeechToTextSlice,
    TextToSpeechSlice,
    ToolServersSlice,
    VadSlice,
    WakeWordSlice,
    kept,
    restart_only_changes,
)
from elara.settings import Settings, parse_engine
from elara.skills.announcements import Announcer, ModelWatch
from elara.skills.commands import Alarms
from elara.skills.timers import TimerBook
from elara.tools.sources import ToolSource
from elara.tools.toolbox import ToolCounts
from elara.voice.dialogue import Dialogue
from elara.voice.echo import CANCELLER_NEEDS, Canceller, EchoFilter, make_canceller
from elara.voice.parts import VoiceParts
from elara.voice.remote import FailoverSynthesizer, FailoverTranscriber
from elara.voice.satellites import Room, SatelliteLink, SatelliteSpeaker
from elara.voice.speech import SpeechSink
from elara.voice.stt import Transcriber
from elara.voice.tts import PiperSynthesizer
from elara.voice.vad import VoiceActivity
from elara.voice.wake import WakeWordDetector

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Runtime:
    """Every part of a running Elara, built from `settings`."""

    settings: Settings
    store: ConversationStore
    llm: Provider
    memory: Memory
    monitor: ContextMonitor
    wake: WakeWordDetector
    vad: VoiceActivity
    transcriber: Transcriber | FailoverTranscriber
    synthesizer: PiperSynthesizer | FailoverSynthesizer
    second_check: Transcriber | None  # WakeWord.ConfirmSecondModel (wake windows, doubtful words)
    microphone: Microphone
    speaker: Speaker
    echo: EchoFilter | None
    voice: VoiceParts
    timers: TimerBook
    announcer: Announcer
    alarms: Alarms
    model_watch: ModelWatch
    tool_servers: tuple[ToolSource, ...] = ()  # Tools.McpServers, started
    tool_counts: ToolCounts = dataclasses.field(default_factory=ToolCounts)  # calls, failures
    acting: Acting | None = None  # the tool calling of Elara's own orchestrator
    rooms: tuple[Room, ...] = ()  # the satellites' rooms, each with its own voice parts

    def tools(self) -> dict[str, Any] | None:
        """The tools and their calls, for `elara status` (None while tools are off)."""
        if self.acting is None:
            return None
        return {"offered_to_model": bool(getattr(self.llm, "calls_tools", False)),
                **self.acting.toolbox.status()}

    def models(self) -> dict[str, Any]:
        """Which models answer, for `elara status`."""
        s = self.settings
        remote = {name: engine.status() for name, engine in (("speech_to_text", self.transcriber),
                                                              ("text_to_speech", self.synthesizer))
                  if isinstance(engine, FailoverTranscriber | FailoverSynthesizer)}
        return {"wake_word": list(self.wake.names),
                "speech_to_text": s.speech_to_text.engine if "speech_to_text" in remote else s.speech_to_text.model,
                "voice": s.text_to_speech.engine if "text_to_speech" in remote else s.text_to_speech.voice,
                "language_model": self.llm.model, "ollama": s.language_model.host,
                "answering": describe(self.llm, s.language_model.provider), "remote_engines": remote}


@dataclass(frozen=True)
class _Engines:
    """The speech engines a build loaded or took over."""

    wake: WakeWordDetector
    transcriber: Transcriber | FailoverTranscriber
    synthesizer: PiperSynthesizer | FailoverSynthesizer
    second_check: Transcriber | None
    vad: VoiceActivity


@dataclass(frozen=True)
class _Opened:
    """The devices, the language model, memory and the timers a build opened or took over."""

    microphone: Microphone
    speaker: Speaker
    llm: Provider
    memory: Memory
    timers: TimerBook
    announcer: Announcer
    alarms: Alarms
    model_watch: ModelWatch
    tool_servers: tuple[ToolSource, ...]
    #: how to close what this build opened anew (not what it took over)
    closers: tuple[Callable[[], Awaitable[None]], ...] = ()

    async def close_new(self) -> None:
        """Close what this build opened anew: it failed before the runtime was whole."""
        for close in reversed(self.closers):
            await close()


async def build(settings: Settings, store: ConversationStore, *, previous: Runtime | None = None,
                clock: Callable[[], float] = time.monotonic) -> Runtime:
    """Build (or, from `previous`, rebuild) every part; raises ElaraError on a bad model or device,
    after closing whatever it had already opened, and before changing any part it took over."""
    taken = ({name: getattr(previous, name) for name in kept(previous.settings, settings)}
             if previous is not None else {})
    engines = await _load_engines(settings, taken)
    opened = await _open_parts(settings, store, taken, previous)
    try:
        runtime, room_wakes = await _assemble(settings, store, previous, taken, engines, opened, clock)
        # The wake words and Whisper may each be reused or new: each check is wired afresh, last,
        # as wiring changes a detector a running loop may still be using.
        for wake in (runtime.wake, *room_wakes):
            wire_wake_check(wake, settings, engines.transcriber, engines.second_check)
    except BaseException:
        await opened.close_new()
        raise
    if previous is not None:
        for key in restart_only_changes(previous.settings, settings):
            log.warning("%s changed: it takes effect when Elara restarts", key)
    return runtime


async def _assemble(settings: Settings, store: ConversationStore, previous: Runtime | None,
                    taken: dict[str, Any], engines: _Engines, opened: _Opened,
                    clock: Callable[[], float]) -> tuple[Runtime, list[WakeWordDetector]]:
    """The runtime over the engines and the opened parts: the cheap parts made anew, the rooms
    (and the rooms' wake words, to be wired)."""
    wake, transcriber, second_check, vad = engines.wake, engines.transcriber, engines.second_check, engines.vad
    echo = _echo_filter(settings, taken, opened.speaker)
    monitor = make_monitor(settings)
    speech = SpeechSink(engines.synthesizer, opened.speaker,
                        first_chunk_words=settings.text_to_speech.first_chunk_words, monotonic=clock)
    counts = previous.tool_counts if previous is not None else ToolCounts()
    orchestrator = make_orchestrator(settings, store, opened.llm, speech, opened.memory, monitor,
                                     make_commands(settings, opened.timers, opened.announcer),
                                     tools=opened.tool_servers, counts=counts)
    orchestrator.observers.append(opened.model_watch)
    opened.model_watch.check = opened.llm.check
    voice = voice_parts(settings, Dialogue.from_settings(settings.listening, settings.audio,
                                                         echo_cancelled=echo is not None),
                        wake=wake, vad=vad, transcriber=transcriber, orchestrator=orchestrator, speech=speech,
                        microphone=opened.microphone, echo=echo,
                        stop_words=settings.audio.stop_without_wake_word, second=second_check)
    rooms, room_wakes = await _build_rooms(settings, store, previous, taken, engines, opened, monitor,
                                           counts, clock)
    return Runtime(settings=settings, store=store, llm=opened.llm, memory=opened.memory, monitor=monitor,
                   wake=wake, vad=vad, transcriber=transcriber, synthesizer=engines.synthesizer,
                   second_check=second_check, microphone=opened.microphone, speaker=opened.speaker,
                   echo=echo, voice=voice, timers=opened.timers, announcer=opened.announcer,
                   alarms=opened.alarms, model_watch=opened.model_watch,
                   tool_servers=opened.tool_servers, tool_counts=counts, acting=orchestrator.acting,
                   rooms=rooms), room_wakes


async def _load_engines(settings: Settings, taken: dict[str, Any]) -> _Engines:
    """The speech engines, each taken over or loaded from its slice, side by side in threads."""
    async def load(name: str, factory: Callable[[Any], T], s: Any) -> T:
        return taken[name] if name in taken else await asyncio.to_thread(factory, s)

    wake, transcriber, synthesizer, second_check, vad = await asyncio.gather(
        load("wake", load_wake_word, WakeWordSlice.of(settings)),
        load("transcriber", load_speech_to_text, SpeechToTextSlice.of(settings)),
        load("synthesizer", load_text_to_speech, TextToSpeechSlice.of(settings)),
        load("second_check", load_second_check, SecondCheckSlice.of(settings)),
        load("vad", load_vad, VadSlice.of(settings)))
    return _Engines(wake, transcriber, synthesizer, second_check, vad)


async def _open_parts(settings: Settings, store: ConversationStore, taken: dict[str, Any],
                      previous: Runtime | None) -> _Opened:
    """The devices, the language model, memory and the timers, each taken over or opened from its
    slice; what this opened is closed again if a later one fails."""
    opened: list[Callable[[], Awaitable[None]]] = []
    try:
        if "microphone" in taken:
            microphone = taken["microphone"]
        else:
            microphone = await open_microphone(MicrophoneSlice.of(settings))
            opened.append(microphone.stop)
        speaker = taken["speaker"] if "speaker" in taken else open_speaker(SpeakerSlice.of(settings))
        if "llm" in taken:
            llm = taken["llm"]
        else:
            llm = await asyncio.to_thread(load_language_model, LanguageModelSlice.of(settings))
            opened.append(llm.aclose)
        memory = (taken["memory"] if "memory" in taken
                  else await open_memory(MemorySlice.of(settings), store, llm))
        if "timers" in taken and previous is not None:  # the timers and what waits to be said outlive a reload
            book, announcer, alarms = previous.timers, previous.announcer, previous.alarms
            model_watch = previous.model_watch
        else:
            book, announcer, alarms, model_watch = await open_timers(store, llm)
        if "tool_servers" in taken:
            tool_servers = taken["tool_servers"]
        else:
            tool_servers = await open_tool_servers(ToolServersSlice.of(settings))
            opened.append(functools.partial(close_tool_servers, tool_servers))
    except BaseException:
        for close in reversed(opened):
            await close()
        raise
    return _Opened(microphone, speaker, llm, memory, book, announcer, alarms, model_watch, tool_servers,
                   tuple(opened))


# ---------------------------------------------------------------------------------------------
# factories of the devices, the echo canceller and the timers


async def open_microphone(s: MicrophoneSlice) -> Microphone:
    """The configured microphone, open."""
    microphone = Microphone(s.device)
    await microphone.start()
    return microphone


def open_speaker(s: SpeakerSlice, *, reference: bool = True) -> Speaker:
    """The configured speaker (its stream opens as it plays). With `reference` (the daemon's) it
    keeps what it plays, the echo canceller's reference, and with echo cancelling it stays open;
    a command that only plays something asks for neither."""
    if not reference:
        return Speaker(s.device, latency=s.latency_ms / 1000)
    return Speaker(s.device, latency=s.latency_ms / 1000, history=PlaybackHistory(),
                   keep_open=s.echo_cancellation)


def load_canceller(s: EchoSlice) -> Canceller:
    """The configured echo canceller (`Audio.EchoCanceller`); ImportError or OSError when its
    library does not load."""
    return make_canceller(s.canceller)


def make_echo_filter(s: EchoSlice, speaker: Speaker) -> EchoFilter | None:
    """Echo cancellation over what `speaker` plays, or None (logged) when the canceller can't
    load: Elara then mutes the wake word while she speaks, as without it."""
    if speaker.history is None:
        return None
    try:
        canceller = load_canceller(s)
    except (ImportError, OSError) as exc:
        log.warning("echo cancellation is off: the %s canceller (Audio.EchoCanceller) did not load (%s); "
                    "Elara mutes the wake word while she speaks. Fix: install %s (scripts/setup does), "
                    "or set Audio.EchoCancellation to false", s.canceller, exc, CANCELLER_NEEDS[s.canceller])
        return None
    return EchoFilter(canceller, speaker.history)


def _echo_filter(settings: Settings, taken: dict[str, Any], speaker: Speaker) -> EchoFilter | None:
    """The echo filter taken over, or made anew (again, if the running one did not load)."""
    s = EchoSlice.of(settings)
    if not s.echo_cancellation:
        return None
    echo: EchoFilter | None = taken.get("echo")
    return echo if echo is not None else make_echo_filter(s, speaker)


async def open_tool_servers(s: ToolServersSlice) -> tuple[ToolSource, ...]:
    """The MCP servers of `Tools.McpServers`, started side by side (one that fails keeps trying in
    the background); none while tools are off."""
    if not s.enabled or not s.servers:
        return ()
    from elara.tools.mcp import McpToolSource

    servers = tuple(McpToolSource(server) for server in s.servers)
    await asyncio.gather(*(server.start() for server in servers))
    return servers


async def close_tool_servers(servers: tuple[ToolSource, ...]) -> None:
    """Stop the MCP servers."""
    await asyncio.gather(*(server.aclose() for server in servers), return_exceptions=True)


async def open_timers(store: ConversationStore, llm: Provider) -> tuple[TimerBook, Announcer, Alarms, ModelWatch]:
    """The timers read from the store, the announcements waiting to be said, the alarms that
    ring them and the watch on the language model (built from no setting)."""
    book = TimerBook(store)
    await asyncio.to_thread(book.load)
    announcer = Announcer()
    return book, announcer, Alarms(book, announcer, store), ModelWatch(announcer, llm.check)


# ---------------------------------------------------------------------------------------------
# the satellites' rooms


async def _build_rooms(settings: Settings, store: ConversationStore, previous: Runtime | None,
                       taken: dict[str, Any], engines: _Engines, opened: _Opened, monitor: ContextMonitor,
                       counts: ToolCounts,
                       clock: Callable[[], float]) -> tuple[tuple[Room, ...], list[WakeWordDetector]]:
    """Each satellite's room: its link and speaker (kept across reloads) and fresh voice parts over
    the shared engines, store and memory; its wake word and VAD are its own, taken over as
    Elara's are (returned beside the rooms, to be wired). Satellites added or removed take effect
    at restart."""
    links = _room_links(settings, previous, clock)
    wakes = await asyncio.gather(*(_room_wake(settings, old if "wake" in taken else None)
                                   for _, _, _, old in links))
    # A room has no echo cancellation (the satellite's microphone is out of reach): barge-in off,
    # and the wake word is muted while its speaker plays.
    audio = dataclasses.replace(settings.audio, barge_in=False)
    rooms = []
    for (link, speaker, announcer, old), wake in zip(links, wakes):
        speech = SpeechSink(engines.synthesizer, speaker,
                            first_chunk_words=settings.text_to_speech.first_chunk_words, monotonic=clock)
        opened.alarms.add_room(link.name, announcer)
        commands = make_commands(settings, opened.timers, announcer, room=link.name)
        orchestrator = make_orchestrator(settings, store, opened.llm, speech, opened.memory, monitor, commands,
                                         room=link.name, tools=opened.tool_servers, counts=counts)
        vad = old.vad if old is not None and "vad" in taken else await asyncio.to_thread(load_vad, VadSlice.of(settings))
        voice = voice_parts(settings, Dialogue.from_settings(settings.listening, audio, echo_cancelled=False),
                            wake=wake, vad=vad, transcriber=engines.transcriber, orchestrator=orchestrator,
                            speech=speech, microphone=link, second=engines.second_check)
        rooms.append(Room(link.name, link, speaker, announcer, voice))
    return tuple(rooms), list(wakes)


async def _room_wake(settings: Settings, running: VoiceParts | None) -> WakeWordDetector:
    """A room's wake word: its running one (`running`'s), or one loaded from its slice."""
    if running is not None:
        assert isinstance(running.wake, WakeWordDetector), "a room's wake word is built here"
        return running.wake
    return await asyncio.to_thread(load_wake_word, WakeWordSlice.of(settings))


def _room_links(settings: Settings, previous: Runtime | None, clock: Callable[[], float],
                ) -> list[tuple[SatelliteLink, SatelliteSpeaker, Announcer, VoiceParts | None]]:
    """Each room's link, speaker and announcer, and its running voice parts: those of `previous`
    (a reload keeps the rooms it started with), or new ones at start-up."""
    if previous is not None:  # Satellites is restart-only: a reload warns (`restart_only_changes`)
        return [(room.link, room.speaker, room.announcer, room.voice) for room in previous.rooms]
    links: list[tuple[SatelliteLink, SatelliteSpeaker, Announcer, VoiceParts | None]] = []
    for satellite in settings.satellites:
        address = parse_engine(satellite.uri)
        assert address is not None, "checked when the settings were read"
        link = SatelliteLink(satellite.name, address, clock=clock)
        links.append((link, SatelliteSpeaker(link, clock=clock), Announcer(), None))
    return links


# ---------------------------------------------------------------------------------------------
# closing


async def close_replaced(old: Runtime, new: Runtime | None) -> None:
    """Close the parts of `old` that `new` does not use (all of them when `new` is None)."""
    def replaced(part: object) -> bool:
        return new is None or all(part is not getattr(new, name) for name in PARTS)

    if replaced(old.memory):
        await old.memory.worker.stop()
    if replaced(old.microphone):
        await old.microphone.stop()
    if replaced(old.speaker):
        await old.speaker.close()
    if replaced(old.llm):
        await old.llm.aclose()
    if replaced(old.tool_servers):
        await close_tool_servers(old.tool_servers)
