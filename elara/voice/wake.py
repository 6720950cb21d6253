"""Wake-word detection with openWakeWord (ONNX Runtime), one 80 ms frame at a time."""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import io
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from elara.audio.frames import FRAME_SAMPLES, FRAME_SECONDS, AudioFrame
from elara.errors import ModelLoadError, ModelNotFoundError
from elara.voice.models import WAKE_WORD_KEY, friendly_wake_name
from elara.voice.stt import PhraseCheck
from elara.voice.verifier import VERIFY_FROM, WakeVerifier
from elara.voice.wake_phrase import says_wake_phrase

log = logging.getLogger(__name__)

#: The audio a doubtful wake is confirmed on: 2 s before the score crossed `confirm_from` and
#: three frames (0.24 s) after, so the whole phrase is in it whether the score rose early or late.
CONFIRM_BEFORE_SECONDS = 2.0
CONFIRM_AFTER_FRAMES = 3
#: A doubtful score that rises to this many times what a turned-down check saw is asked about
#: again, on later audio: from a low `confirm_from` the first question can come before the phrase
#: is over ("Hey …" alone), and the score does not fall back between "Hey" and "Jarvis".
RECHECK_RISE = 2.0
#: While she speaks, doubtful scores are checked only from here (or `confirm_from`, if higher):
#: what cancelling leaves of her voice scores too, and each check holds the wake word's frames for
#: ≈0.8 s of CPU while Piper speaks; the floor spares that CPU without letting more of her own
#: voice wake her.
DURING_PLAYBACK_CONFIRM_FROM = 0.005
#: openWakeWord's gate zeroes a frame's scores unless its VAD heard speech 4–6 frames before it:
#: the last this many frames (this one among them, 0.56 s) are the gate's reach. Once all of them
#: are quiet the gate stays shut until the VAD hears speech again, and only the VAD needs to run.
GATE_FRAMES = 7
#: With `shorten_pauses`: the longest silence inside speech that the second copy of the models
#: hears as one frame (0.96 s); its score counts where the gate heard speech in the last
#: GATE_FRAMES frames, as for the first copy.
SHORTENED_PAUSE_FRAMES = 12
#: After this much silence (2 s, more than the models' 1.28 s window and the 0.76 s each of its
#: frames is made from) the second copy has forgotten the speech before and hears nothing more
#: until speech comes again.
SHORTENED_FORGET_FRAMES = 25
#: The quiet frames kept for the features to catch up on when the VAD hears speech again: the
#: first score the gate lets through (4 frames on) reads 16 feature frames, each made from the
#: 0.76 s of audio before it, so 22 frames back are needed; 32 leave a margin.
REPLAYED_FRAMES = 32
#: The raw audio openWakeWord keeps for its features (1 s; it keeps 10 s, and copies all of it
#: into a list every frame to read the last 110 ms).
RAW_SAMPLES_KEPT = 16_000

#: How much less likely than what Whisper hears unprompted its reading with the wake phrase may
#: be, as a natural log: e⁶ ≈ 400 times for a doubtful score, e¹⁰ for a confident one (≥ the
#: threshold), which the model's own certainty already backs. Both must read the whole phrase:
#: told the phrase, Whisper writes a name in a list ("…Charles Jarvik.") as "Charles Jarvis.".
CONFIRM_LOG_ODDS = -6.0
CONFIDENT_LOG_ODDS = -10.0
#: The odds a second model (`WakeWord.ConfirmSecondModel`) must give when it reads again what the
#: first check turned down (the whole phrase): for a doubtful score, the first reading's own …
SECOND_LOG_ODDS = CONFIRM_LOG_ODDS
#: … and for a confident one, looser, as the first reading's is: robotic and fast voices the model
#: is sure of, base reads as the phrase only at e⁻³–e⁻⁸ ("Okay, sorry." told: "Hey Jarvis.").
SECOND_CONFIDENT_LOG_ODDS = -8.0

#: Checks audio (16 kHz int16) and says whether wake word `name` was said in it; the flag says
#: whether the model's score was confident (≥ the threshold) rather than doubtful.
Confirmer = Callable[[np.ndarray, str, bool], bool]


def phrase_confirmed(check: PhraseCheck, name: str, log_odds: float = CONFIRM_LOG_ODDS) -> bool:
    """A doubtful wake stands when Whisper writes the wake phrase itself, or writes it when told
    the wake phrase came just before and that reading's log odds against its own are at least
    `log_odds` (the default −6: at most ≈400 times less likely). Whisper alone mishears a flat or
    accented "Hey Jarvis" ("A jar of bits"), and told the phrase it writes it into anything; the
    odds part what it can hear as the phrase from what only the hint put there. The name must be
    spelled right here: "Jervis" is a near miss, not a match. The phrase must be whole ("Hey
    Jarvis"): a name in passing ("Calling Jarvie, Rhys…", which Whisper writes "Jarvis") can be
    read as the name, even under a confident score."""
    if says_wake_phrase(check.heard, name):
        return True
    return says_wake_phrase(check.prompted, name) and check.log_odds >= log_odds


@dataclass(frozen=True)
class _Candidate:
    """A score waiting for the confirmer: the wake word, its best score so far, the `captured_at`
    of its crossing, frames still to wait, and whether it crossed the threshold."""

    name: str
    score: float
    at: float
    wait: int
    confident: bool


@dataclass(frozen=True)
class WakeDetection:
    """A wake word was heard: which one, how sure, and the `captured_at` of the deciding frame."""

    name: str
    score: float
    at: float


class WakeWordDetector:
    """Scores every frame with each wake-word model and decides when one has been said.

    A model fires when its score is ≥ `threshold` for `trigger_level` consecutive frames. After a
    detection the models and their audio buffers are reset, and nothing fires again until
    `refractory_seconds` of frame time (by `captured_at`) have passed. Not thread-safe: feed it
    from one task.

    openWakeWord's Silero VAD gate (`vad_threshold`, on in the shipped settings) zeroes the scores
    unless speech was heard 0.4–0.56 s earlier.

    Two more stages, both off by default. Per-user `verifiers` (`elara wake enroll`) rescore the
    frames the model scores ≥ VERIFY_FROM. A doubtful score, from `confirm_from` up to the
    threshold (from DURING_PLAYBACK_CONFIRM_FROM at least while she speaks, `during_playback`),
    wakes only if the confirmer set by `confirm_with` (Whisper, in the daemon) hears the wake word
    in the last ≈2.2 s; with `confirm_confident`, so does a confident one (the confirmer is told
    which it is); `process` runs it inline, so the frame that asks takes as long.

    With `shorten_pauses` (needs the VAD gate), a second copy of the models hears each silence
    inside speech (up to SHORTENED_PAUSE_FRAMES) as its first frame alone: "Hey … Jarvis" said
    with a pause reaches it as the phrase the models were trained on. The higher of the two
    copies' scores counts, except while she speaks: what cancelling leaves of her voice is speech
    too, so then only the first copy's does.
    """

    def __init__(
        self,
        model_paths: Sequence[Path],
        *,
        threshold: float = 0.5,
        trigger_level: int = 1,
        refractory_seconds: float = 2.0,
        vad_threshold: float = 0.0,
        verifiers: Sequence[WakeVerifier] = (),
        confirm_from: float = 0.0,
        confirm_confident: bool = False,
        shorten_pauses: bool = False,
    ) -> None:
        paths = _model_files(model_paths)
        _check_options(threshold=threshold, trigger_level=trigger_level, vad_threshold=vad_threshold,
                       confirm_from=confirm_from, shorten_pauses=shorten_pauses)
        self.threshold = float(threshold)
        self.trigger_level = int(trigger_level)
        self.refractory_seconds = float(refractory_seconds)
        self._model = _load_models(paths, vad_threshold=vad_threshold)
        self._scorer = _GatedScorer(self._model)
        self._initial_features = self._model.preprocessor.feature_buffer.copy()
        # openWakeWord's key of a score ("hey_jarvis_v0.1", a class label) → the friendly name
        self._names = _friendly_names(self._model)
        self._shortener = _PauseShortener(_load_models(paths)) if shorten_pauses else None
        # wake word → (the feature window its model reads, its verifier)
        self._verifiers = {verifier.wake_word: (self._model.model_inputs[self._model_key(verifier.wake_word)],
                                                verifier) for verifier in self._known(verifiers)}
        #: Scores from here up to the threshold wake only when the confirmer hears the wake word.
        self.confirm_from = float(confirm_from)
        #: Whether scores at or above the threshold are put to the confirmer too.
        self.confirm_confident = bool(confirm_confident)
        #: Set while she speaks (by the voice loop): a confident score then wakes at once, and a
        #: doubtful one is checked only from DURING_PLAYBACK_CONFIRM_FROM. The loop's barge-in gate
        #: stands in for the check there, and the wake word said over her must silence her at
        #: once, not ≈0.5 s later.
        self.during_playback = False
        self._confirmer: Confirmer | None = None
        self._history: collections.deque[np.ndarray] = collections.deque(
            maxlen=round(CONFIRM_BEFORE_SECONDS / FRAME_SECONDS) + CONFIRM_AFTER_FRAMES)
        self._candidate: _Candidate | None = None
        self._armed = self._confident_armed = True
        self._declined: float | None = None  # the score a turned-down doubtful check saw
        #: Wakes handed to the confirmer, and those it confirmed.
        self.confirmations = {"asked": 0, "confirmed": 0}
        self._run: dict[str, int] = {}
        self._quiet_until = float("-inf")
        #: The latest score of every wake word (friendly name → 0..1), for benchmarks and logs.
        self.last_scores: dict[str, float] = {}
        #: CPU-side seconds the last `process` call took.
        self.last_seconds = 0.0

    def _known(self, verifiers: Sequence[WakeVerifier]) -> Sequence[WakeVerifier]:
        """`verifiers`, each for a loaded wake word (a ModelLoadError names one that is not)."""
        for verifier in verifiers:
            if verifier.wake_word not in self.names:
                raise ModelLoadError(
                    f"{WAKE_WORD_KEY}: a verifier is for {verifier.wake_word!r}, which is not loaded "
                    f"({', '.join(self.names)}); add it to WakeWord.Models or drop the verifier from "
                    "WakeWord.Verifiers"
                )
        return verifiers

    @property
    def names(self) -> list[str]:
        """The friendly names of the loaded wake words ("hey_jarvis", …)."""
        return list(dict.fromkeys(self._names.values()))

    def confirm_with(self, confirmer: Confirmer | None) -> None:
        """Set (or, with None, remove) what confirms wakes scored from `confirm_from` to the
        threshold (and above it, with `confirm_confident`)."""
        self._confirmer = confirmer
        self._candidate = None

    @property
    def confirmer(self) -> Confirmer | None:
        """What confirms checked wakes (`confirm_with`), or None."""
        return self._confirmer

    @property
    def shortens_pauses(self) -> bool:
        """Whether a second copy of the models hears pauses inside speech cut short."""
        return self._shortener is not None

    @property
    def verified(self) -> list[str]:
        """The wake words a per-user verifier checks."""
        return list(self._verifiers)

    def window_shape(self, name: str) -> tuple[int, ...]:
        """The shape of the feature window wake word `name` is scored on (16 × 96 for hey_jarvis)."""
        key = self._model_key(name)
        return tuple(self._model.preprocessor.get_features(self._model.model_inputs[key]).shape[1:])

    def scored_windows(self, samples: np.ndarray, name: str) -> list[tuple[float, np.ndarray]]:
        """Feed a clip from a fresh state: each frame's own score for `name` (no verifier) and the
        feature window it was scored on. Leaves the detector reset."""
        key = self._model_key(name)
        inputs = self._model.model_inputs[key]
        clip = np.asarray(samples).astype(np.int16, copy=False).reshape(-1)
        self.reset()
        found = []
        for start in range(0, len(clip) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
            raw = self._model.predict(clip[start : start + FRAME_SAMPLES])
            score = self._named(raw).get(name, 0.0)
            found.append((score, self._model.preprocessor.get_features(inputs)[0].copy()))
        self.reset()
        return found

    def process(self, frame: AudioFrame) -> WakeDetection | None:
        """Score one frame; a WakeDetection when a wake word has just been said, else None."""
        started = time.perf_counter()
        samples = np.asarray(frame.samples)
        if samples.dtype != np.int16:
            samples = samples.astype(np.int16)
        samples = samples.reshape(-1)
        self._history.append(samples)
        scores = self._verified(self._model, self._scorer.predict(samples))
        if self._shortener is not None:
            speech = self._model.vad.prediction_buffer[-1] >= self._model.vad_threshold
            shortened = self._verified(self._shortener.model, self._shortener.predict(samples, speech))
            gate = list(self._model.vad.prediction_buffer)[-GATE_FRAMES:]
            if not self.during_playback and max(gate, default=0.0) >= self._model.vad_threshold:
                for name, score in shortened.items():
                    scores[name] = max(scores.get(name, 0.0), score)
        detection: WakeDetection | None = None
        if frame.captured_at >= self._quiet_until:
            best: tuple[float, str] | None = None
            for name, score in scores.items():
                if score >= self.threshold:
                    self._run[name] = self._run.get(name, 0) + 1
                    if self._run[name] >= self.trigger_level and (best is None or score > best[0]):
                        best = (score, name)
                else:
                    self._run[name] = 0
            checking = self._confirmer is not None and self.confirm_from > 0
            if best is not None and not (checking and self.confirm_confident and not self.during_playback):
                detection = WakeDetection(name=best[1], score=best[0], at=frame.captured_at)
            elif checking:
                detection = self._checked(scores, frame.captured_at, best)
            if detection is not None:
                self.reset()
                self._quiet_until = frame.captured_at + self.refractory_seconds
        self.last_scores = scores
        self.last_seconds = time.perf_counter() - started
        return detection

    def _checked(self, scores: dict[str, float], at: float,
                 confident: tuple[float, str] | None) -> WakeDetection | None:
        """A score crossed `confirm_from`, or the threshold (`confident`, with `confirm_confident`):
        three frames on, ask the confirmer about the last ≈2.2 s. One question per crossing (it
        re-arms when the score falls back) unless a turned-down score rises RECHECK_RISE times,
        and a confident score asks again, as confident."""
        name, score = max(scores.items(), key=lambda item: item[1], default=("", 0.0))
        floor = max(self.confirm_from, DURING_PLAYBACK_CONFIRM_FROM) if self.during_playback else self.confirm_from
        if confident is None:
            self._confident_armed = True
        waiting_confident = self._candidate is not None and self._candidate.confident
        if confident is not None and self._confident_armed and not waiting_confident:
            self._candidate = _Candidate(confident[1], confident[0], at, CONFIRM_AFTER_FRAMES, confident=True)
            self._armed = self._confident_armed = False
        elif self._candidate is None and score >= floor and (
                self._armed or (self._declined is not None and score >= RECHECK_RISE * self._declined)):
            self._candidate = _Candidate(name, score, at, CONFIRM_AFTER_FRAMES, confident=False)
            self._armed, self._declined = False, None
        elif self._candidate is not None:
            c = self._candidate
            self._candidate = dataclasses.replace(c, score=max(c.score, scores.get(c.name, 0.0)), wait=c.wait - 1)
        if score < floor:
            self._armed, self._declined = True, None
        if self._candidate is None or self._candidate.wait > 0:
            return None
        c, self._candidate = self._candidate, None
        assert self._confirmer is not None
        self.confirmations["asked"] += 1
        kind = "confident" if c.confident else "doubtful"
        if not self._confirmer(np.concatenate(self._history), c.name, c.confident):
            log.debug("a %s %s (score %.2f) was not confirmed", kind, c.name, c.score)
            if not c.confident and not self._armed:
                self._declined = c.score
            return None
        self.confirmations["confirmed"] += 1
        log.info("%s confirmed by the transcript (%s score %.2f)", c.name, kind, c.score)
        return WakeDetection(name=c.name, score=c.score, at=c.at)

    def _verified(self, model: Any, raw: dict[str, Any]) -> dict[str, float]:
        """`model`'s scores by friendly name, the verified wake words' rescored by their verifier."""
        scores = self._named(raw)
        for name, (inputs, verifier) in self._verifiers.items():
            # The verifier decides for the frames the model already half believes in.
            if scores.get(name, 0.0) >= VERIFY_FROM:
                scores[name] = verifier.probability(model.preprocessor.get_features(inputs))
        return scores

    def _named(self, raw: dict[str, Any]) -> dict[str, float]:
        """openWakeWord's scores keyed by friendly wake-word name."""
        return {self._names.get(k, k): float(v) for k, v in raw.items()}

    def _model_key(self, name: str) -> str:
        """The openWakeWord model that scores wake word `name`."""
        for key, mapping in self._model.class_mapping.items():
            if (self._model.model_outputs[key] == 1 and friendly_wake_name(key) == name) or (
                    self._model.model_outputs[key] > 1 and name in mapping.values()):
                return key
        raise ValueError(f"no loaded wake word {name!r} ({', '.join(self.names)})")

    def reset(self) -> None:
        """Forget all audio and scores (between activations); also ends a refractory period."""
        _reset_model(self._model, self._initial_features)
        self._scorer.reset()
        if self._shortener is not None:
            self._shortener.reset()
        if self._model.vad_threshold > 0:  # the VAD's recurrent state and its recent decisions
            self._model.vad.reset_states()
            self._model.vad.prediction_buffer.clear()
        self._run.clear()
        self._history.clear()
        self._candidate = None
        self._armed = self._confident_armed = True
        self._declined = None
        self._quiet_until = float("-inf")
        self.last_scores = {}


class _GatedScorer:
    """openWakeWord's model under its VAD gate, sparing the features and the wake models while the
    gate cannot open: after GATE_FRAMES quiet frames only the VAD runs, and the frames are kept.
    When the VAD hears speech, the features are first fed the last REPLAYED_FRAMES kept frames, so
    every score the gate lets through is read from the same window as if each frame had been scored.
    Without the gate (`vad_threshold` 0) every frame is scored."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._shut: dict[str, float] | None = None  # the scores while the gate is shut (all 0.0)
        self._kept: collections.deque[np.ndarray] = collections.deque(maxlen=REPLAYED_FRAMES)

    def predict(self, heard: np.ndarray) -> dict[str, Any]:
        """openWakeWord's scores for this frame, its VAD's verdict on it appended."""
        model = self.model
        shut = self._shut  # read once: `reset` may come from the event loop's thread meanwhile
        if shut is not None:
            vad = model.vad
            state = vad._h, vad._c
            vad(heard)
            if vad.prediction_buffer[-1] < model.vad_threshold:
                self._kept.append(heard)
                return dict(shut)
            # Speech: take back the VAD's step (predict takes it again), catch the features up.
            vad._h, vad._c = state
            vad.prediction_buffer.pop()
            for kept in self._kept:
                model.preprocessor(kept)
            self.reset()
        scores: dict[str, Any] = model.predict(heard)
        recent = list(model.vad.prediction_buffer)[-GATE_FRAMES:] if model.vad_threshold > 0 else []
        if len(recent) == GATE_FRAMES and max(recent) < model.vad_threshold:
            self._shut = dict.fromkeys(scores, 0.0)
        return scores

    def reset(self) -> None:
        """Score every frame again (the model was reset, or speech came)."""
        self._shut = None
        self._kept.clear()


class _PauseShortener:
    """The second copy of the models (`shorten_pauses`). It hears every frame, so a phrase
    followed by silence scores as it does in the first; but when speech resumes within
    SHORTENED_PAUSE_FRAMES of silence, the copy is put back to where that silence's first frame
    left it, as if the rest had not been."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._initial_features = model.preprocessor.feature_buffer.copy()
        self._silent_frames = 0  # frames in a row the gate has heard no speech
        self._before_pause: _ModelState | None = None  # the copy as the current silence's first frame left it

    def predict(self, heard: np.ndarray, speech: bool) -> dict[str, Any]:
        """The copy's raw scores for this frame, given whether the gate heard speech in it."""
        if speech:
            if self._before_pause is not None:
                _restore(self.model, self._before_pause)
            self._before_pause, self._silent_frames = None, 0
        else:
            self._silent_frames += 1
            if self._silent_frames == 2:
                self._before_pause = _saved(self.model)
            elif self._silent_frames > SHORTENED_PAUSE_FRAMES:
                self._before_pause = None  # a pause that long is one
            if self._silent_frames > SHORTENED_FORGET_FRAMES:
                return {}  # it has heard enough silence to forget the speech before; spare the CPU
        return self.model.predict(heard)

    def reset(self) -> None:
        """Forget all audio and any pause half heard."""
        _reset_model(self.model, self._initial_features)
        self._silent_frames, self._before_pause = 0, None


def _model_files(model_paths: Sequence[Path]) -> list[Path]:
    """The wake-word model files, each of which must exist."""
    paths = [Path(p) for p in model_paths]
    if not paths:
        raise ValueError("WakeWordDetector needs at least one model")
    for path in paths:
        if not path.is_file():
            raise ModelNotFoundError(f"{WAKE_WORD_KEY}: the wake-word model {path} does not exist")
    return paths


def _check_options(*, threshold: float, trigger_level: int, vad_threshold: float, confirm_from: float,
                   shorten_pauses: bool) -> None:
    """A ValueError naming the first of the detector's options out of range."""
    if trigger_level < 1:
        raise ValueError("trigger_level must be at least 1")
    if not 0.0 <= vad_threshold < 1.0:
        raise ValueError("vad_threshold must be 0 (off) or below 1")
    if shorten_pauses and vad_threshold <= 0:
        raise ValueError("shorten_pauses needs the VAD gate (vad_threshold above 0) to hear the pauses")
    if not 0.0 <= confirm_from <= threshold:
        raise ValueError("confirm_from must be 0 (off) to the threshold")


def _load_models(paths: Sequence[Path], *, vad_threshold: float = 0.0) -> Any:
    """The wake-word models in one openWakeWord Model (ONNX Runtime), gated by its Silero VAD
    from `vad_threshold` (0: no gate)."""
    import openwakeword
    from openwakeword.model import Model

    # openWakeWord prints its pretrained model list on stdout when a Model is built.
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            model = Model(wakeword_models=[str(p) for p in paths], inference_framework="onnx",
                          vad_threshold=float(vad_threshold))
    except Exception as exc:  # a damaged or foreign .onnx file
        raise ModelLoadError(
            f"{WAKE_WORD_KEY}: {', '.join(map(str, paths))} does not load: {type(exc).__name__}: {exc}"
        ) from exc
    _keep_less_raw_audio(model)
    # Multi-class models (the built-in "timer") name their classes ("5_minute_timer"), but
    # openWakeWord only finds the names when the file is called exactly "timer".
    for key in model.class_mapping:
        known = openwakeword.model_class_mappings.get(friendly_wake_name(key))
        if known and model.model_outputs[key] > 1:
            model.class_mapping[key] = dict(known)
    return model


def _friendly_names(model: Any) -> dict[str, str]:
    """openWakeWord keys a score by the file's stem ("hey_jarvis_v0.1"), or by the class label for
    a multi-class model; detections use friendly names ("hey_jarvis")."""
    names: dict[str, str] = {}
    for key, mapping in model.class_mapping.items():
        if model.model_outputs[key] == 1:
            names[key] = friendly_wake_name(key)
        else:
            names.update({label: label for label in mapping.values()})
    return names


def _reset_model(model: Any, initial_features: np.ndarray) -> None:
    """Forget an openWakeWord model's audio, features and scores."""
    model.reset()
    features = model.preprocessor
    if hasattr(features, "reset"):  # openWakeWord ≥ 0.6
        features.reset()
    else:
        features.raw_data_buffer.clear()
        features.melspectrogram_buffer = np.ones((76, 32))
        features.accumulated_samples = 0
        features.raw_data_remainder = np.empty(0)
        features.feature_buffer = initial_features.copy()
    _keep_less_raw_audio(model)


def _keep_less_raw_audio(model: Any) -> None:
    """Keep RAW_SAMPLES_KEPT of raw audio for the features (the same features, less copying)."""
    features = model.preprocessor
    if features.raw_data_buffer.maxlen != RAW_SAMPLES_KEPT:
        features.raw_data_buffer = collections.deque(features.raw_data_buffer, maxlen=RAW_SAMPLES_KEPT)


#: What an openWakeWord model keeps between frames: its features' buffers and its scores.
_FEATURE_STATE = ("raw_data_buffer", "melspectrogram_buffer", "accumulated_samples", "raw_data_remainder",
                  "feature_buffer")
_ModelState = tuple[dict[str, Any], dict[str, Any]]


def _saved(model: Any) -> _ModelState:
    """A copy of what `model` keeps between frames."""
    features = model.preprocessor
    return ({name: copy.copy(getattr(features, name)) for name in _FEATURE_STATE},
            {name: copy.copy(scores) for name, scores in model.prediction_buffer.items()})


def _restore(model: Any, state: _ModelState) -> None:
    """Put `model` back to a `_saved` state, which it then owns (a state is restored once)."""
    features, scores = state
    for name, value in features.items():
        setattr(model.preprocessor, name, value)
    model.prediction_buffer.update(scores)
