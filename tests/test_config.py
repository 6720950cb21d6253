"""Configuration layers, binding and the messages a user sees for a bad value."""

import dataclasses
import json
from pathlib import Path

import pytest

from elara.config import load_settings, load_settings_with_sources, to_json
from elara.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent


def write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


def test_packaged_defaults_are_the_repo_file_and_bind():
    from importlib import resources

    import elara

    packaged = resources.files(elara).joinpath("appsettings.json").read_text(encoding="utf-8")
    assert packaged == (REPO / "config" / "appsettings.json").read_text(encoding="utf-8")
    s = load_settings(env={})
    assert s.language_model.host == "http://127.0.0.1:11434"
    assert s.context.last_n == 6
    assert s.context.storage_root is None
    assert s.context.encryption_key == "replace-me-before-deployment"
    assert s.language_model.options["num_ctx"] == 4096
    assert s.language_model.personality == "assistant" and s.language_model.system_prompt is None
    assert s.language_model.provider == "auto"
    assert s.language_model.embedded_model is None and s.language_model.embedded_threads is None


def test_the_packaged_defaults_name_each_section_and_key_once():
    def once(pairs: list[tuple[str, object]]) -> dict[str, object]:
        keys = [key for key, _ in pairs]
        assert len(set(keys)) == len(keys), f"named twice: {sorted({k for k in keys if keys.count(k) > 1})}"
        return dict(pairs)

    json.loads((REPO / "config" / "appsettings.json").read_text(encoding="utf-8"), object_pairs_hook=once)


def test_layers_apply_in_order(tmp_path):
    xdg = tmp_path / "xdg"
    write(xdg / "elara" / "appsettings.json", {"Context": {"LastN": 3}, "Logging": {"Level": "DEBUG"}})
    explicit = write(tmp_path / "mine" / "appsettings.json", {"context": {"lastn": 4}})
    write(tmp_path / "mine" / "appsettings.Development.json", {"Context": {"LastN": 5}})
    env = {"XDG_CONFIG_HOME": str(xdg), "ELARA_ENVIRONMENT": "Development"}

    s, sources = load_settings_with_sources(explicit, env)
    assert s.context.last_n == 5
    assert s.logging.level == "DEBUG"  # from the XDG layer, untouched by later ones
    assert [p.name for p in sources.files] == [
        "appsettings.json", "appsettings.json", "appsettings.Development.json"]

    env["ELARA__CONTEXT__LASTN"] = "2"
    assert load_settings(explicit, env).context.last_n == 2


def test_elara_config_variable_names_the_file(tmp_path):
    path = write(tmp_path / "a.json", {"LanguageModel": {"Model": "qwen2.5:1.5b"}})
    assert load_settings(env={"ELARA_CONFIG": str(path)}).language_model.model == "qwen2.5:1.5b"


def test_env_values_are_read_as_the_target_type():
    env = {
        "ELARA__LanguageModel__TimeoutSeconds": "2.5",
        "ELARA__LanguageModel__Options__temperature": "0.1",
        "ELARA__LanguageModel__KeepAlive": "-1",
        "ELARA__Context__MaxHistoryTokens": "null",
        "ELARA__Context__StorageRoot": "/tmp/elara-store",
        "ELARA__Logging__Level": "warning",
    }
    s = load_settings(env=env)
    assert s.language_model.timeout_seconds == 2.5
    assert s.language_model.options["temperature"] == 0.1
    assert s.language_model.options["num_ctx"] == 4096  # the rest of Options stays
    assert s.language_model.keep_alive == -1
    assert s.context.max_history_tokens is None
    assert s.context.storage_root == "/tmp/elara-store"
    assert s.logging.level == "WARNING"


def test_embedded_provider_settings_from_the_environment():
    s = load_settings(env={"ELARA__LanguageModel__Provider": "Embedded",
                           "ELARA__LanguageModel__EmbeddedModel": "models/qwen2.5-0.5b.gguf",
                           "ELARA__LanguageModel__EmbeddedThreads": "2"})
    assert s.language_model.provider == "embedded"
    assert s.language_model.embedded_model == "models/qwen2.5-0.5b.gguf"
    assert s.language_model.embedded_threads == 2
    back = load_settings(env={"ELARA__LanguageModel__EmbeddedModel": "null"})
    assert back.language_model.embedded_model is None


@pytest.mark.parametrize("env, message", [
    ({"ELARA__Context__LastN": "six"}, 'Context.LastN: expected an integer from 0 to 1000, got "six"'),
    ({"ELARA__Context__LastN": "-1"}, "Context.LastN: expected an integer from 0 to 1000"),
    ({"ELARA__SpeechToText__ReadAgainBeamSize": "11"}, "SpeechToText.ReadAgainBeamSize: expected an integer from 0 to 10"),
    ({"ELARA__SpeechToText__NoiseSuppression": "5"}, "SpeechToText.NoiseSuppression: expected an integer from 0 to 4"),
    ({"ELARA__WakeWord__ConfirmBeamSize": "0"}, "WakeWord.ConfirmBeamSize: expected an integer from 1 to 10"),
    ({"ELARA__Context__Colour": "blue"}, "Context.Colour: unknown key"),
    ({"ELARA__Voice__Speed": "1"}, "Voice: unknown key"),
    ({"ELARA__LanguageModel__Api": "rest"}, 'LanguageModel.Api: expected one of "chat", "generate"'),
    ({"ELARA__LanguageModel__Host": "ftp://x"}, "LanguageModel.Host: expected an http(s) URL"),
    ({"ELARA__LanguageModel__KeepAlive": "forever"}, "LanguageModel.KeepAlive: expected a duration"),
    ({"ELARA__LanguageModel__Options__tempratur": "1"}, "LanguageModel.Options.tempratur: unknown Ollama option"),
    ({"ELARA__LanguageModel__Options__num_ctx": "big"}, "LanguageModel.Options.num_ctx:"),
    ({"ELARA__Context__EncryptionKey": " "}, "Context.EncryptionKey: expected a non-empty string"),
    ({"ELARA__Logging__Level": "LOUD"}, "Logging.Level: expected one of"),
    ({"ELARA__LanguageModel__Provider": "cloud"},
     'LanguageModel.Provider: expected one of "auto", "ollama", "embedded", got "cloud"'),
    ({"ELARA__LanguageModel__EmbeddedModel": " "}, "LanguageModel.EmbeddedModel: expected a non-empty string"),
    ({"ELARA__LanguageModel__EmbeddedThreads": "0"}, "LanguageModel.EmbeddedThreads: expected an integer from 1"),
    ({"ELARA__LanguageModel__EmbeddedThreads": "two"}, "LanguageModel.EmbeddedThreads: expected an integer"),
    ({"ELARA__Listening__TurnJudgment": "smart"}, 'Listening.TurnJudgment: expected one of "transcript", "off"'),
    ({"ELARA__Listening__MaxPauseMs": "500"}, "Listening.MaxPauseMs (500) is shorter than Listening.EndSilenceMs (600)"),
    ({"ELARA__Listening__UncertainPauseMs": "2500"}, "Listening.UncertainPauseMs (2500) must lie between"),
    ({"ELARA__Listening__FinishedMs": "1500", "ELARA__Listening__UncertainPauseMs": "1300"},
     "Listening.UncertainPauseMs (1300) must lie between"),
    ({"ELARA__Listening__FinishedMs": "700", "ELARA__Listening__UncertainPauseMs": "1300",
      "ELARA__Listening__EndSilenceMs": "650"}, "Listening.FinishedMs (700) is longer than Listening.EndSilenceMs"),
    ({"ELARA__Audio__OutputLatencyMs": "5"}, "Audio.OutputLatencyMs: expected an integer from 10"),
    ({"ELARA__SpeechToText__Engine": "http://box:10300"}, "SpeechToText.Engine: 'http://box:10300': expected local, wyoming://host:port"),
    ({"ELARA__TextToSpeech__Engine": "wyoming://box"}, "TextToSpeech.Engine: 'wyoming://box' needs a host and a port"),
    ({"ELARA__TextToSpeech__TimeoutSeconds": "0"}, "TextToSpeech.TimeoutSeconds: expected a number from 0.5"),
    ({"ELARA__Satellites": '[{"Name": "kitchen", "Uri": "http://x:1"}]'}, "Satellites[0].Uri: 'http://x:1': expected wyoming://host:port"),
    ({"ELARA__Satellites": '[{"Name": "kitchen"}]'}, "Satellites[0].Uri: missing (each entry needs it)"),
    ({"ELARA__Satellites": '[{"Name": "kitchen", "Uri": "tcp://a:1", "Room": 2}]'}, "Satellites[0].Room: unknown key"),
    ({"ELARA__Satellites": '[{"Name": "a", "Uri": "tcp://a:1"}, {"Name": "A", "Uri": "tcp://b:1"}]'},
     "Satellites: each satellite needs its own Name"),
    ({"ELARA__Satellites": '{"Name": "a"}'}, "Satellites: expected a list"),
])
def test_bad_values_name_the_path(env, message):
    with pytest.raises(ConfigError) as info:
        load_settings(env=env)
    assert message in str(info.value)
    assert info.value.exit_status == 78


def test_mistyped_values_in_a_file(tmp_path):
    path = write(tmp_path / "c.json", {"Context": {"LastN": "six"}})
    with pytest.raises(ConfigError, match=r'Context\.LastN: expected an integer from 0 to 1000, got "six"'):
        load_settings(path, env={})
    path = write(tmp_path / "c.json", {"Context": {"LastN": True}})
    with pytest.raises(ConfigError, match=r"Context\.LastN: expected an integer"):
        load_settings(path, env={})
    path = write(tmp_path / "c.json", {"Context": 5})
    with pytest.raises(ConfigError, match=r"Context: expected an object, got 5"):
        load_settings(path, env={})


def test_broken_and_missing_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.json", env={})
    bad = write(tmp_path / "bad.json", '{"Context": {"LastN": 2,}}')
    with pytest.raises(ConfigError, match=r"bad\.json is not valid JSON: .* line 1"):
        load_settings(bad, env={})
    (tmp_path / "latin1.json").write_bytes(b'{"x": "\xe9"}')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_settings(tmp_path / "latin1.json", env={})
    array = write(tmp_path / "array.json", "[]")
    with pytest.raises(ConfigError, match="JSON object at the top level"):
        load_settings(array, env={})


def test_settings_are_frozen():
    s = load_settings(env={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.context.last_n = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.language_model.options["temperature"] = 1  # type: ignore[index]


def test_show_redacts_the_key():
    shown = to_json(load_settings(env={"ELARA__Context__EncryptionKey": "hunter2-secret"}))
    assert shown["Context"]["EncryptionKey"] == "(redacted)"
    assert "hunter2" not in json.dumps(shown)
    assert to_json(load_settings(env={}), redact=False)["Context"]["LastN"] == 6
