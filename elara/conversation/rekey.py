"""Re-encrypting the history to a new passphrase, one message file at a time.

Each file is replaced atomically (a temp file in the same directory, fsync, rename over the old
one, fsync the directory), so at every moment each file opens with exactly one of the two keys,
and a run killed midway loses nothing: the next run skips the files already under the new key
and finishes the rest. Only the envelope changes; the plaintext and the file names stay the same.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from elara.conversation.crypto import (
    AuthenticationError,
    MalformedEnvelopeError,
    derive_key,
    open_envelope,
    seal,
)
from elara.conversation.store import NAME_PATTERN, TEMP_PREFIX
from elara.errors import StoreError
from elara.service.files import fsync_dir, remove_quietly, write_temp

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RekeyReport:
    """What a pass did: files re-encrypted, files already under the new key, files left alone
    because they open with neither key (or are not envelopes)."""

    converted: int
    already: int
    unreadable: tuple[Path, ...]

    @property
    def total(self) -> int:
        """How many message files the pass looked at."""
        return self.converted + self.already + len(self.unreadable)


def rekey(root: Path, old_passphrase: str, new_passphrase: str, *,
          on_file: Callable[[Path], None] | None = None) -> RekeyReport:
    """Re-encrypt every message file in root from the old passphrase to the new one.

    `on_file(path)` is called after each file is safely under the new key (progress; tests use it
    to stop a run midway). StoreError when a file can't be read or written.
    """
    old_key, new_key = derive_key(old_passphrase), derive_key(new_passphrase)
    converted = already = 0
    unreadable: list[Path] = []
    try:
        names = sorted(entry.name for entry in os.scandir(root) if NAME_PATTERN.fullmatch(entry.name))
    except FileNotFoundError:
        names = []
    except OSError as exc:
        raise StoreError(f"cannot list {root}: {exc.strerror or exc}; "
                         "fix: run as the user that owns the history") from None
    for name in names:
        path = root / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue  # purged since the listing
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror or exc}; "
                             "fix: run as the user that owns the history") from None
        try:
            open_envelope(new_key, data)
            already += 1
            continue
        except (AuthenticationError, MalformedEnvelopeError):
            pass
        try:
            plaintext = open_envelope(old_key, data)
        except (AuthenticationError, MalformedEnvelopeError) as exc:
            log.warning("leaving %s alone: it opens with neither key (%s)", path, exc)
            unreadable.append(path)
            continue
        if not _replace(path, seal(new_key, plaintext)):
            continue
        converted += 1
        log.debug("re-encrypted %s", path)
        if on_file is not None:
            on_file(path)
    log.info("re-encrypted %d message files in %s (%d already under the new key, %d left alone)",
             converted, root, already, len(unreadable))
    return RekeyReport(converted, already, tuple(unreadable))


def _replace(path: Path, data: bytes) -> bool:
    """Put data in path's place atomically and durably (0600, like the store's files); False
    when path was deleted meanwhile, so a purged message is not brought back."""
    # The store's temp prefix: a temp file a killed run leaves behind is removed by the store.
    temp: Path | None = None
    try:
        temp = write_temp(path.parent, TEMP_PREFIX, data)
        if not os.path.lexists(path):
            remove_quietly(temp)
            return False
        os.replace(temp, path)
        fsync_dir(path.parent)
        return True
    except OSError as exc:
        if temp is not None:
            remove_quietly(temp)
        raise StoreError(f"cannot rewrite {path}: {exc.strerror or exc}; fix: free disk space and "
                         f"make {path.parent} writable by this user, then run the rekey again") from None
