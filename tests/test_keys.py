"""Where the history's passphrase comes from: a systemd credential, a key file, or the config."""

import pytest

from elara.config import load_settings
from elara.errors import ConfigError
from elara.wiring import encryption_passphrase


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
