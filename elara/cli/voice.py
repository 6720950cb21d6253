"""`elara run|say|transcribe|models|fsm`: the daemon and its voice parts one at a time."""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from elara.settings import Settings

if TYPE_CHECKING:  # loaded by the commands that use them
    from elara.service.listening import QuestionReading
    from elara.service.slices import SecondCheckSlice
    from elara.voice.stt import Transcriber


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register the voice commands."""
    run = commands.add_parser("run", help="run the voice assistant in the foreground (the daemon)")
    run.set_defaults(handler=_run, daemon=True)
    say = commands.add_parser("say", help="speak TEXT with the configured voice")
    say.add_argument("text", nargs="+")
    say.add_argument("--out", type=Path, metavar="FILE.wav", help="write a WAV instead of playing")
    say.set_defaults(handler=_say)
    transcribe = commands.add_parser("transcribe", help="print what Whisper hears in a WAV file")
    transcribe.add_argument("file", type=Path, metavar="FILE.wav")
    transcribe.set_defaults(handler=_transcribe)
    listing = commands.add_parser("models", help="list the models that resolve and check each loads")
    listing.set_defaults(handler=_models)
    fsm = commands.add_parser("fsm", help="print the conversation state machine")
    fsm.add_argument("--dot", action="store_true", help="Graphviz dot instead of text")
    fsm.set_defaults(handler=_fsm)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from elara.service.daemon import Daemon
    from elara.service.heap import limit_arenas
    from elara.service.openmp import prepare_openmp

    prepare_openmp()  # while this is the only thread
    limit_arenas()
    return asyncio.run(Daemon(settings, args.config, args.config_sources.files).run())


def _say(args: argparse.Namespace, settings: Settings) -> int:
    from elara.audio.wav import write_wav
    from elara.service.engines import load_text_to_speech
    from elara.service.slices import TextToSpeechSlice

    clip = load_text_to_speech(TextToSpeechSlice.of(settings)).synthesize(" ".join(args.text))
    if args.out is not None:
        write_wav(args.out, clip)
        print(f"wrote {clip.duration:.2f} s to {args.out}")
        return 0

    async def play() -> None:
        from elara.service.build import open_speaker
        from elara.service.slices import SpeakerSlice

        speaker = open_speaker(SpeakerSlice.of(settings), reference=False)
        try:
            await speaker.play(clip)
        finally:
            await speaker.close()

    asyncio.run(play())
    return 0


def _transcribe(args: argparse.Namespace, settings: Settings) -> int:
    """The words heard in a WAV file, read as the daemon reads a question: the configured engine
    and noise suppression, the phantom filter, and doubtful words read again as at the end of a
    turn (`listening.read_recording`)."""
    from elara.audio.frames import SAMPLE_RATE
    from elara.audio.streams import resample
    from elara.audio.wav import read_wav
    from elara.service.listening import read_recording

    clip = read_wav(args.file)
    reading = _question_reading(settings)
    transcript = read_recording(reading, resample(clip.samples, clip.sample_rate, SAMPLE_RATE))
    reason = reading.phantom_reason(transcript)
    if reason is not None:
        print(f"elara: no speech heard in {args.file} ({reason})", file=sys.stderr)
        return 1
    print(transcript.text)
    return 0


def _question_reading(settings: Settings) -> QuestionReading:
    """The daemon's reading of a question, its engines loaded side by side from their slices: the
    wake word for its phrases only, the second Whisper model the first time words are doubted."""
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor

    from elara.service.engines import load_speech_to_text, load_wake_word, second_check_model
    from elara.service.listening import question_reading, wake_phrases
    from elara.service.slices import SecondCheckSlice, SpeechToTextSlice, WakeWordSlice

    names_only = dataclasses.replace(settings.wake_word, verifiers=(), shorten_pauses=False, vad_threshold=0.0)
    with ThreadPoolExecutor(1) as pool:
        wake = pool.submit(load_wake_word, WakeWordSlice(names_only))
        transcriber = load_speech_to_text(SpeechToTextSlice.of(settings))
        phrases = wake_phrases(wake.result())
    second = SecondCheckSlice.of(settings)
    return question_reading(settings, transcriber, phrases,
                            second=functools.partial(_load_second, second) if second_check_model(second) else None)


def _load_second(s: SecondCheckSlice) -> Transcriber:
    from elara.service.engines import load_second_check

    second = load_second_check(s)
    assert second is not None, "second_check_model named it"
    return second


def _models(args: argparse.Namespace, settings: Settings) -> int:
    from elara.errors import ElaraError
    from elara.service.engines import check_loads
    from elara.service.paths import default_models_dirs
    from elara.voice import models

    dirs = default_models_dirs()
    selected = set()
    failures = 0
    try:
        configured = [*models.resolve_wake_words(settings.wake_word.models, dirs),
                      models.resolve_whisper(settings.speech_to_text.model, dirs),
                      models.resolve_voice(settings.text_to_speech.voice, dirs)]
        selected = {record.path for record in configured}
    except ElaraError as exc:
        print(f"✗ {exc}")
        failures += 1
    for record in models.available_models(dirs):
        mark = "*" if record.path in selected else " "
        try:
            seconds = check_loads(record)
            status = f"✓ loads in {seconds:.2f} s"
        except ElaraError as exc:
            status, failures = f"✗ {exc}", failures + 1
        print(f"{mark} {record.config_key:<20} {record.name:<18} {status}  ({record.source}: {record.path})")
    print("* = selected by the configuration")
    from elara.service.engines import remote_engines
    from elara.voice.remote import describe_info

    for section, values, client in remote_engines(settings):
        key = f"{section}.Engine"
        try:
            print(f"* {key:<20} {values.engine}  ✓ {describe_info(client.describe())}")
        except ElaraError as exc:
            print(f"* {key:<20} {values.engine}  ✗ {exc}")
            failures += 1
    return 1 if failures else 0


def _fsm(args: argparse.Namespace, settings: Settings) -> int:
    from elara.voice.dialogue import Dialogue

    dialogue = Dialogue.from_settings(settings.listening, settings.audio)
    print(dialogue.to_dot() if args.dot else dialogue.describe())
    return 0
