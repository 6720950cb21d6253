"""Piper text-to-speech with the real en_US-joe-medium voice, and the speakable-text cleaner."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from elara.audio.frames import AudioClip
from elara.errors import ModelNotFoundError
from elara.voice.models import resolve_voice
from elara.voice.tts import PiperSynthesizer, speakable
from tests.rig.voice_clips import resample


def test_synthesize_returns_int16_at_the_voice_rate_of_plausible_length(synthesizer):
    assert synthesizer.sample_rate == 22_050
    clip = synthesizer.synthesize("It is twenty past three in the afternoon.")
    assert isinstance(clip, AudioClip)
    assert clip.sample_rate == 22_050
    assert clip.samples.dtype == np.int16 and clip.samples.ndim == 1
    assert 1.2 < clip.duration < 5.0  # eight words
    assert np.abs(clip.samples.astype(np.int32)).max() > 3000  # not silence


def test_longer_text_gives_longer_audio_and_all_sentences_are_spoken(synthesizer):
    one = synthesizer.synthesize("The capital of France is Paris.")
    three = synthesizer.synthesize(
        "The capital of France is Paris. It has been the capital for a thousand years. "
        "About two million people live there."
    )
    assert three.duration > 2 * one.duration


def test_the_voice_is_understood_by_whisper(synthesizer, transcriber):
    clip = synthesizer.synthesize("Please **turn off** the lights in the kitchen.")
    heard = transcriber.transcribe(resample(clip.samples, clip.sample_rate, 16_000)).text.lower()
    assert "lights" in heard and "kitchen" in heard
    assert "star" not in heard and "asterisk" not in heard


@pytest.mark.parametrize("text", ["", "   \n\t ", "***", "# ", "- ", "```\n```", "---"])
def test_nothing_speakable_gives_an_empty_clip(synthesizer, text):
    clip = synthesizer.synthesize(text)
    assert clip.sample_rate == 22_050
    assert clip.samples.dtype == np.int16 and len(clip.samples) == 0
    assert clip.duration == 0


def test_length_scale_slows_the_voice(synthesizer):
    record = resolve_voice("en_US-joe-medium")
    slow = PiperSynthesizer(record.path, record.config_path, length_scale=1.6)
    text = "Set a timer for ten minutes."
    assert slow.synthesize(text).duration > 1.3 * synthesizer.synthesize(text).duration


RSS_AFTER = """
import sys
from elara.voice.models import resolve_voice
from elara.voice.tts import PiperSynthesizer

def rss_mib():
    return next(int(line.split()[1]) // 1024 for line in open("/proc/self/status") if line.startswith("VmRSS"))

record = resolve_voice("en_US-joe-medium")
voice = PiperSynthesizer(record.path, record.config_path)
for text in sys.argv[1:]:
    voice.synthesize(text)
    print(rss_mib())
"""


def test_a_long_sentence_does_not_keep_its_memory():
    """onnxruntime's arena grew to the longest sentence ever spoken and kept it: 450 MiB more
    after one of 700 characters. A process of its own, so the figures are the voice's alone."""
    typical = "Paris is the capital of France, and it is lovely in spring."
    long = ", ".join(["the weather tomorrow will be mild and dry with a light breeze from the west"] * 9) + "."
    shown = subprocess.run([sys.executable, "-c", RSS_AFTER, typical, long, typical],
                           capture_output=True, text=True, timeout=120, check=True).stdout.split()
    after_typical, after_long, after_both = (int(mib) for mib in shown)
    assert after_long < after_typical + 150, shown
    assert after_both < after_typical + 150, shown


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("**Bold** and _italic_ and `code`", "Bold and italic and code"),
        ("# The answer\nIt is *forty-two*.", "The answer. It is forty-two."),
        ("- apples\n- pears\n* plums", "apples. pears. plums."),
        ("1. first step\n2) second step", "first step. second step."),
        ("See https://example.com/a?b=1 for more.", "See a link for more."),
        ("Read [the docs](https://docs.example.com) today.", "Read the docs today."),
        ("Go to www.example.org, then <https://x.io>.", "Go to a link, then a link."),
        ("snake_case and __init__ stay words", "snake_case and init stay words"),
        ("> Quoted *wisdom*", "Quoted wisdom"),
        ("Line one\nline two\n\n\nline three", "Line one line two line three"),
        ("Tabs\tand    spaces", "Tabs and spaces"),
        ("```python\nprint('hi')\n```", "print('hi')"),
        ("| name | age |\n|---|---|\n| Ann | 30 |", "name, age. Ann, 30."),
        ("Cost: about 10% off!", "Cost: about 10% off!"),
        ("", ""),
        ("** __ ##", ""),
    ],
)
def test_speakable(text, spoken):
    assert speakable(text) == spoken


def test_missing_voice_files_are_a_config_error(tmp_path):
    with pytest.raises(ModelNotFoundError, match="TextToSpeech.Voice"):
        PiperSynthesizer(tmp_path / "voice.onnx", tmp_path / "voice.onnx.json")
