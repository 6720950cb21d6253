"""`elara wake enroll`: teach the wake-word verifier the user's voice."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import numpy as np

from elara.audio.frames import SAMPLE_RATE
from elara.settings import Settings


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `elara wake`."""
    wake = commands.add_parser("wake", help="the wake word: enroll your voice for its verifier")
    sub = wake.add_subparsers(dest="wake_command", metavar="ACTION", required=True)
    enroll = sub.add_parser(
        "enroll", help="record your wake phrase a few times and train a verifier for your voice")
    enroll.add_argument("--takes", type=int, default=5, metavar="N",
                        help="how many times to record the wake phrase (default 5)")
    enroll.add_argument("--wake-word", metavar="NAME",
                        help="which configured wake word (default: the first of WakeWord.Models)")
    enroll.add_argument("--from-dir", type=Path, metavar="DIR",
                        help="use recordings instead of the microphone: DIR/wake-*.wav (the phrase) "
                             "and DIR/other-*.wav (other speech), 16 kHz mono WAV")
    enroll.set_defaults(handler=_enroll)


class DeviceRecorder:
    """Prompts through the configured voice and speaker, records from the configured microphone."""

    def __init__(self, settings: Settings) -> None:
        from elara.service.build import open_speaker
        from elara.service.engines import load_text_to_speech
        from elara.service.slices import MicrophoneSlice, SpeakerSlice, TextToSpeechSlice

        self._microphone = MicrophoneSlice.of(settings)
        self._voice = load_text_to_speech(TextToSpeechSlice.of(settings))
        self._speaker = open_speaker(SpeakerSlice.of(settings), reference=False)

    async def say(self, text: str) -> None:
        """Print and speak one prompt."""
        print(text, flush=True)
        clip = await asyncio.to_thread(self._voice.synthesize, text)
        await self._speaker.play(clip)

    async def record(self, seconds: float) -> np.ndarray:
        """Open the microphone, keep `seconds` of it, close it (so no prompt is ever recorded)."""
        from elara.service.build import open_microphone

        wanted = int(seconds * SAMPLE_RATE)
        kept: list[np.ndarray] = []
        count = 0
        microphone = await open_microphone(self._microphone)
        try:
            print("(recording)", flush=True)
            async for frame in microphone.frames():
                kept.append(frame.samples)
                count += len(frame.samples)
                if count >= wanted:
                    break
        finally:
            await microphone.stop()
        return np.concatenate(kept)[:wanted]

    async def close(self) -> None:
        """Release the speaker."""
        await self._speaker.close()


class FileRecorder:
    """Takes the answers from WAV files in a directory: the phrase takes, then the other speech."""

    def __init__(self, directory: Path) -> None:
        from elara.audio.streams import resample
        from elara.audio.wav import read_wav
        from elara.errors import EnrollmentError

        def load(pattern: str) -> list[np.ndarray]:
            clips = [read_wav(p) for p in sorted(directory.glob(pattern))]
            return [resample(c.samples, c.sample_rate, SAMPLE_RATE) for c in clips]

        self._wake = load("wake-*.wav")
        self._other = load("other-*.wav")
        if not self._wake or not self._other:
            raise EnrollmentError(
                f"{directory}: needs wake-*.wav (the wake phrase) and other-*.wav (other speech) files")
        self.wake_clips = len(self._wake)

    async def say(self, text: str) -> None:
        """Print the prompt (nobody is listening to a speaker)."""
        print(text, flush=True)

    async def record(self, seconds: float) -> np.ndarray:
        """The next recording: the phrase takes first, then the other speech, whole."""
        from elara.errors import EnrollmentError
        from elara.voice.enroll import WAKE_SECONDS

        queue = self._wake if seconds <= WAKE_SECONDS else self._other
        if not queue:
            raise EnrollmentError("the recordings ran out: more of them were heard without the wake word "
                                  "than there are wake-*.wav files")
        return queue.pop(0)

    async def close(self) -> None:
        """Nothing to release."""


def _enroll(args: argparse.Namespace, settings: Settings) -> int:
    from elara.config import DEFAULT_FILE
    from elara.service.engines import load_wake_word
    from elara.service.paths import config_home
    from elara.service.slices import WakeWordSlice
    from elara.voice.enroll import Enrollment, add_verifier_to_config, enroll

    if args.takes < 1:
        print("elara: --takes must be at least 1", file=sys.stderr)
        return 2
    detector = load_wake_word(WakeWordSlice.of(settings).without_verifiers())
    wake_word = args.wake_word or detector.names[0]
    if wake_word not in detector.names:
        print(f"elara: {wake_word!r} is not one of WakeWord.Models ({', '.join(detector.names)})", file=sys.stderr)
        return 2
    recorder: DeviceRecorder | FileRecorder
    takes = args.takes
    if args.from_dir is not None:
        recorder = FileRecorder(args.from_dir)
        takes = min(takes, recorder.wake_clips)
    else:
        recorder = DeviceRecorder(settings)

    async def run() -> Enrollment:
        try:
            return await enroll(detector, recorder, wake_word, takes=takes, near_misses=near_misses)
        finally:
            await recorder.close()

    started = time.monotonic()
    near_misses = _near_misses(settings)
    enrollment = asyncio.run(run())
    path = config_home() / "verifiers" / f"{wake_word}.npz"
    enrollment.verifier.save(path)
    explicit = args.config or os.environ.get("ELARA_CONFIG")
    config_file = Path(explicit).expanduser() if explicit else config_home() / DEFAULT_FILE
    add_verifier_to_config(config_file, path)
    verifier = enrollment.verifier
    print(f"saved the verifier for {wake_word} to {path} ({enrollment.takes} takes, "
          f"{enrollment.retakes} retaken; {verifier.positives} wake windows, {verifier.negatives} others; "
          f"{time.monotonic() - started:.0f} s)")
    print(f"WakeWord.Verifiers in {config_file} now lists it; a running daemon takes it on reload "
          "(systemctl --user reload elara)")
    return 0


def _near_misses(settings: Settings) -> list[np.ndarray]:
    """The near misses of the wake phrase in Elara's own voice, padded with silence as a take is."""
    from elara.audio.streams import resample
    from elara.service.engines import load_text_to_speech
    from elara.service.slices import TextToSpeechSlice
    from elara.voice.enroll import NEAR_MISSES

    voice = load_text_to_speech(TextToSpeechSlice.of(settings))
    pad = np.zeros(SAMPLE_RATE // 2, dtype=np.int16)
    clips = [voice.synthesize(text) for text in NEAR_MISSES]
    return [np.concatenate([pad, resample(c.samples, c.sample_rate, SAMPLE_RATE), pad]) for c in clips]
