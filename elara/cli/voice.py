"""`elara run|say|transcribe|models|fsm`: the daemon and its voice parts one at a time."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from elara.settings import Settings


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
    from elara.service.openmp import prepare_openmp

    prepare_openmp()  # while this is the only thread
    return asyncio.run(Daemon(settings, args.config, args.config_sources.files).run())


def _say(args: argparse.Namespace, settings: Settings) -> int:
    from elara.audio.wav import write_wav
    from elara.voice.engines import load_synthesizer

    clip = load_synthesizer(settings).synthesize(" ".join(args.text))
    if args.out is not None:
        write_wav(args.out, clip)
        print(f"wrote {clip.duration:.2f} s to {args.out}")
        return 0

    async def play() -> None:
        from elara.audio.playback import Speaker

        speaker = Speaker(settings.audio.output_device, latency=settings.audio.output_latency_ms / 1000)
        try:
            await speaker.play(clip)
        finally:
            await speaker.close()

    asyncio.run(play())
    return 0


def _transcribe(args: argparse.Namespace, settings: Settings) -> int:
    from elara.audio.frames import SAMPLE_RATE
    from elara.audio.streams import resample
    from elara.audio.wav import read_wav
    from elara.voice.engines import load_transcriber
    from elara.voice.stt import phantom_reason

    clip = read_wav(args.file)
    transcriber = load_transcriber(settings)
    transcript = transcriber.transcribe(resample(clip.samples, clip.sample_rate, SAMPLE_RATE))
    reason = phantom_reason(transcript,
                            no_speech_threshold=settings.speech_to_text.no_speech_threshold)
    if reason is not None:
        print(f"elara: no speech heard in {args.file} ({reason})", file=sys.stderr)
        return 1
    print(transcript.text)
    return 0


def _models(args: argparse.Namespace, settings: Settings) -> int:
    from elara.errors import ElaraError
    from elara.service.paths import default_models_dirs
    from elara.voice import models
    from elara.voice.engines import check_loads

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
    from elara.voice.engines import remote_engines
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
