"""Text-to-speech with Piper: speakable text in, one mono int16 clip at the voice's rate out."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime

from elara.audio.frames import AudioClip
from elara.errors import ModelLoadError, ModelNotFoundError
from elara.voice.models import TEXT_TO_SPEECH_KEY

_URL = re.compile(r"(?:https?|ftp)://[^\s<>()\[\]]+|\bwww\.[^\s<>()\[\]]+", re.IGNORECASE)
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")
_AUTO_LINK = re.compile(r"<((?:https?|ftp)://[^>]+)>", re.IGNORECASE)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+•‣◦▪–]|\d{1,3}[.)])\s+(.*)$")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_RULE = re.compile(r"^\s*(?:[-*_]\s*){3,}$")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
# Emphasis and code markers; an underscore only when it is not inside a word (snake_case stays).
_SYMBOLS = re.compile(r"[*`#~]+|(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")
_ENDS_SENTENCE = re.compile(r"[.!?;:,…]$")

#: The longest input, in phoneme ids, whose memory the voice's onnxruntime arena keeps for the
#: next sentence (≈110 characters of English). The arena grows to the longest sentence it ever
#: spoke and keeps that for good: 180 MiB after short sentences, 630 MiB after one of 700
#: characters, the steps of the soak's RSS. Given back after a longer one, the most it keeps is
#: ≈300 MiB; giving it back after every sentence made a typical one ≈25 % slower to synthesize.
ARENA_KEPT_IDS = 256
_GIVE_BACK = onnxruntime.RunOptions()
_GIVE_BACK.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")


def _link(match: re.Match[str]) -> str:
    """A URL → "a link", keeping punctuation that ended the sentence rather than the URL."""
    url = match.group(0)
    trailing = url[len(url.rstrip(".,;:!?'\"")) :]
    return "a link" + trailing


def speakable(text: str) -> str:
    """Text fit to be spoken: markdown symbols, bullets and headings gone, URLs said as "a link".

    A heading or list item becomes its own sentence (a full stop is added when it has no
    punctuation), other line breaks and runs of whitespace become one space.
    """
    text = _MD_LINK.sub(lambda m: m.group(1) if m.group(1).strip() else "a link", text)
    text = _AUTO_LINK.sub("a link", text)
    text = _URL.sub(_link, text)
    pieces: list[str] = []
    for raw in text.splitlines():
        if _FENCE.match(raw) or _RULE.match(raw) or _TABLE_RULE.match(raw):
            continue
        line = _QUOTE.sub("", raw)
        standalone = False
        for pattern in (_HEADING, _BULLET):
            match = pattern.match(line)
            if match:
                line, standalone = match.group(1), True
                break
        if "|" in line:  # a table row: cells read as a list
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            line, standalone = ", ".join(c for c in cells if c), True
        line = _SYMBOLS.sub("", line)
        line = " ".join(line.split())
        if not line:
            continue
        if standalone and not _ENDS_SENTENCE.search(line):
            line += "."
        pieces.append(line)
    spoken = " ".join(pieces)
    spoken = _SPACE_BEFORE_PUNCT.sub(r"\1", spoken)
    # Nothing speakable if there is not a single letter or digit left.
    return spoken if any(ch.isalnum() for ch in spoken) else ""


class PiperSynthesizer:
    """A loaded Piper voice (a `speech.Synthesizer`). `synthesize` blocks (the daemon runs it in a
    worker thread)."""

    def __init__(self, model_path: Path, config_path: Path, *, length_scale: float = 1.0) -> None:
        model_path, config_path = Path(model_path), Path(config_path)
        for path in (model_path, config_path):
            if not path.is_file():
                raise ModelNotFoundError(
                    f"{TEXT_TO_SPEECH_KEY}: {path} does not exist (a Piper voice needs the .onnx "
                    "model and its .onnx.json config side by side)"
                )
        from piper import PiperConfig, PiperVoice, SynthesisConfig

        started = time.perf_counter()
        try:
            config = PiperConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
            session = BoundedArenaSession(str(model_path), providers=["CPUExecutionProvider"])
            self._voice = PiperVoice(config=config, session=session)
        except Exception as exc:  # a damaged model or config
            raise ModelLoadError(
                f"{TEXT_TO_SPEECH_KEY}: {model_path} does not load: {type(exc).__name__}: {exc}"
            ) from exc
        #: Seconds it took to load the voice.
        self.load_seconds = time.perf_counter() - started
        self._config = SynthesisConfig(length_scale=length_scale * self._voice.config.length_scale)
        self.model_path = model_path
        self.length_scale = length_scale
        #: The voice's native rate in Hz (22 050 for en_US-joe-medium).
        self.sample_rate = int(self._voice.config.sample_rate)

    def synthesize(self, text: str) -> AudioClip:
        """Speak `text` (cleaned by `speakable` first); an empty clip when nothing is left."""
        spoken = speakable(text)
        chunks: list[np.ndarray] = []
        if spoken:
            for chunk in self._voice.synthesize(spoken, syn_config=self._config):
                chunks.append(chunk.audio_int16_array.reshape(-1))
        samples = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)
        return AudioClip(samples=samples.astype(np.int16, copy=False), sample_rate=self.sample_rate)


class BoundedArenaSession(onnxruntime.InferenceSession):
    """An onnxruntime session that gives its arena's memory back after an input longer than
    `ARENA_KEPT_IDS`, so what it keeps is bounded by typical sentences, not the longest one."""

    def run(self, output_names: Any, input_feed: dict[str, Any], run_options: Any = None) -> Any:
        """Run the model; with the arena shrunk afterwards when the input is long."""
        ids = input_feed.get("input")
        if run_options is None and ids is not None and ids.shape[-1] > ARENA_KEPT_IDS:
            run_options = _GIVE_BACK
        return super().run(output_names, input_feed, run_options)
