"""Where the history's passphrase comes from: a systemd credential, a key file, the config, or
the key generated on the first start (elara.service.keys)."""

import logging
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from elara.config import load_settings
from elara.conversation.crypto import DEFAULT_PASSPHRASE
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore
from elara.errors import ConfigError
from elara.service import doctor, keys
from elara.service.answering import encryption_passphrase
from tests.spec_reader import read_all


def test_precedence(tmp_path):
    key_file = tmp_path / "elara.key"
    key_file.write_text("from the file\n")
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "elara-key").write_text("from systemd")
    plain = load_settings(env={"ELARA__Context__EncryptionKey": "from config"})
    with_file = load_settings(env={"ELARA__Context__EncryptionKeyFile": str(key_file)})
    assert encryption_passphrase(plain, {}) == "from config"
    assert encryption_passphrase(with_file, {}) == "from the file"  # the trailing newline is not the key
    assert encryption_passphrase(with_file, {"CREDENTIALS_DIRECTORY": str(credentials)}) == "from systemd"
    # A credentials directory without our credential changes nothing.
    assert encryption_passphrase(plain, {"CREDENTIALS_DIRECTORY": str(tmp_path)}) == "from config"


def test_unusable_key_files_are_config_errors(tmp_path):
    missing = load_settings(env={"ELARA__Context__EncryptionKeyFile": str(tmp_path / "nope")})
    with pytest.raises(ConfigError, match="Context.EncryptionKeyFile: cannot read the key file"):
        encryption_passphrase(missing, {})
    (tmp_path / "empty").write_text("\n")
    empty = load_settings(env={"ELARA__Context__EncryptionKeyFile": str(tmp_path / "empty")})
    with pytest.raises(ConfigError, match="is empty") as info:
        encryption_passphrase(empty, {})
    assert info.value.exit_status == 78


# --- a key by default (elara.service.keys) ---------------------------------------------------------------

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture
def home(tmp_path):
    """An environment with its own configuration and cache directories and no configured key."""
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_CACHE_HOME": str(tmp_path / "cache")}


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_first_start_generates_a_private_key_and_later_starts_reuse_it(tmp_path, home, caplog):
    settings = load_settings(env=home)
    root = tmp_path / "store"
    with caplog.at_level(logging.INFO, logger="elara.service.keys"):
        first = keys.resolve(settings, home, generate_for=root)
    path = tmp_path / "config" / "elara" / "key"
    assert first.source == keys.KeySource(keys.GENERATED, path)
    assert path.read_text() == first.passphrase + "\n" and len(first.passphrase) >= 43
    assert first.passphrase != DEFAULT_PASSPHRASE
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["key"]  # no temp file left
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and str(path) in warned[0].getMessage()
    assert "losing it loses the history" in warned[0].getMessage()

    ConversationStore(root, first.passphrase).append(ChatMessage(ChatRole.USER, "hello", WHEN))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="elara.service.keys"):
        again = keys.resolve(settings, home, generate_for=root)
    assert again == first
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r["content"] for r in read_all(root, again.passphrase)] == ["hello"]


def test_a_store_written_with_the_default_key_keeps_it(tmp_path, home, caplog):
    root = tmp_path / "store"
    ConversationStore(root, DEFAULT_PASSPHRASE).append(ChatMessage(ChatRole.USER, "old", WHEN))
    key = keys.resolve(load_settings(env=home), home, generate_for=root)
    assert key == keys.Key(DEFAULT_PASSPHRASE, keys.KeySource(keys.DEFAULT))
    assert not (tmp_path / "config").exists()
    with caplog.at_level(logging.WARNING):
        store = ConversationStore(root, key.passphrase)
    assert [m.content for m in store.read_tail(5)] == ["old"]
    assert "default encryption key" in caplog.text


def test_resolving_without_a_store_generates_nothing(tmp_path, home):
    key = keys.resolve(load_settings(env=home), home)
    assert key.source.kind == keys.DEFAULT and key.passphrase == DEFAULT_PASSPHRASE
    assert not (tmp_path / "config").exists()


def test_a_configured_key_wins_over_the_generated_one(tmp_path, home):
    generated = keys.resolve(load_settings(env=home), home, generate_for=tmp_path / "store")
    key_file = tmp_path / "mine.key"
    key_file.write_text("from my file\n")
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "elara-key").write_text("from systemd\n")
    in_config = load_settings(env={**home, "ELARA__Context__EncryptionKey": "from config"})
    in_file = load_settings(env={**home, "ELARA__Context__EncryptionKeyFile": str(key_file)})
    assert keys.resolve(in_config, home).passphrase == "from config"
    assert keys.resolve(in_file, home).source == keys.KeySource(keys.KEY_FILE, key_file)
    with_credential = {**home, "CREDENTIALS_DIRECTORY": str(credentials)}
    assert keys.resolve(in_file, with_credential).passphrase == "from systemd"
    assert keys.resolve(load_settings(env=home), home) == generated


def test_an_existing_key_file_is_never_replaced(tmp_path):
    path = tmp_path / "elara" / "key"
    path.parent.mkdir()
    path.write_text("made by another process\n")
    assert keys.generate(path) == "made by another process"
    assert path.read_text() == "made by another process\n"


def test_a_wide_configuration_directory_is_made_private(tmp_path):
    directory = tmp_path / "elara"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    keys.generate(directory / "key")
    assert mode(directory) == 0o700 and mode(directory / "key") == 0o600


def test_unusable_generated_key_and_unwritable_directory_are_config_errors(tmp_path, home):
    (tmp_path / "config" / "elara").mkdir(parents=True)
    (tmp_path / "config" / "elara" / "key").write_text("\n")
    with pytest.raises(ConfigError, match="the generated key: the key file .* is empty"):
        keys.resolve(load_settings(env=home), home)
    blocked = {**home, "XDG_CONFIG_HOME": str(tmp_path / "a file")}
    (tmp_path / "a file").write_text("not a directory")
    with pytest.raises(ConfigError, match="cannot write a new encryption key") as info:
        keys.resolve(load_settings(env=home), blocked, generate_for=tmp_path / "store")
    assert "Context.EncryptionKeyFile" in str(info.value) and info.value.exit_status == 78


def test_doctor_says_where_the_key_is_and_writes_nothing(tmp_path, home, monkeypatch):
    for name in list(os.environ):
        if name.startswith("ELARA"):
            monkeypatch.delenv(name)
    for name, value in home.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    settings = load_settings()
    default = doctor.check_encryption_key(settings)
    assert not default.ok and "default passphrase" in default.detail
    assert default.fix.startswith("set Context.EncryptionKey")
    assert f"generates a random key into {tmp_path / 'config' / 'elara' / 'key'}" in default.fix
    assert not (tmp_path / "config").exists()  # the doctor generated nothing

    path = tmp_path / "config" / "elara" / "key"
    keys.generate(path)
    generated = doctor.check_encryption_key(settings)
    assert generated.ok and f"the generated key file {path}" in generated.detail
    assert "losing it loses the history" in generated.detail
    monkeypatch.setenv("ELARA__Context__EncryptionKeyFile", str(tmp_path / "missing.key"))
    unreadable = doctor.check_encryption_key(load_settings())
    assert not unreadable.ok and "cannot read the key file" in unreadable.detail


# --- the same rule for every command, as real processes -----------------------------------------


def elara(env, *args, stdin=None):
    return subprocess.run([sys.executable, "-m", "elara", *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def cli_env(home):
    """The process environment: `home`, no ELARA settings but the test model."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("ELARA") and k != "CREDENTIALS_DIRECTORY"}
    base.update(home)
    base.update({"ELARA__LanguageModel__Model": "test-model",
                 "ELARA__LanguageModel__TimeoutSeconds": "5"})
    return base


def test_ask_generates_the_key_and_every_command_uses_it(tmp_path, cli_env, ollama_server):
    cli_env["ELARA__LanguageModel__Host"] = ollama_server.url
    path = tmp_path / "config" / "elara" / "key"
    root = tmp_path / "cache" / "elara" / "Conversation"
    first = elara(cli_env, "ask", "first question")
    assert first.returncode == 0, first.stderr
    assert f"generated a new history encryption key in {path}" in first.stderr
    assert "default encryption key" not in first.stderr
    passphrase = path.read_text().rstrip("\n")
    assert mode(path) == 0o600 and mode(path.parent) == 0o700

    second = elara(cli_env, "chat", stdin="second question\n")
    assert second.returncode == 0, second.stderr
    assert "generated" not in second.stderr and path.read_text() == passphrase + "\n"
    assert [r["content"] for r in read_all(root, passphrase) if r["role"] == "User"] == [
        "first question", "second question"]
    listed = elara(cli_env, "history", "list")
    assert listed.returncode == 0 and "second question" in listed.stdout
    verified = elara(cli_env, "history", "verify")
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.strip() == "4 readable, 0 unreadable"


def test_read_only_commands_generate_no_key(tmp_path, cli_env):
    for command in (["history", "list"], ["history", "export"], ["history", "verify"],
                    ["memory", "list"]):
        done = elara(cli_env, *command)
        assert done.returncode == 0, (command, done.stderr)
    assert not (tmp_path / "config" / "elara" / "key").exists()


def test_a_default_key_store_keeps_working_and_warning(tmp_path, cli_env, ollama_server):
    cli_env["ELARA__LanguageModel__Host"] = ollama_server.url
    root = tmp_path / "cache" / "elara" / "Conversation"
    ConversationStore(root, DEFAULT_PASSPHRASE).append(ChatMessage(ChatRole.USER, "old", WHEN))
    done = elara(cli_env, "ask", "new")
    assert done.returncode == 0, done.stderr
    assert "default encryption key" in done.stderr
    assert not (tmp_path / "config" / "elara" / "key").exists()
    assert [r["content"] for r in read_all(root, DEFAULT_PASSPHRASE)][:2] == ["old", "new"]
