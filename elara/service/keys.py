"""The history's passphrase: where it comes from, and the random one a new install generates.

In order, the first that is set wins:

1. the systemd credential `elara-key` (`$CREDENTIALS_DIRECTORY/elara-key`);
2. the file named by `Context.EncryptionKeyFile`;
3. `Context.EncryptionKey`, when it is not the published default passphrase;
4. the generated key file, `$XDG_CONFIG_HOME/elara/key` (`~/.config/elara/key`);
5. the default passphrase.

A command that may write the first message (`elara run`, `ask`, `chat`) resolves with the store's
directory: when it would fall through to the default passphrase and that store holds no message
yet, it generates a random passphrase into the key file first and uses it. A store already written
with the default passphrase keeps it (the store warns). Commands that only read never generate.

The key file is found by the same rule in the shell and under systemd, so `elara history` opens
what the service wrote: the user unit may write `~/.config/elara` (ReadWritePaths=), and the
system unit's user `elara` has its home in its StateDirectory, /var/lib/elara, so its key is
/var/lib/elara/.config/elara/key.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from elara.conversation.crypto import DEFAULT_PASSPHRASE
from elara.conversation.store import NAME_PATTERN
from elara.errors import ConfigError, WrongKeyError
from elara.service.files import fsync_dir, remove_quietly, write_temp
from elara.service.paths import config_home
from elara.settings import Settings

log = logging.getLogger(__name__)

CREDENTIAL_NAME = "elara-key"
#: The generated key file's name in the configuration directory.
KEY_FILE_NAME = "key"
#: Random bytes in a generated passphrase (token_urlsafe: 43 characters).
KEY_BYTES = 32

# Where a passphrase came from (KeySource.kind).
CREDENTIAL = "credential"
KEY_FILE = "key file"
CONFIG = "config"
GENERATED = "generated"
DEFAULT = "default"


@dataclass(frozen=True)
class KeySource:
    """Where a passphrase came from: one of the kinds above, and the file it was read from."""

    kind: str
    path: Path | None = None

    def describe(self) -> str:
        """Where the key is, in words a user can act on."""
        if self.kind == CREDENTIAL:
            return f"the systemd credential {CREDENTIAL_NAME} ({self.path})"
        if self.kind == KEY_FILE:
            return f"the file {self.path} (Context.EncryptionKeyFile)"
        if self.kind == GENERATED:
            return f"the generated key file {self.path}"
        if self.kind == CONFIG:
            return "Context.EncryptionKey"
        return "the default passphrase (Context.EncryptionKey is not set)"


@dataclass(frozen=True)
class Key:
    """A passphrase and where it came from."""

    passphrase: str
    source: KeySource


def generated_key_path(env: Mapping[str, str] | None = None) -> Path:
    """Where a generated passphrase is kept: `$XDG_CONFIG_HOME/elara/key`, else `~/.config/elara/key`."""
    return config_home(env) / KEY_FILE_NAME


def read_key_file(path: Path, what: str) -> str:
    """The passphrase in a key file without its trailing newline; ConfigError naming `what` if
    the file can't be read or holds nothing."""
    try:
        # A trailing newline is how editors and `echo` end a file, not part of the passphrase.
        key = path.read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what}: cannot read the key file {path} ({exc}); "
                          "fix the path or its permissions") from None
    if not key.strip():
        raise ConfigError(f"{what}: the key file {path} is empty; write the passphrase into it")
    return key


def configured(settings: Settings, env: Mapping[str, str] | None = None) -> Key | None:
    """The explicitly configured key (credential, key file, or a non-default EncryptionKey), or None."""
    env = os.environ if env is None else env
    if env.get("CREDENTIALS_DIRECTORY"):
        credential = Path(env["CREDENTIALS_DIRECTORY"]) / CREDENTIAL_NAME
        if credential.is_file():
            return Key(read_key_file(credential, f"the systemd credential {CREDENTIAL_NAME}"),
                       KeySource(CREDENTIAL, credential))
    if settings.context.encryption_key_file:
        path = Path(settings.context.encryption_key_file).expanduser()
        return Key(read_key_file(path, "Context.EncryptionKeyFile"), KeySource(KEY_FILE, path))
    if settings.context.encryption_key != DEFAULT_PASSPHRASE:
        return Key(settings.context.encryption_key, KeySource(CONFIG))
    return None


def resolve(settings: Settings, env: Mapping[str, str] | None = None, *,
            generate_for: Path | None = None) -> Key:
    """The history's passphrase (see the module docstring); ConfigError if a key file is unusable.

    With `generate_for` (the store's directory), a missing key is generated when that store holds
    no message yet. Without it nothing is written.
    """
    explicit = configured(settings, env)
    if explicit is not None:
        return explicit
    path = generated_key_path(env)
    if os.path.lexists(path):
        log.info("history encryption key: %s; losing it loses the history", path)
        return Key(read_key_file(path, "the generated key"), KeySource(GENERATED, path))
    if generate_for is not None and not holds_messages(generate_for):
        return Key(generate(path), KeySource(GENERATED, path))
    return Key(settings.context.encryption_key, KeySource(DEFAULT))


def lost_key_error(root: Path, error: WrongKeyError, env: Mapping[str, str] | None = None) -> WrongKeyError:
    """The history at `root` does not open with the default passphrase: when the generated key
    file is missing, it was most likely written with that key, and the error says to put it back."""
    path = generated_key_path(env)
    if os.path.lexists(path):
        return error
    return WrongKeyError(
        f"the history in {root} does not open with the default passphrase, and the generated key "
        f"file {path} it was most likely written with is missing; fix: put that file back from your "
        "copy (or set Context.EncryptionKeyFile to it), or move the history away to start a new one")


class KeyFileWatch:
    """Warns when the file the running key was read from is removed: the running daemon keeps the
    key it loaded, but the next start needs the file."""

    def __init__(self, source: KeySource, *, interval: float = 60.0) -> None:
        self.source = source
        self.interval = interval
        self._missing = False

    def check(self) -> bool:
        """Is the key file (if the key came from one) still there? Warns once when it goes."""
        path = self.source.path
        if path is None:
            return True
        present = os.path.exists(path)
        if not present and not self._missing:
            log.warning("the history's key file %s was removed: Elara keeps the key it loaded, but "
                        "will not start again without it; fix: put the file back from your copy now",
                        path)
        elif present and self._missing:
            log.info("the history's key file %s is back", path)
        self._missing = not present
        return present

    async def run(self) -> None:
        """Check every `interval` seconds until cancelled (returns at once for a key from no file)."""
        while self.source.path is not None:
            await asyncio.to_thread(self.check)
            await asyncio.sleep(self.interval)


def holds_messages(root: Path) -> bool:
    """Is there at least one message file in the store at root? Lists names only, no decryption."""
    try:
        with os.scandir(root) as entries:
            return any(NAME_PATTERN.fullmatch(entry.name) for entry in entries)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return True  # not a store; don't generate a key for it, let the store report it
    except OSError as exc:
        raise ConfigError(f"cannot list the history directory {root} ({exc.strerror or exc}); "
                          "fix: make it readable by the user running Elara") from None


def generate(path: Path) -> str:
    """Write a new random passphrase to path (mode 0600, directory 0700) and return it.

    The file appears complete or not at all, and an existing one is never replaced: when another
    process created it first, its passphrase is returned instead.
    """
    passphrase = secrets.token_urlsafe(KEY_BYTES)
    directory = path.parent
    try:
        _private_dir(directory)
        temp = write_temp(directory, f".{path.name}.tmp-", (passphrase + "\n").encode("ascii"))
        try:
            # link, unlike rename, fails instead of replacing a key another process just made.
            os.link(temp, path)
        except FileExistsError:
            return read_key_file(path, "the generated key")
        finally:
            remove_quietly(temp)
        fsync_dir(directory)
    except OSError as exc:
        raise ConfigError(
            f"cannot write a new encryption key to {path} ({exc.strerror or exc}); fix: make "
            f"{directory} writable by this user (for the systemd user unit: re-run "
            "scripts/install, whose unit allows it), or set Context.EncryptionKeyFile to a file "
            "holding a secret passphrase") from None
    log.warning("generated a new history encryption key in %s: keep it, and a copy somewhere "
                "safe; losing it loses the history", path)
    return passphrase


def _private_dir(directory: Path) -> None:
    """Create directory (and missing parents) mode 0700; tighten it to 0700 if it is wider."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = directory.stat().st_mode & 0o777
    if mode != 0o700:
        # An existing configuration directory may be open to others, and it now holds the key.
        os.chmod(directory, 0o700)
        log.info("set %s to mode 0700 (was %04o): it holds the history's key", directory, mode)


