"""Durable writes shared by the store, the key file and re-encryption: a private temporary file
flushed to disk before it is put in place, and the directory flushed after."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_temp(directory: Path, prefix: str, data: bytes) -> Path:
    """A new file `<prefix><random>` in `directory`, mode 0600, holding `data` and fsync'd; it is
    removed again when writing fails (OSError propagates)."""
    temp = directory / f"{prefix}{secrets.token_hex(8)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        remove_quietly(temp)
        raise
    return temp


def replace_file(path: Path, data: bytes, *, mode: int | None = None, prefix: str | None = None) -> None:
    """Put `data` in `path`'s place atomically and durably: a crash leaves the old file or the new
    one, never half of one. The file is 0600 unless `mode` says otherwise; the temporary file's
    name starts with `prefix` (by default `.<name>.`: a folder that clears its own leftovers
    names the prefix it looks for)."""
    temp = write_temp(path.parent, f".{path.name}." if prefix is None else prefix, data)
    try:
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        remove_quietly(temp)
        raise
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make the directory's entries (a new or renamed file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_quietly(path: Path) -> None:
    """Remove a file if it is there; a failure only leaves clutter behind."""
    try:
        os.unlink(path)
    except OSError:
        pass
