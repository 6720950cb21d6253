"""Speech to text with Whisper (faster-whisper / CTranslate2), and the phantom-text filter.

Whisper's encoder is built for 30 s windows and pads every input to 30 s, which is most of the cost
of a short utterance. For an utterance shorter than `window_seconds` the Transcriber encodes only
that much (CTranslate2 accepts shorter inputs) and decodes once, greedily, without timestamps:
≈0.08 s instead of ≈0.3 s for a 2 s question with tiny.en on 2 cores, with the same words on the
clips tried. A short window makes the model more prone to loop (". . . ." on noise); a decode is
capped at a length that fits the audio, and a repetitive result from clear speech is decoded
again with the full 30 s window. (A 5 s window for questions that fit is ≈50–85 ms faster but
heard 554 of 600 words where 10 s heard 559, on 84 questions in six voices: not used.)
"""

from __future__ import annotations

import copy
import logging
import re
import time
import unicodedata
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from elara.audio.frames import SAMPLE_RATE
from elara.errors import ModelLoadError, ModelNotFoundError
from elara.service.openmp import prepare_openmp
from elara.voice.models import SPEECH_TO_TEXT_KEY

if TYPE_CHECKING:
    import tokenizers

log = logging.getLogger(__name__)

FULL_WINDOW_SECONDS = 30.0
_FRAMES_PER_SECOND = 100  # Whisper's mel frames (10 ms hop)
_SAMPLES_PER_FRAME = SAMPLE_RATE // _FRAMES_PER_SECOND
_TOKENS_PER_SECOND = 8  # generous: speech runs at ≈3 words (≈4 tokens) a second
_MIN_NEW_TOKENS = 12
_REPETITIVE_RATIO = 2.4  # Whisper's own compression-ratio threshold


@dataclass(frozen=True)
class Transcript:
    """What Whisper heard, how sure it was, and what it cost."""

    text: str
    no_speech_prob: float  # Whisper's probability that the window holds no speech
    avg_logprob: float  # mean log-probability of the decoded tokens (0 = certain)
    audio_seconds: float  # length of the audio given
    seconds: float  # compute time


@dataclass(frozen=True)
class PhraseCheck:
    """Whisper's two readings of audio that may end in a phrase, and how their likelihoods compare."""

    heard: str  # what Whisper hears in the audio alone
    prompted: str  # what it hears when told the phrase came just before
    log_odds: float  # log P(prompted) − log P(heard), both scored on the audio alone; 0 when they agree
    seconds: float  # compute time


@dataclass(frozen=True)
class Weighing:
    """Whisper's own reading of short audio, and each phrase it was told: log P(phrase) − log
    P(its reading), both scored on the audio (0: as likely; −3: ≈20 times less). No phrase is
    weighed when its own reading settled it."""

    transcript: Transcript
    log_odds: dict[str, float]


@dataclass(frozen=True)
class Hearing:
    """Every reading a model's beam ended with, its best first, and log P(text | audio) of the
    texts it was asked about and of its readings with other words: none when the audio was only
    transcribed (longer than the window, or its reading looped)."""

    readings: tuple[Transcript, ...]
    log_likelihoods: dict[str, float]


class Transcriber:
    """A loaded Whisper model. `transcribe` blocks (the daemon runs it in a worker thread)."""

    def __init__(
        self,
        model_dir: Path,
        *,
        language: str | None = "en",
        beam_size: int = 1,
        window_seconds: float = 10.0,
        no_speech_threshold: float = 0.6,
        cpu_threads: int = 0,
        initial_prompt: str | None = None,
        clean: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> None:
        model_dir = Path(model_dir)
        if not (model_dir / "model.bin").is_file():
            raise ModelNotFoundError(
                f"{SPEECH_TO_TEXT_KEY}: {model_dir} is not a CTranslate2 Whisper directory (no model.bin)"
            )
        prepare_openmp()  # CTranslate2's libgomp reads it once, as it loads on this first import
        from faster_whisper import WhisperModel
        from faster_whisper.tokenizer import Tokenizer

        started = time.perf_counter()
        try:
            self._model = WhisperModel(
                str(model_dir),
                device="cpu",
                compute_type="int8",
                cpu_threads=cpu_threads,
                local_files_only=True,
            )
        except Exception as exc:
            raise ModelLoadError(f"{SPEECH_TO_TEXT_KEY}: {model_dir} does not load: {exc}") from exc
        repaired = complete_merges(model_dir / "tokenizer.json", self._model.hf_tokenizer)
        if repaired is not None:
            self._model.hf_tokenizer = repaired
        #: Seconds it took to load the model.
        self.load_seconds = time.perf_counter() - started
        self.model_dir = model_dir
        self.multilingual = bool(self._model.model.is_multilingual)
        if not self.multilingual and language not in (None, "en"):
            log.warning("%s is English-only; ignoring language %r", model_dir.name, language)
        self.language = language if self.multilingual else "en"
        self.beam_size = int(beam_size)
        self.window_seconds = float(min(max(window_seconds, 1.0), FULL_WINDOW_SECONDS))
        self.no_speech_threshold = float(no_speech_threshold)
        #: What an utterance goes through before Whisper reads it (noise suppression), or None.
        self.clean = clean
        self._tokenizer_class = Tokenizer
        self._tokenizers: dict[str | None, object] = {}
        #: Text decoded as if it preceded the audio (Whisper's "previous text"), to bias the
        #: vocabulary and style; None or empty for no prompt.
        self.initial_prompt = initial_prompt.strip() if initial_prompt and initial_prompt.strip() else None
        self._prompt_tokens: list[int] = []
        if self.initial_prompt is not None:
            # As faster-whisper does: a leading space, and at most half the decoder's context.
            self._prompt_tokens = self._tokens(self.initial_prompt)[-(self._model.max_length // 2 - 1) :]

    # -----------------------------------------------------------------------------------------

    def transcribe(self, samples: np.ndarray) -> Transcript:
        """Transcribe 16 kHz mono audio (int16, or float in -1..1), cleaned first when set up to."""
        started = time.perf_counter()
        audio = self._heard(samples)
        seconds = len(audio) / SAMPLE_RATE
        if seconds <= self.window_seconds:
            parts = [self._decode(audio, self.window_seconds)]
        else:
            step = int(FULL_WINDOW_SECONDS * SAMPLE_RATE)
            parts = [self._decode(audio[i : i + step], FULL_WINDOW_SECONDS) for i in range(0, len(audio), step)]
        if len(parts) > 1:  # drop silent pieces of a long recording
            kept = [p for p in parts if phantom_reason(_as_transcript(p), no_speech_threshold=self.no_speech_threshold) is None]
            parts = kept or parts[:1]
        text = " ".join(p[0] for p in parts if p[0]).strip()
        return Transcript(
            text=text,
            no_speech_prob=float(min(p[1] for p in parts)),
            avg_logprob=float(np.mean([p[2] for p in parts])),
            audio_seconds=seconds,
            seconds=time.perf_counter() - started,
        )

    def phantom_reason(self, transcript: Transcript) -> str | None:
        """`phantom_reason` with this transcriber's no-speech threshold."""
        return phantom_reason(transcript, no_speech_threshold=self.no_speech_threshold)

    def with_beam_size(self, beam_size: int) -> Transcriber:
        """The same loaded model decoding with another beam size (nothing is loaded again)."""
        other = copy.copy(self)
        other.beam_size = int(beam_size)
        return other

    def speaking(self, language: str | None) -> Transcriber:
        """The same loaded model told another language (None: it detects it); an English-only
        model stays English."""
        other = copy.copy(self)
        other.language = language if self.multilingual else "en"
        return other

    def cleaned_by(self, clean: Callable[[np.ndarray], np.ndarray] | None) -> Transcriber:
        """The same loaded model reading the audio through `clean` (None: as it comes)."""
        other = copy.copy(self)
        other.clean = clean
        return other

    def _heard(self, samples: np.ndarray) -> np.ndarray:
        """The audio Whisper reads: float in -1..1, through `clean` when set."""
        return _as_float(samples if self.clean is None else self.clean(samples))

    # -----------------------------------------------------------------------------------------

    def _tokenizer(self, language: str | None):
        if language not in self._tokenizers:
            self._tokenizers[language] = self._tokenizer_class(
                self._model.hf_tokenizer, self.multilingual, task="transcribe", language=language
            )
        return self._tokenizers[language]

    def _decode(self, audio: np.ndarray, window: float) -> tuple[str, float, float]:
        """One window: (text, no_speech_prob, avg_logprob); retries a looping short window at 30 s."""
        return self._past_a_loop(audio, window, self._decode_window(audio, window))

    def _past_a_loop(self, audio: np.ndarray, window: float,
                     reading: tuple[str, float, float, bool]) -> tuple[str, float, float]:
        """A reading's (text, no_speech_prob, avg_logprob); one that looped in a short window is
        read again at 30 s, unless the window holds no speech."""
        text, no_speech, logprob, looped = reading
        if looped and window < FULL_WINDOW_SECONDS and no_speech < self.no_speech_threshold:
            log.debug("short window looped (%r); decoding again with %.0f s", text[:40], FULL_WINDOW_SECONDS)
            text, no_speech, logprob, _ = self._decode_window(audio, FULL_WINDOW_SECONDS)
        return text, no_speech, logprob

    def _decode_window(self, audio: np.ndarray, window: float) -> tuple[str, float, float, bool]:
        return self._decode_encoded(self._encode(audio, window), audio)[0]

    def _decode_encoded(self, encoded, audio: np.ndarray, hypotheses: int = 1) -> list[tuple[str, float, float, bool]]:
        """The beam's best `hypotheses` readings, the best first: (text, no_speech_prob,
        avg_logprob, whether it looped)."""
        tokenizer = self._tokenizer(self._language_of(encoded))
        previous = [tokenizer.sot_prev, *self._prompt_tokens] if self._prompt_tokens else []
        prompt = [*previous, *tokenizer.sot_sequence, tokenizer.no_timestamps]
        result = self._generate(encoded, prompt, audio, hypotheses)
        readings = []
        for tokens, score in zip(result.sequences_ids, result.scores, strict=True):  # the new tokens only
            # CTranslate2 returns the length-normalised score; recover faster-whisper's avg_logprob.
            logprob = score * len(tokens) / (len(tokens) + 1)
            text = tokenizer.decode(tokens).strip()
            readings.append((text, float(result.no_speech_prob), float(logprob),
                             self._looped(len(prompt), tokens, text, audio)))
        return readings

    def _encode(self, audio: np.ndarray, window: float):
        """Whisper's encoding of `audio` in a `window`-second input."""
        model = self._model
        frames = int(round(window * _FRAMES_PER_SECOND))
        # Pad with silence before the features, as Whisper was trained: zeros in the log-mel
        # domain are not silence but a mid-level sound, and made tiny.en hear "moon" as "man".
        samples = frames * _SAMPLES_PER_FRAME
        features = model.feature_extractor(np.pad(audio, (0, max(0, samples - len(audio)))))[:, :frames]
        return model.encode(features)

    def _language_of(self, encoded) -> str:
        language = self.language
        if language is None and self.multilingual:
            language = self._model.model.detect_language(encoded)[0][0][0][2:-2]
        return language or "en"

    def _max_length(self, prompt_length: int, audio: np.ndarray) -> int:
        """A decode's cap: room for the speech `audio` can hold, never more than the model's."""
        new_tokens = _MIN_NEW_TOKENS + int(len(audio) / SAMPLE_RATE * _TOKENS_PER_SECOND)
        return int(min(prompt_length + new_tokens, self._model.max_length))

    def _looped(self, prompt_length: int, tokens: list[int], text: str, audio: np.ndarray) -> bool:
        """Whether a decode ran into its cap or repeats itself (Whisper's compression-ratio test)."""
        return prompt_length + len(tokens) >= self._max_length(prompt_length, audio) or \
            compression_ratio(text) > _REPETITIVE_RATIO

    def _generate(self, encoded, prompt: list[int], audio: np.ndarray, hypotheses: int = 1):
        return self._model.model.generate(
            encoded,
            [prompt],
            beam_size=self.beam_size,
            num_hypotheses=max(1, min(hypotheses, self.beam_size)),
            length_penalty=1.0,
            max_length=self._max_length(len(prompt), audio),
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=[-1],
        )[0]

    def weigh(self, samples: np.ndarray, phrases: Sequence[str], *,
              settled: Callable[[str], bool]) -> Weighing:
        """`transcribe` for short audio that may be one of a few `phrases` ("Stop."), and unless
        `settled` by Whisper's own reading, how likely each phrase is against that reading, all
        scored on one encoding of the audio. Blocks like `transcribe`; audio longer than the
        window is only transcribed."""
        started = time.perf_counter()
        audio = self._heard(samples)
        if len(audio) > self.window_seconds * SAMPLE_RATE:
            return Weighing(self.transcribe(samples), {})
        encoded = self._encode(audio, self.window_seconds)
        reading = self._decode_encoded(encoded, audio)[0]
        text, no_speech, logprob = self._past_a_loop(audio, self.window_seconds, reading)
        odds: dict[str, float] = {}
        if not reading[3] and phrases and not settled(text):  # a looping reading is no yardstick
            tokenizer = self._tokenizer(self._language_of(encoded))
            start = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
            # Its reading as the phrases are scored: the words alone, without the initial prompt.
            heard_ll, *told_ll = self._log_likelihoods(
                encoded, start, [self._tokens(text), *map(self._tokens, phrases)], audio)
            odds = {p: ll - heard_ll for p, ll in zip(phrases, told_ll, strict=True)}
        transcript = Transcript(text, float(no_speech), float(logprob), len(audio) / SAMPLE_RATE,
                                time.perf_counter() - started)
        return Weighing(transcript, odds)

    def hear(self, samples: np.ndarray, texts: Sequence[str]) -> Hearing:
        """`transcribe`, keeping every reading the beam ended with, and log P(text | audio) of
        `texts` and of those readings, all on one encoding (`likelihoods`). A reading with the same
        words as a text before it, told apart only by case and punctuation, is not weighed again.
        Blocks like `transcribe`; audio longer than the window, or a reading that loops, is only
        transcribed."""
        started = time.perf_counter()
        audio = self._heard(samples)
        if len(audio) > self.window_seconds * SAMPLE_RATE:
            return Hearing((self.transcribe(samples),), {})
        encoded = self._encode(audio, self.window_seconds)
        decoded = self._decode_encoded(encoded, audio, hypotheses=self.beam_size)
        if decoded[0][3]:  # read again as `transcribe` does, on the audio already cleaned
            text, no_speech, logprob = self._past_a_loop(audio, self.window_seconds, decoded[0])
            return Hearing((Transcript(text, no_speech, logprob, len(audio) / SAMPLE_RATE,
                                       time.perf_counter() - started),), {})
        weighed: dict[str, str] = {}  # the words alone → the text weighed for them
        for text in [*texts, *(text for text, *_ in decoded)]:
            if text.strip():
                weighed.setdefault(normalize_text(text), text)
        tokenizer = self._tokenizer(self._language_of(encoded))
        start = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
        scores = self._log_likelihoods(encoded, start, [self._tokens(text) for text in weighed.values()], audio)
        seconds, spent = len(audio) / SAMPLE_RATE, time.perf_counter() - started
        readings = tuple(Transcript(text, no_speech, logprob, seconds, spent)
                         for text, no_speech, logprob, _ in decoded)
        return Hearing(readings, dict(zip(weighed.values(), scores, strict=True)))

    def likelihoods(self, samples: np.ndarray, texts: Sequence[str]) -> list[float]:
        """log P(text | audio) of each of `texts` as this model writes them (0 for an empty one), on
        one encoding of the audio, cleaned as `transcribe` cleans it. Blocks like `transcribe`; of a
        long recording, the last 30 s."""
        audio, window = self._last_window(samples)
        encoded = self._encode(audio, window)
        tokenizer = self._tokenizer(self._language_of(encoded))
        start = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
        return self._log_likelihoods(encoded, start, [self._tokens(text) for text in texts], audio)

    def _last_window(self, samples: np.ndarray) -> tuple[np.ndarray, float]:
        """The audio as Whisper reads it, its last 30 s at most, and the window that holds it."""
        audio = self._heard(samples)[-int(FULL_WINDOW_SECONDS * SAMPLE_RATE):]
        return audio, (self.window_seconds if len(audio) <= self.window_seconds * SAMPLE_RATE else FULL_WINDOW_SECONDS)

    def _tokens(self, text: str) -> list[int]:
        """Whisper's tokens for `text` as it writes it after the start (a leading space; none for
        no text)."""
        text = text.strip()
        return list(self._model.hf_tokenizer.encode(" " + text, add_special_tokens=False).ids) if text else []

    def _log_likelihoods(self, encoded, start: list[int], texts: list[list[int]], audio: np.ndarray) -> list[float]:
        """log P(text | audio) of each token list (0 for an empty one), in one batch: CTranslate2
        aligns one text per encoding, so the encoding is copied (≈20 % faster than one by one)."""
        import ctranslate2

        scored = [tokens for tokens in texts if tokens]
        frames = max(1, len(audio) // _SAMPLES_PER_FRAME)
        batch = ctranslate2.StorageView.from_array(np.ascontiguousarray(np.repeat(np.asarray(encoded), len(scored), axis=0)))
        results = iter(self._model.model.align(batch, start, scored, [frames] * len(scored)) if scored else [])
        return [float(np.log(np.clip(np.asarray(next(results).text_token_probs, dtype=np.float64), 1e-12, 1.0)).sum())
                if tokens else 0.0 for tokens in texts]

    def check_phrase(self, samples: np.ndarray, phrase: str) -> PhraseCheck:
        """Whether audio that may end in `phrase` ("Hey Jarvis.") reads as it: Whisper decodes the
        audio as it is and again told the phrase came just before, then scores both readings
        unprompted. Blocks like `transcribe`, and cleans the audio as it does; of a long recording,
        the last 30 s are checked."""
        started = time.perf_counter()
        audio, window = self._last_window(samples)
        heard, prompted, odds, looped = self._check_window(audio, window, phrase)
        if looped and window < FULL_WINDOW_SECONDS:  # as `transcribe` does
            heard, prompted, odds, _ = self._check_window(audio, FULL_WINDOW_SECONDS, phrase)
        return PhraseCheck(heard=heard, prompted=prompted, log_odds=odds, seconds=time.perf_counter() - started)

    def _check_window(self, audio: np.ndarray, window: float, phrase: str) -> tuple[str, str, float, bool]:
        """`check_phrase` in one window: (heard, prompted, log odds, whether the plain reading looped)."""
        encoded = self._encode(audio, window)
        tokenizer = self._tokenizer(self._language_of(encoded))
        start = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
        hint = self._tokens(phrase)
        heard = self._generate(encoded, start, audio).sequences_ids[0]
        prompted = self._generate(encoded, [tokenizer.sot_prev, *hint, *start], audio).sequences_ids[0]
        if prompted == heard:
            odds = 0.0
        else:
            prompted_ll, heard_ll = self._log_likelihoods(encoded, start, [prompted, heard], audio)
            odds = prompted_ll - heard_ll
        text = tokenizer.decode(heard).strip()
        return text, tokenizer.decode(prompted).strip(), odds, self._looped(len(start), heard, text, audio)


@dataclass(frozen=True, eq=False)
class SecondReading:
    """Reads doubtful words again with `again` (Whisper base, or the first model with a wider
    beam) and keeps the reading — the first, or any other words its beam ended with — that both
    models find likeliest: the sum of log P(reading | audio) under `first` and under `again`. Of
    bench_stt's 528 questions this heard 78.6 % of key words, where weighing the first reading
    against the beam's best alone heard 77.8 %. `reread` blocks like `Transcriber.transcribe`."""

    first: Transcriber
    again: Transcriber

    def reread(self, samples: np.ndarray, reading: Transcript) -> Transcript:
        """The reading that stands: `reading` itself, or one of the new ones. `again` weighs them
        all on the encoding it reads from; `first` encodes the audio once more (tiny.en's encoder
        is the cheap one)."""
        hearing = self.again.hear(samples, [reading.text] if reading.text else [])
        second = hearing.readings[0]
        if not second.text or not reading.text or second.text == reading.text:
            return second  # nothing to weigh: the same words, or none (the loop's phantom test)
        if hearing.log_likelihoods:
            texts = list(hearing.log_likelihoods)
            scores = [hearing.log_likelihoods[text] for text in texts]
            if self.again._model is not self.first._model:
                scores = [a + b for a, b in zip(scores, self.first.likelihoods(samples, texts), strict=True)]
        else:  # longer than the window, or looping: `hear` only transcribed it
            texts = [reading.text, second.text]
            scores = self.likelihoods(samples, texts)
        log.debug("read again: log likelihoods %s", ", ".join(f"{score:.2f}" for score in scores))
        best = texts[max(range(len(texts)), key=scores.__getitem__)]
        return next((r for r in hearing.readings if r.text == best), reading)

    def likelihoods(self, samples: np.ndarray, texts: Sequence[str]) -> list[float]:
        """log P(text | audio) of each of `texts` under both models, summed (under one, when
        `again` is the first model with a wider beam)."""
        scores = self.again.likelihoods(samples, texts)
        if self.again._model is not self.first._model:
            scores = [a + b for a, b in zip(scores, self.first.likelihoods(samples, texts), strict=True)]
        return scores


#: How many of a tokenizer's commonest tokens `complete_merges` encodes before it reads the file.
_TOKENS_PROBED = 1000


def complete_merges(path: Path, loaded: tokenizers.Tokenizer) -> tokenizers.Tokenizer | None:
    """The byte-level BPE tokenizer in `path` (`loaded` from it) with the merges it lacks put
    back, or None when it lacks none (or is not one).

    The Whisper base packages' tokenizer.json lacks its first merge, "Ġ t" (a merges file read as
    if its first line were the "#version" header): every word starting with "t" is written as
    " ", "t…" (" time" as two tokens). Whisper never writes that, so text Elara hands it — the
    phrases it weighs against its reading, the reading itself, an initial prompt — scored as
    unlikely as gibberish (" Set a timer for ten minutes." at e⁻²⁵ where its own tokens score e⁻⁰·⁴).
    Decoding is unaffected. A merge's rank is the id of the token it makes less 256, so each token
    no merge makes, and that only one pair of earlier tokens spells, gets its merge back at its rank.
    Reading the file takes ≈0.1–0.3 s, so it is read only when one of the first `_TOKENS_PROBED`
    tokens does not encode back to itself, where a merge dropped from the front shows (≈6 ms).
    """
    import json

    import tokenizers

    first = range(256, min(256 + _TOKENS_PROBED, loaded.get_vocab_size()))
    texts = [(i, text) for i in first if "\ufffd" not in (text := loaded.decode([i]))]  # whole characters
    encoded = loaded.encode_batch([text for _, text in texts], add_special_tokens=False)
    if all(e.ids == [i] for (i, _), e in zip(texts, encoded, strict=True)):
        return None
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
        model = spec["model"]
        if model.get("type") != "BPE":
            return None
        vocab: dict[str, int] = model["vocab"]
        merges = [m.split(" ") if isinstance(m, str) else list(m) for m in model["merges"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # faster-whisper read it, or said why not; nothing to add here
    made = {"".join(pair) for pair in merges}
    added = []
    for token, rank in sorted(vocab.items(), key=lambda item: item[1]):
        if rank < 256 or token in made or not token or token.startswith("<|"):
            continue
        splits = [(token[:i], token[i:]) for i in range(1, len(token))
                  if vocab.get(token[:i], rank) < rank and vocab.get(token[i:], rank) < rank]
        if len(splits) == 1:
            merges.insert(min(rank - 256, len(merges)), list(splits[0]))
            added.append(" ".join(splits[0]))
    if not added:
        return None
    model["merges"] = merges
    log.info("%s lacks %d BPE merge(s) (%s); put back", path, len(added), ", ".join(added[:3]))
    return tokenizers.Tokenizer.from_str(json.dumps(spec))


def _as_float(samples: np.ndarray) -> np.ndarray:
    """16 kHz mono audio as float32 in -1..1."""
    audio = np.asarray(samples).reshape(-1)
    if audio.dtype.kind in "iu":
        return audio.astype(np.float32) / 32768.0
    return audio.astype(np.float32)


def _as_transcript(part: tuple[str, float, float]) -> Transcript:
    return Transcript(part[0], part[1], part[2], 0.0, 0.0)


# ---------------------------------------------------------------------------------------------
# phantom filter

#: Whole transcripts Whisper invents on silence and noise (subtitle credits, video outros):
#: nobody says these to a voice assistant, so they are rejected however sure Whisper is.
KNOWN_PHANTOMS = frozenset(
    {
        "you",
        "thanks for watching",
        "thank you for watching",
        "thanks for watching and see you next time",
        "thank you for watching and see you next time",
        "thank you so much for watching",
        "please subscribe",
        "please subscribe to my channel",
        "subscribe to my channel",
        "like and subscribe",
        "dont forget to like and subscribe",
        "see you in the next video",
        "see you next time",
        "subtitles by the amaraorg community",
        "subtitles by",
        "captions by",
        "transcription by",
        "transcribed by",
        "translated by",
        "i'll see you next time",
        "ill see you next time",
        "blank audio",
        "silence",
        "music",
        "applause",
        "laughter",
        "www",
    }
)

#: Short phrases that are Whisper's favourite inventions but can also be meant ("Thank you."):
#: rejected only when Whisper had some doubt that there was speech at all.
WEAK_PHANTOMS = frozenset(
    {"thank you", "thank you very much", "thank you so much", "thanks", "bye", "bye bye", "so", "the", "a", "i", "oh", "okay then"}
)

#: Hesitation sounds: never a request.
FILLERS = frozenset({"um", "uh", "hmm", "hm", "mm", "mhm", "mmm", "ah", "er", "erm", "uh huh", "huh"})

_ANNOTATION = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*|♪[^♪]*♪|[♪♫]")
_NOT_WORD = re.compile(r"[^\w' ]+")


def normalize_text(text: str) -> str:
    """Lower case, punctuation gone, whitespace collapsed: "Thanks for watching!" → "thanks for watching"."""
    text = unicodedata.normalize("NFKC", text).lower().replace("’", "'")
    text = _NOT_WORD.sub(" ", text)
    return " ".join(text.replace("_", " ").split())


def compression_ratio(text: str) -> float:
    """Whisper's repetition measure: text length over its zlib-compressed length."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def phantom_reason(transcript: Transcript, *, no_speech_threshold: float = 0.6) -> str | None:
    """Why `transcript` is probably not something the user said, or None when it looks real.

    Rejected: empty text; text without a letter or digit ("...", "♪"); sound annotations only
    ("[BLANK_AUDIO]", "(music)"); known subtitle phantoms ("Thanks for watching!", "you");
    Whisper's own no-speech verdict (no_speech_prob above the threshold with a low log-probability,
    or far above it); fillers ("Um."); weak phantoms ("Thank you.") when there is doubt; and
    looping text. Short real answers such as "Yes." or "Stop." pass.
    """
    text = transcript.text.strip()
    if not text:
        return "empty transcript"
    spoken = _ANNOTATION.sub(" ", text)
    if not any(ch.isalnum() for ch in spoken):
        if any(ch.isalnum() for ch in text):
            return f"only a sound annotation ({text!r})"
        return f"no words ({text!r})"
    norm = normalize_text(spoken)
    if norm in KNOWN_PHANTOMS:
        return f"known phantom phrase ({text!r})"
    nsp, logprob = transcript.no_speech_prob, transcript.avg_logprob
    if nsp > no_speech_threshold and (logprob < -1.0 or nsp > (1.0 + no_speech_threshold) / 2):
        return f"no speech (no_speech_prob {nsp:.2f}, avg_logprob {logprob:.2f}) for {text!r}"
    if norm in FILLERS:
        return f"only a filler ({text!r})"
    if norm in WEAK_PHANTOMS and (nsp > no_speech_threshold / 2 or logprob < -0.7):
        return f"likely phantom ({text!r}, no_speech_prob {nsp:.2f}, avg_logprob {logprob:.2f})"
    if len(text) > 12 and compression_ratio(text) > _REPETITIVE_RATIO:
        return f"repetitive text ({text[:40]!r}…)"
    return None
