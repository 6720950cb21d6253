"""The composition root: every part of a running Elara built from one `Settings`.

Start-up calls `build(settings, store)` once. A reload calls `build(new_settings, store,
previous=running)`: each slow or stateful part whose own settings did not change is taken over
from the running runtime (models take seconds to load), everything else is built anew, and
anything that can fail on bad settings (a model file, a device) fails here, before anything is
swapped. The daemon hands the new runtime's voice parts to the loop, which swaps them in at its
next idle moment; then `close_replaced` closes what the old runtime had and the new one doesn't.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from elara.audio.capture import Microphone
from elara.audio.playback import Speaker
from elara.audio.reference import PlaybackHistory
from elara.brain.orchestrator import Orchestrator
from elara.brain.providers import Provider, describe
from elara.conversation.store import ConversationStore
from elara.errors import ElaraError
from elara.memory.manager import Memory
from elara.service import wiring
from elara.settings import Settings, parse_engine
from elara.skills import intents
from elara.skills.announcements import Announcer, ModelWatch
from elara.skills.commands import Alarms
from elara.skills.timers import TimerBook
from elara.voice.denoise import NoiseSuppressor
from elara.voice.dialogue import Dialogue
from elara.voice.echo import CANCELLER_NEEDS, EchoFilter, make_canceller
from elara.voice.endpoint import Segmenter
from elara.voice.engines import load_second_check, load_speech_to_text, load_text_to_speech, load_wake
from elara.voice.parts import FrameSource, SpeechToText, VoiceParts
from elara.voice.remote import FailoverSynthesizer, FailoverTranscriber
from elara.voice.satellites import Room, SatelliteLink, SatelliteSpeaker
from elara.voice.speech import SpeechSink, Synthesizer
from elara.voice.stop import StopReader
from elara.voice.stt import SecondReading, Transcriber, phantom_reason
from elara.voice.tts import PiperSynthesizer
from elara.voice.turn import TurnJudge, TurnThresholds
from elara.voice.vad import VoiceActivity, create_vad
from elara.voice.wake import (
    CONFIDENT_LOG_ODDS,
    CONFIRM_LOG_ODDS,
    SECOND_CONFIDENT_LOG_ODDS,
    SECOND_LOG_ODDS,
    WakeWordDetector,
    names_wake_word,
    phrase_confirmed,
    spoken_wake_phrase,
)

log = logging.getLogger(__name__)

#: WebRTC noise suppression level of the wake check's window (see `_check_cleaner`).
WAKE_CHECK_NOISE_SUPPRESSION = 2

#: The settings each slow or stateful part is built from: a reload reuses the running part when
#: these are equal. Every other part is cheap and built anew each time.
SOURCES: dict[str, Callable[[Settings], object]] = {
    "llm": lambda s: (s.language_model, s.personalities),
    "memory": lambda s: (s.memory, s.context, s.language_model, s.personalities),
    "wake": lambda s: s.wake_word,
    "vad": lambda s: s.listening.vad,
    "second_check": lambda s: (s.wake_word.confirm_second_model, s.wake_word.confirm_from > 0,
                               s.wake_word.confirm_beam_size, s.speech_to_text.model,
                               s.speech_to_text.read_again_by_second_model,
                               s.speech_to_text.read_again_beam_size > 0,
                               s.speech_to_text.window_seconds, s.speech_to_text.no_speech_threshold),
    "transcriber": lambda s: (s.speech_to_text.model, s.speech_to_text.language,
                              s.speech_to_text.beam_size, s.speech_to_text.window_seconds,
                              s.speech_to_text.no_speech_threshold, s.speech_to_text.engine,
                              s.speech_to_text.fallback_to_local, s.speech_to_text.timeout_seconds),
    "synthesizer": lambda s: (s.text_to_speech.voice, s.text_to_speech.length_scale, s.text_to_speech.engine,
                              s.text_to_speech.remote_voice, s.text_to_speech.fallback_to_local,
                              s.text_to_speech.timeout_seconds),
    "microphone": lambda s: s.audio.input_device,
    "speaker": lambda s: (s.audio.output_device, s.audio.output_latency_ms, s.audio.echo_cancellation),
    # the canceller has learnt the room between this microphone and this speaker
    "echo": lambda s: (s.audio.input_device, s.audio.output_device, s.audio.output_latency_ms,
                       s.audio.echo_cancellation, s.audio.echo_canceller),
}

#: Settings a running daemon can't change: they name the history it has open.
RESTART_ONLY = ("storage_root", "encryption_key", "encryption_key_file")


@dataclass(frozen=True)
class Runtime:
    """Every part of a running Elara, built from `settings`."""

    settings: Settings
    store: ConversationStore
    llm: Provider
    memory: Memory
    monitor: wiring.ContextMonitor
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
    rooms: tuple[Room, ...] = ()  # the satellites' rooms, each with its own voice parts

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


async def build(settings: Settings, store: ConversationStore, *, previous: Runtime | None = None,
                clock: Callable[[], float] = time.monotonic) -> Runtime:
    """Build (or, from `previous`, rebuild) every part; raises ElaraError on a bad model or device,
    after closing whatever it had already opened."""
    def reused(part: str) -> Any:
        if previous is not None and SOURCES[part](previous.settings) == SOURCES[part](settings):
            return getattr(previous, part)
        return None

    wake, transcriber, synthesizer, second_check = await asyncio.gather(
        _load(reused("wake"), load_wake, settings), _load(reused("transcriber"), load_speech_to_text, settings),
        _load(reused("synthesizer"), load_text_to_speech, settings),
        _load(reused("second_check"), load_second_check, settings))
    opened: list[Callable[[], Awaitable[None]]] = []  # undone if a later part fails
    try:
        microphone = reused("microphone")
        if microphone is None:
            microphone = Microphone(settings.audio.input_device)
            await microphone.start()
            opened.append(microphone.stop)
        speaker = reused("speaker") or Speaker(settings.audio.output_device,
                                                  latency=settings.audio.output_latency_ms / 1000,
                                                  history=PlaybackHistory(),
                                                  keep_open=settings.audio.echo_cancellation)
        llm = reused("llm")
        if llm is None:
            llm = await asyncio.to_thread(wiring.make_language_model, settings)
            opened.append(llm.aclose)
        memory = reused("memory")
        if memory is None:
            memory = Memory(settings, store, llm)
            await memory.load()
        if previous is not None:  # the timers and what waits to be said outlive a reload
            book, announcer, alarms = previous.timers, previous.announcer, previous.alarms
            model_watch = previous.model_watch
        else:
            book = TimerBook(store)
            await asyncio.to_thread(book.load)
            announcer = Announcer()
            alarms = Alarms(book, announcer, store)
            model_watch = ModelWatch(announcer, llm.check)
    except BaseException:
        for close in reversed(opened):
            await close()
        raise
    # The wake word and Whisper may each be reused or new: the check is wired afresh every time.
    wire_wake_check(wake, settings, transcriber, second_check)
    vad = reused("vad") or create_vad(settings.listening.vad)
    echo = reused("echo") if settings.audio.echo_cancellation else None
    if echo is None and settings.audio.echo_cancellation:
        echo = make_echo_filter(speaker, settings.audio.echo_canceller)
    monitor = wiring.make_monitor(settings)
    speech = SpeechSink(synthesizer, speaker, first_chunk_words=settings.text_to_speech.first_chunk_words,
                        monotonic=clock)
    orchestrator = wiring.make_orchestrator(settings, store, llm, speech, memory, monitor,
                                            wiring.make_commands(settings, book, announcer))
    orchestrator.observers.append(model_watch)
    model_watch.check = llm.check
    voice = voice_parts(settings, Dialogue.from_settings(settings.listening, settings.audio,
                                                         echo_cancelled=echo is not None),
                        wake=wake, vad=vad, transcriber=transcriber, orchestrator=orchestrator, speech=speech,
                        microphone=microphone, echo=echo, stop_words=settings.audio.stop_without_wake_word,
                        second=second_check)
    rooms = await _build_rooms(settings, store, previous, llm=llm, memory=memory, monitor=monitor,
                               transcriber=transcriber, synthesizer=synthesizer, book=book, alarms=alarms,
                               clock=clock, second_check=second_check)
    if previous is not None:
        for key in RESTART_ONLY:
            if getattr(settings.context, key) != getattr(previous.settings.context, key):
                log.warning("Context.%s changed: it takes effect when Elara restarts",
                            "".join(w.title() for w in key.split("_")))
    return Runtime(settings=settings, store=store, llm=llm, memory=memory, monitor=monitor, wake=wake,
                   vad=vad, transcriber=transcriber, synthesizer=synthesizer, second_check=second_check,
                   microphone=microphone, speaker=speaker, echo=echo, voice=voice, timers=book,
                   announcer=announcer, alarms=alarms, model_watch=model_watch, rooms=rooms)


def voice_parts(settings: Settings, dialogue: Dialogue, *, wake: WakeWordDetector, vad: VoiceActivity,
                transcriber: SpeechToText, orchestrator: Orchestrator, speech: SpeechSink,
                microphone: FrameSource, echo: EchoFilter | None = None, stop_words: bool = False,
                second: Transcriber | None = None) -> VoiceParts:
    """What a voice loop runs a turn with, from settings: Elara's own, or a satellite's room's;
    `second`: the second Whisper model (`WakeWord.ConfirmSecondModel`), if loaded."""
    stt = settings.speech_to_text
    threshold = stt.no_speech_threshold
    return VoiceParts(
        dialogue=dialogue, wake=wake, vad=vad, echo=echo, stop_words=stop_words,
        segmenter=Segmenter.from_settings(settings.listening, settings.speech_to_text),
        transcriber=transcriber,
        phantom_reason=lambda transcript: phantom_reason(transcript, no_speech_threshold=threshold),
        orchestrator=orchestrator, speech=speech, microphone=microphone,
        vad_threshold=settings.listening.vad_threshold, pre_roll_ms=settings.listening.pre_roll_ms,
        speaker_tail_ms=settings.audio.speaker_tail_ms, wake_phrases=wake_phrases(wake),
        judge=(TurnJudge(TurnThresholds.from_settings(
            settings.listening, wake_phrases(wake),
            going_on_heard=echo is not None and settings.listening.go_on_ms > 0))
            if settings.listening.turn_judgment != "off" else None),
        speculative_reply=settings.listening.speculative_reply,
        go_on_ms=settings.listening.go_on_ms, min_speech_ms=settings.listening.min_speech_ms,
        ring_seconds=settings.timers.ring_seconds,
        is_command=(lambda text: intents.match(text) is not None) if settings.intents.enabled else None,
        read_again=read_again(transcriber, stt.read_again_beam_size,
                              second if stt.read_again_by_second_model else None),
        stop_reader=stop_reader(transcriber, wake.names))


def stop_reader(transcriber: SpeechToText, wake_names: Sequence[str]) -> StopReader | None:
    """What reads "stop" over her voice: the local Whisper told the stop commands and the wake
    phrases, without noise suppression, which learns her residual echo as the noise and took
    "stop"s away (`bench/echo.py`); None: a remote engine, read as it is."""
    if not isinstance(transcriber, Transcriber):
        return None
    whisper = transcriber.cleaned_by(None) if transcriber.clean is not None else transcriber
    return StopReader(whisper, tuple(spoken_wake_phrase(name) for name in wake_names))


def read_again(transcriber: SpeechToText, beam_size: int, second: Transcriber | None = None) -> SecondReading | None:
    """What reads doubtful words again with `beam_size`: `second`, another Whisper model, in the
    first one's language and through its cleaning, or else the local Whisper with the wider beam;
    of the first reading and those its beam ended with, the one both models find likeliest stands.
    None: no second reading — none asked for, the same model no wider than the first, or the words
    are read by a remote engine. Of bench_stt's 528 questions, base read again the unsure ones to
    78.6 % of key words where tiny.en at beam 5 read them to 74.8 % (`bench/stt.py`)."""
    if not isinstance(transcriber, Transcriber) or beam_size <= 0:
        return None
    if second is not None:
        return SecondReading(transcriber, second.speaking(transcriber.language).with_beam_size(beam_size)
                             .cleaned_by(transcriber.clean))
    if beam_size > transcriber.beam_size:
        return SecondReading(transcriber, transcriber.with_beam_size(beam_size))
    return None


async def _build_rooms(settings: Settings, store: ConversationStore, previous: Runtime | None, *,
                       llm: Provider, memory: Memory, monitor: wiring.ContextMonitor,
                       transcriber: SpeechToText, synthesizer: Synthesizer, book: TimerBook,
                       alarms: Alarms, clock: Callable[[], float],
                       second_check: Transcriber | None = None) -> tuple[Room, ...]:
    """Each satellite's room: its link and speaker (kept across reloads) and fresh voice parts over
    the shared engines, store and memory. Satellites added or removed take effect at restart."""
    if previous is not None:
        wanted = tuple((s.name, s.uri) for s in settings.satellites)
        if wanted != tuple((s.name, s.uri) for s in previous.settings.satellites):
            log.warning("Satellites changed: it takes effect when Elara restarts")
        links: list[tuple[SatelliteLink, SatelliteSpeaker, Announcer, VoiceParts | None]] = [
            (room.link, room.speaker, room.announcer, room.voice) for room in previous.rooms]
    else:
        links = []
        for satellite in settings.satellites:
            address = parse_engine(satellite.uri)
            assert address is not None, "checked when the settings were read"
            link = SatelliteLink(satellite.name, address, clock=clock)
            links.append((link, SatelliteSpeaker(link, clock=clock), Announcer(), None))
    same_wake = previous is not None and SOURCES["wake"](previous.settings) == SOURCES["wake"](settings)
    same_vad = previous is not None and SOURCES["vad"](previous.settings) == SOURCES["vad"](settings)
    wakes = await asyncio.gather(*(
        _load(old.wake if old is not None and same_wake else None, load_wake, settings) for _, _, _, old in links))
    # A room has no echo cancellation (the satellite's microphone is out of reach): barge-in off,
    # and the wake word is muted while its speaker plays.
    audio = dataclasses.replace(settings.audio, barge_in=False)
    rooms = []
    for (link, speaker, announcer, old), wake in zip(links, wakes):
        wire_wake_check(wake, settings, transcriber, second_check)
        speech = SpeechSink(synthesizer, speaker, first_chunk_words=settings.text_to_speech.first_chunk_words,
                            monotonic=clock)
        alarms.add_room(link.name, announcer)
        commands = wiring.make_commands(settings, book, announcer, room=link.name)
        orchestrator = wiring.make_orchestrator(settings, store, llm, speech, memory, monitor, commands,
                                                room=link.name)
        vad = old.vad if old is not None and same_vad else create_vad(settings.listening.vad)
        voice = voice_parts(settings, Dialogue.from_settings(settings.listening, audio, echo_cancelled=False),
                            wake=wake, vad=vad, transcriber=transcriber, orchestrator=orchestrator,
                            speech=speech, microphone=link, second=second_check)
        rooms.append(Room(link.name, link, speaker, announcer, voice))
    return tuple(rooms)


async def close_replaced(old: Runtime, new: Runtime | None) -> None:
    """Close the parts of `old` that `new` does not use (all of them when `new` is None)."""
    def replaced(part: object) -> bool:
        return new is None or all(part is not getattr(new, name) for name in SOURCES)

    if replaced(old.memory):
        await old.memory.worker.stop()
    if replaced(old.microphone):
        await old.microphone.stop()
    if replaced(old.speaker):
        await old.speaker.close()
    if replaced(old.llm):
        await old.llm.aclose()


def wire_wake_check(wake: WakeWordDetector, settings: Settings, transcriber: SpeechToText,
                    second: Transcriber | None = None) -> None:
    """Give the wake word its check as the settings ask (`WakeWord.ConfirmFrom` 0: none), with
    `second` (`WakeWord.ConfirmSecondModel`) reading again what the first reading turns down.
    Confident scores are checked only where a local Whisper can read the phrase: a remote
    transcript alone can't, so there they wake at once."""
    check = settings.wake_word
    wake.confirm_confident = check.confirm_confident and _local_whisper(transcriber) is not None
    wake.confirm_with(transcript_confirmer(transcriber, check.confirm_beam_size, clean=_check_cleaner(),
                                           second=second)
                      if check.confirm_from > 0 else None)


def _check_cleaner() -> NoiseSuppressor:
    """The wake check hears its window through WebRTC noise suppression at level 2 whatever
    `SpeechToText.NoiseSuppression` says: `bench/wake_live.py` measured the check with it."""
    return NoiseSuppressor(WAKE_CHECK_NOISE_SUPPRESSION, setting="WakeWord.ConfirmFrom")


def _local_whisper(transcriber: SpeechToText) -> Transcriber | None:
    """The local Whisper that reads for `transcriber`: itself, or a remote engine's stand-in."""
    local = transcriber if isinstance(transcriber, Transcriber) else getattr(transcriber, "local", None)
    return local if isinstance(local, Transcriber) else None


def transcript_confirmer(transcriber: SpeechToText, beam_size: int | None = None, *,
                         clean: Callable[[np.ndarray], np.ndarray] | None = None,
                         second: Transcriber | None = None,
                         ) -> Callable[[np.ndarray, str, bool], bool]:
    """Confirms a wake when Whisper reads the wake phrase into the audio (`phrase_confirmed`; a
    confident score by the looser CONFIDENT_LOG_ODDS), with `beam_size` (`WakeWord.ConfirmBeamSize`;
    None: the transcriber's own), through `clean` when given. The check needs Whisper's token
    scores, so a remote engine's local stand-in makes it; a remote engine alone is asked for a
    transcript that must name the wake word, and only about doubtful scores. A confident score
    nobody could check wakes. What the local reading turns down, `second` (another Whisper model)
    reads again, by SECOND_LOG_ODDS (SECOND_CONFIDENT_LOG_ODDS for a confident score): a window
    tiny.en mishears in noise or an accent ("Good job, Beast."), base often reads as the phrase."""
    local = _local_whisper(transcriber)
    if local is not None and beam_size is not None and beam_size != local.beam_size:
        local = local.with_beam_size(beam_size)
    if local is not None and clean is not None:
        local = local.cleaned_by(clean)
    if second is not None and clean is not None:
        second = second.cleaned_by(clean)

    def confirm(audio: np.ndarray, name: str, confident: bool = False) -> bool:
        if confident and local is None:
            return True
        try:
            if local is not None:
                check = local.check_phrase(audio, spoken_wake_phrase(name))
                log.debug("the wake check heard %r, and %r when told (log odds %.2f)",
                          check.heard, check.prompted, check.log_odds)
                if phrase_confirmed(check, name, CONFIDENT_LOG_ODDS if confident else CONFIRM_LOG_ODDS):
                    return True
                if second is None:
                    return False
                again = second.check_phrase(audio, spoken_wake_phrase(name))
                log.debug("the second wake check heard %r, and %r when told (log odds %.2f)",
                          again.heard, again.prompted, again.log_odds)
                return phrase_confirmed(again, name, SECOND_CONFIDENT_LOG_ODDS if confident else SECOND_LOG_ODDS)
            transcript = transcriber.transcribe(audio)
        except ElaraError as exc:  # a doubtful wake nobody could check stays unconfirmed; a confident one stands
            log.warning("could not check a %s wake: %s", "confident" if confident else "doubtful", exc)
            return confident
        log.debug("the wake check heard %r", transcript.text)
        return names_wake_word(transcript.text, name)

    return confirm


def make_echo_filter(speaker: Speaker, kind: str = "speex") -> EchoFilter | None:
    """Echo cancellation over what `speaker` plays, or None (logged) when the canceller can't
    load: Elara then mutes the wake word while she speaks, as without it."""
    if speaker.history is None:
        return None
    try:
        canceller = make_canceller(kind)
    except (ImportError, OSError) as exc:
        log.warning("echo cancellation is off: the %s canceller (Audio.EchoCanceller) did not load (%s); "
                    "Elara mutes the wake word while she speaks. Fix: install %s (scripts/setup does), "
                    "or set Audio.EchoCancellation to false", kind, exc, CANCELLER_NEEDS[kind])
        return None
    return EchoFilter(canceller, speaker.history)


def wake_phrases(wake: WakeWordDetector) -> tuple[str, ...]:
    """What each wake-word model listens for, as words ("hey jarvis")."""
    return tuple(name.replace("_", " ") for name in wake.names)


async def _load(running: Any, loader: Callable[[Settings], Any], settings: Settings) -> Any:
    return running if running is not None else await asyncio.to_thread(loader, settings)
