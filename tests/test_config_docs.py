"""Every setting declares its meaning and whether a reload applies it, and docs/configuration.md,
written from those declarations by `elara config docs`, stays current."""

import typing
from dataclasses import fields, is_dataclass
from pathlib import Path

from elara.cli import main
from elara.cli.config_docs import REGENERATE, render
from elara.settings import Settings, each_setting, restart_only_keys

DOCS = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def test_every_setting_says_what_it_means_in_one_line():
    missing = [s.key for s in each_setting() if not str(s.metadata.get("doc", "")).strip()]
    assert not missing, f"settings without doc=: {missing}"
    multiline = [s.key for s in each_setting() if "\n" in s.metadata["doc"]]
    assert not multiline, f"a setting's doc is one line: {multiline}"


def test_every_section_says_what_it_holds():
    hints = typing.get_type_hints(Settings)
    sections = [hints[f.name] for f in fields(Settings) if is_dataclass(hints[f.name])]
    assert sections and all(cls.__doc__ and cls.__doc__.strip() for cls in sections)


def test_every_key_is_walked_once():
    keys = [s.key for s in each_setting()]
    assert len(keys) == len(set(keys)) == 101
    assert {"LanguageModel.Provider", "Personalities", "Satellites", "Satellites[].Name",
            "Satellites[].Uri", "Logging.Level", "Tools.McpServers[].Command"} <= set(keys)


def test_restart_only_keys_are_read_from_the_metadata():
    assert restart_only_keys() == ("Context.StorageRoot", "Context.EncryptionKey", "Context.EncryptionKeyFile",
                                   "Announcements.Startup", "Satellites")


def test_docs_list_every_key_and_hide_secrets():
    text = render()
    for s in each_setting():
        assert f"| `{s.key}` |" in text
    assert text.count("\n| `") == len(list(each_setting()))
    assert "replace-me-before-deployment" not in text
    assert "| `Context.StorageRoot` | string or null | `null` |  |" in text
    assert "| `Listening.Mode` | string | `\"continued\"` | `wake_word`, `continued` |" in text
    assert "ELARA__Section__Key" in text and "elara config docs" in text


def test_docs_configuration_md_is_current():
    assert DOCS.read_text(encoding="utf-8") == render(), (
        f"docs/configuration.md is stale: regenerate it with `{REGENERATE}`")


def test_elara_config_docs_prints_it_even_over_a_bad_config(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("ELARA_CONFIG", raising=False)
    monkeypatch.setenv("ELARA__Context__LastN", "six")
    assert main(["config", "docs"]) == 0
    assert capsys.readouterr().out == render()
