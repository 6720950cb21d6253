"""Enrolling a person's voice for the wake-word verifier (`elara wake enroll`).

Elara asks aloud for the wake phrase a few times and then for some other speech, records each
answer through the configured microphone (opened only while recording, so the prompts are never
recorded), and trains a `WakeVerifier` on openWakeWord's feature windows: the windows the wake-word
model scored on the phrase, and every other window of the other speech (openWakeWord's recipe).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from elara.errors import ConfigError, EnrollmentError
from elara.service.files import replace_file
from elara.voice.verifier import VERIFY_FROM, WakeVerifier, train
from elara.voice.wake import WakeWordDetector

log = logging.getLogger(__name__)

WAKE_SECONDS = 3.0
OTHER_SECONDS = 6.0
#: Shifts (in samples, under one 80 ms frame) at which each wake clip is scored again: the same
#: phrase seen at other frame alignments gives the verifier varied windows, as the live stream does.
_OFFSETS = (0, 320, 640, 960)
#: Near misses of "Hey Jarvis", said by Elara's own voice during enrollment and trained on as other
#: speech, so the verifier learns the phrase itself and not only "something like it". (Kept apart
#: from bench/wake.py's sound-alikes, which judge it.)
NEAR_MISSES = (
    "Hey Harvard.", "Hey Carla.", "Hey Janet.", "Hey Darwin.", "Hey Marty.", "Hey Arthur.", "Hey Curtis.",
    "Hey Marvel.", "A jar, please.", "Hey garlic.", "Hey Jack.", "Hey Charlie.", "Hey Jenny.", "Hay bales.",
    "Hey Carlos.", "Hey Martha.",
)
OTHER_PROMPTS = (
    "Now say a sentence or two of anything else, in your usual voice.",
    "Once more, something different: tell me about your day.",
)


class Recorder(Protocol):
    """Speaks to the person and records their answer."""

    async def say(self, text: str) -> None:
        """Say `text` aloud and return when it has been heard."""

    async def record(self, seconds: float) -> np.ndarray:
        """Record `seconds` of 16 kHz mono int16 audio from the microphone."""


@dataclass(frozen=True)
class Enrollment:
    """The trained verifier, and how the recordings went."""

    verifier: WakeVerifier
    takes: int  # wake-phrase recordings that counted
    retakes: int  # recordings in which the wake word was not heard


def phrase_windows(detector: WakeWordDetector, clip: np.ndarray, wake_word: str) -> np.ndarray:
    """The feature windows of `clip` the wake-word model scored ≥ VERIFY_FROM (at several alignments)."""
    found = [
        features
        for offset in _OFFSETS
        for score, features in detector.scored_windows(clip[offset:], wake_word)
        if score >= VERIFY_FROM
    ]
    return np.array(found).reshape(len(found), *detector.window_shape(wake_word))


def speech_windows(detector: WakeWordDetector, clip: np.ndarray, wake_word: str) -> np.ndarray:
    """Every other feature window of `clip` (neighbours overlap by 15/16; half of them is plenty)."""
    found = [features for _, features in detector.scored_windows(clip, wake_word)[::2]]
    return np.array(found).reshape(len(found), *detector.window_shape(wake_word))


async def enroll(
    detector: WakeWordDetector, recorder: Recorder, wake_word: str, *, takes: int = 5,
    near_misses: Sequence[np.ndarray] = (),
) -> Enrollment:
    """Record `takes` wake phrases (retrying unheard ones) and some other speech; train on them and
    on `near_misses` (clips of phrases that sound like the wake phrase but are not it)."""
    phrase = wake_word.replace("_", " ").title()
    positive: list[np.ndarray] = []
    retakes = 0
    await recorder.say(f"Let's learn your voice. Each time I ask, say '{phrase}' once.")
    while len(positive) < takes:
        if retakes >= takes:
            raise EnrollmentError(
                f"the wake word {wake_word!r} was not heard in {retakes} of the recordings; check the "
                "microphone (Audio.InputDevice, `elara doctor`) and say it closer to it"
            )
        await recorder.say(f"Say '{phrase}' now.")
        clip = await recorder.record(WAKE_SECONDS)
        windows = await asyncio.to_thread(phrase_windows, detector, clip, wake_word)
        if len(windows) == 0:
            retakes += 1
            log.info("take %d: the wake word was not heard; asking again", len(positive) + 1)
            await recorder.say("I didn't catch that. Let's try again.")
            continue
        positive.append(windows)
        log.info("take %d: %d windows", len(positive), len(windows))
    negative: list[np.ndarray] = []
    for prompt in OTHER_PROMPTS:
        await recorder.say(prompt)
        clip = await recorder.record(OTHER_SECONDS)
        negative.append(await asyncio.to_thread(speech_windows, detector, clip, wake_word))
    for clip in near_misses:
        negative.append(await asyncio.to_thread(speech_windows, detector, clip, wake_word))
    # Scoring and training take seconds of CPU: off the event loop, so the speaker keeps playing.
    verifier = await asyncio.to_thread(train, wake_word, np.concatenate(positive), np.concatenate(negative))
    await recorder.say("Thank you. I know your voice now.")
    return Enrollment(verifier, takes=len(positive), retakes=retakes)


def add_verifier_to_config(config_file: Path, verifier_path: Path) -> None:
    """Point `WakeWord.Verifiers` in the JSON file at `verifier_path` (creating the file if needed),
    keeping every other setting; written atomically."""
    data: dict[str, Any] = {}
    if config_file.exists():
        try:
            data = json.loads(config_file.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{config_file}: cannot add the verifier to it ({exc}); fix the file and enroll again") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{config_file}: expected a JSON object; fix the file and enroll again")
    section_key = next((k for k in data if k.lower() == "wakeword"), "WakeWord")
    section = data.setdefault(section_key, {})
    if not isinstance(section, dict):
        raise ConfigError(f"{config_file}: WakeWord is not an object; fix the file and enroll again")
    key = next((k for k in section if k.lower() == "verifiers"), "Verifiers")
    listed: Sequence[str] = section.get(key) or []
    wanted = str(verifier_path)
    section[key] = [*(p for p in listed if p != wanted), wanted]
    config_file.parent.mkdir(parents=True, exist_ok=True)
    mode = config_file.stat().st_mode & 0o777 if config_file.exists() else None
    replace_file(config_file, (json.dumps(data, indent=2) + "\n").encode(), mode=mode)
