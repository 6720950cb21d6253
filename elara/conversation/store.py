"""The conversation history on disk: one encrypted JSON file per message, named so that name order is append order."""

from __future__ import annotations

import bisect
import errno
import json
import logging
import os
import re
import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from elara.conversation.crypto import (
    DEFAULT_PASSPHRASE,
    AuthenticationError,
    EnvelopeError,
    MalformedEnvelopeError,
    derive_key,
    open_envelope,
    seal,
)
from elara.conversation.messages import ChatMessage, ChatRole
from elara.errors import StoreError, WrongKeyError
from elara.service.files import fsync_dir, remove_quietly, replace_file, write_temp

log = logging.getLogger(__name__)

#: `yyyyMMddTHHmmssfffZ_{seq}_{role}.json`; anything else in the directory is ignored.
NAME_PATTERN = re.compile(r"(\d{8}T\d{9}Z)_(\d{4,})_(user|assistant|system)\.json")
TEMP_PREFIX = ".tmp-"
#: How many of the newest names are kept in memory so read_tail never lists the directory.
TAIL_WINDOW = 4096
#: How many of the newest files are tried when checking the key at open.
KEY_CHECK_FILES = 32
#: A temp file this old belongs to a crashed writer, not to one still writing.
STALE_TEMP_AGE = timedelta(minutes=5)
_MAX_LINK_ATTEMPTS = 100
_ROLES = {role.value.lower(): role for role in ChatRole}


@dataclass(frozen=True)
class StoredMessage:
    """A readable message and the file it was read from."""

    path: Path
    message: ChatMessage


@dataclass(frozen=True)
class VerifyReport:
    """How many message files decrypt and parse, and which do not."""

    readable: int
    unreadable: tuple[Path, ...]


def encode_message(message: ChatMessage) -> bytes:
    """The compact UTF-8 JSON plaintext of a message (timestamp to the millisecond)."""
    body = {
        "role": message.role.value,
        "content": message.content,
        "timestampUtc": _iso_millis(message.timestamp_utc),
        "metadata": dict(message.metadata),
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode_message(plaintext: bytes) -> ChatMessage:
    """Parse a decrypted plaintext into a ChatMessage; raises ValueError if it has the wrong shape."""
    body = json.loads(plaintext.decode("utf-8"))
    if not isinstance(body, dict):
        raise ValueError("plaintext is not a JSON object")
    role = _ROLES.get(str(body.get("role")).lower())
    if role is None:
        raise ValueError("missing or unknown role")
    content = body.get("content")
    if not isinstance(content, str):
        raise ValueError("content is missing or not a string")
    stamp = body.get("timestampUtc")
    if not isinstance(stamp, str):
        raise ValueError("timestampUtc is missing or not a string")
    timestamp = datetime.fromisoformat(stamp)
    if timestamp.tzinfo is None:
        raise ValueError("timestampUtc has no UTC offset")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError("metadata is not an object of strings")
    return ChatMessage(role=role, content=content, timestamp_utc=timestamp, metadata=metadata)


class ConversationStore:
    """Append-only, encrypted, per-message JSON files; read_tail cost does not grow with history."""

    def __init__(
        self,
        root: Path,
        passphrase: str,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """Open (creating) the store at root; clock gives UTC now for temp-file age; WrongKeyError on a foreign key."""
        self._root = Path(root)
        self._key = derive_key(passphrase)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        self._tail: deque[str] = deque(maxlen=TAIL_WINDOW)
        self._complete = True  # the tail window holds every message name
        self._signature: tuple[int, int, int] | None = None
        self._bad: set[str] = set()
        self._unreadable = 0
        if passphrase == DEFAULT_PASSPHRASE:
            log.warning(
                "conversation store %s uses the default encryption key; "
                "set Context.EncryptionKey to a secret passphrase",
                self._root,
            )
        _make_private_dirs(self._root)
        temps = self._rebuild_index()
        self._check_key()
        self._remove_stale_temps(temps)

    @property
    def root(self) -> Path:
        """The directory holding the message files."""
        return self._root

    @property
    def unreadable_count(self) -> int:
        """How many message files this process has skipped because they would not decrypt or parse."""
        return self._unreadable

    def append(self, message: ChatMessage) -> Path:
        """Write one complete message atomically, never overwriting a file; returns its path."""
        data = seal(self._key, encode_message(message))
        with self._lock:
            self._sync_index()
            try:
                temp = write_temp(self._root, TEMP_PREFIX, data)
            except OSError as exc:
                raise _write_error(Path(exc.filename or self._root / f"{TEMP_PREFIX}…"), exc) from exc
            try:
                # Our own temp file must not look like another process's change.
                self._signature = self._dir_signature()
                final = self._link_in_place(temp, message)
            except OSError as exc:
                raise _write_error(temp, exc) from exc
            finally:
                # In place or failed: a leftover temp file is only clutter, cleaned at a later open.
                remove_quietly(temp)
            self._signature = self._dir_signature()
            if len(self._tail) == self._tail.maxlen:
                self._complete = False
            self._tail.append(final.name)
            try:
                fsync_dir(self._root)
            except OSError as exc:
                raise _write_error(self._root, exc) from exc
            log.debug("appended %s", final.name)
            return final

    def annotate(self, path: Path, metadata: Mapping[str, str]) -> None:
        """Add `metadata` to the message stored at `path`, keeping its place in the history: the
        file is replaced whole, so a crash leaves it as it was or as annotated, never half."""
        path = Path(path)
        if path.parent != self._root or not NAME_PATTERN.fullmatch(path.name):
            raise ValueError(f"{path} is not a message file of {self._root}")
        with self._lock:
            message = self._load(path.name)
            if message is None:
                raise StoreError(f"cannot annotate {path}: it is gone or unreadable; fix: nothing "
                                 "to do if the history was purged meanwhile, else run `elara history verify`")
            annotated = replace(message, metadata={**message.metadata, **metadata})
            try:
                replace_file(path, seal(self._key, encode_message(annotated)), prefix=TEMP_PREFIX)
            except OSError as exc:
                raise _write_error(path, exc) from exc
            self._signature = self._dir_signature()
        log.debug("annotated %s", path.name)

    def read_tail(self, n: int, roles: Collection[ChatRole] | None = None) -> list[ChatMessage]:
        """The last n readable messages (of `roles` only, when given), oldest first; unreadable
        files are skipped, never raised."""
        if n <= 0:
            return []
        wanted = _role_filter(roles)
        newest_first: list[ChatMessage] = []
        with self._lock:
            self._sync_index()
            for name in self._names_newest_first():
                if not wanted(name):
                    continue
                message = self._load(name)
                if message is not None:
                    newest_first.append(message)
                    if len(newest_first) == n:
                        break
        return newest_first[::-1]

    def _names_newest_first(self) -> Iterator[str]:
        """Message names, newest first: the tail window, then (lazily) the older ones on disk."""
        yield from reversed(self._tail)
        if not self._complete and self._tail:
            # Rare: more wanted than the window holds; fall back to a listing.
            names = sorted(self._list_dir()[0])
            yield from reversed(names[: bisect.bisect_left(names, self._tail[0])])

    def iter_messages(self, roles: Collection[ChatRole] | None = None) -> Iterator[StoredMessage]:
        """Every readable message (of `roles` only, when given), oldest first, with its path."""
        wanted = _role_filter(roles)
        with self._lock:
            names = sorted(name for name in self._list_dir()[0] if wanted(name))
        for name in names:
            with self._lock:
                message = self._load(name)
            if message is not None:
                yield StoredMessage(self._root / name, message)

    def verify(self) -> VerifyReport:
        """Try every message file; report how many are readable and which are not."""
        readable = 0
        unreadable: list[Path] = []
        with self._lock:
            for name in sorted(self._list_dir()[0]):
                if self._load(name) is not None:
                    readable += 1
                elif name in self._bad:
                    unreadable.append(self._root / name)
        return VerifyReport(readable, tuple(unreadable))

    def delete(self, paths: Iterable[Path]) -> int:
        """Delete these message files (e.g. a forgotten fact); returns how many were deleted."""
        names = {Path(p).name for p in paths if Path(p).parent == self._root}
        return self._remove(lambda name: name in names, "deleted")

    def purge(self, older_than: datetime, roles: Collection[ChatRole] | None = None) -> int:
        """Delete messages (of `roles` only, when given) whose file-name timestamp is before
        older_than; returns how many were deleted."""
        if older_than.tzinfo is None:
            raise ValueError("older_than must be timezone-aware")
        cutoff = _name_stamp(older_than)
        wanted = _role_filter(roles)
        return self._remove(lambda name: name[:19] < cutoff and wanted(name), f"older than {cutoff}")

    def _remove(self, chosen: Callable[[str], bool], why: str) -> int:
        removed = 0
        with self._lock:
            for name in self._list_dir()[0]:
                if not chosen(name):
                    continue
                path = self._root / name
                try:
                    path.unlink()
                except FileNotFoundError:
                    continue  # another process purged it first
                except OSError as exc:
                    raise StoreError(
                        f"cannot delete {path}: {exc.strerror}; fix: make {self._root} writable by this user"
                    ) from exc
                self._bad.discard(name)
                removed += 1
            if removed:
                try:
                    fsync_dir(self._root)
                except OSError as exc:
                    raise _write_error(self._root, exc) from exc
            self._rebuild_index()
        log.info("removed %d messages (%s) from %s", removed, why, self._root)
        return removed

    # -- index -------------------------------------------------------------

    def _dir_signature(self) -> tuple[int, int, int]:
        try:
            st = os.stat(self._root)
        except OSError as exc:
            raise _folder_error(self._root, exc) from exc
        # Size as well as mtime: on some filesystems it changes with every entry even within one clock tick.
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _list_dir(self) -> tuple[list[str], list[os.DirEntry]]:
        """Message names (unsorted) and temp-file entries currently in the directory."""
        names: list[str] = []
        temps: list[os.DirEntry] = []
        match = NAME_PATTERN.fullmatch
        try:
            with os.scandir(self._root) as entries:
                for entry in entries:
                    if match(entry.name):
                        names.append(entry.name)
                    elif entry.name.startswith(TEMP_PREFIX):
                        temps.append(entry)
        except OSError as exc:
            raise _folder_error(self._root, exc) from exc
        return names, temps

    def _rebuild_index(self) -> list[os.DirEntry]:
        # Stat before listing, so a change made during the listing is noticed next time.
        signature = self._dir_signature()
        names, temps = self._list_dir()
        names.sort()
        self._tail = deque(names[-TAIL_WINDOW:], maxlen=TAIL_WINDOW)
        self._complete = len(names) <= TAIL_WINDOW
        self._signature = signature
        return temps

    def _sync_index(self) -> None:
        # One stat instead of a listing: another process appending or purging changes the directory's
        # mtime. Kernels with coarse directory timestamps (before Linux 6.13) can hide a change made in
        # the same clock tick until the next one; the size in the signature narrows that on some filesystems.
        if self._dir_signature() != self._signature:
            log.debug("conversation directory %s changed; rescanning", self._root)
            self._rebuild_index()

    def _next_name(self, role: ChatRole, timestamp: datetime) -> str:
        stamp = _name_stamp(timestamp)
        seq = 1
        newest = self._tail[-1] if self._tail else None
        if newest is not None:
            match = NAME_PATTERN.fullmatch(newest)
            assert match is not None  # the index holds only names that match
            # Never earlier than the newest name, so a clock stepping back cannot reorder history.
            stamp = max(stamp, match[1])
            seq = int(match[2]) + 1
        name = f"{stamp}_{seq:04d}_{role.slug}.json"
        if newest is not None and name <= newest:
            # seq gained a digit within the same millisecond ("10000" sorts before "9999").
            name = f"{_bump_stamp(stamp)}_{seq:04d}_{role.slug}.json"
        return name

    def _link_in_place(self, temp: Path, message: ChatMessage) -> Path:
        for _ in range(_MAX_LINK_ATTEMPTS):
            self._sync_index()
            final = self._root / self._next_name(message.role, message.timestamp_utc)
            try:
                # link, unlike rename, fails instead of replacing a file another writer just put there.
                os.link(temp, final)
                return final
            except FileExistsError:
                self._rebuild_index()
        raise StoreError(
            f"cannot find a free message name in {self._root} after {_MAX_LINK_ATTEMPTS} attempts; "
            "fix: stop other processes writing to it"
        )

    # -- reading -----------------------------------------------------------

    def _load(self, name: str) -> ChatMessage | None:
        if name in self._bad:
            return None
        path = self._root / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None  # purged by another process since the index was built
        except IsADirectoryError:
            data = None
        except OSError as exc:
            raise _read_error(path, exc) from exc
        try:
            if data is None:
                raise ValueError("not a regular file")
            return decode_message(open_envelope(self._key, data))
        except (EnvelopeError, ValueError, RecursionError) as exc:
            self._bad.add(name)
            self._unreadable += 1
            log.warning("skipping unreadable conversation file %s: %s", path, exc)
            return None

    def _check_key(self) -> None:
        failures = 0
        for name in list(reversed(self._tail))[:KEY_CHECK_FILES]:
            path = self._root / name
            try:
                data = path.read_bytes()
            except (FileNotFoundError, IsADirectoryError):
                continue
            except OSError as exc:
                raise _read_error(path, exc) from exc
            try:
                open_envelope(self._key, data)
                return
            except MalformedEnvelopeError:
                continue  # not an envelope says nothing about the key
            except AuthenticationError:
                failures += 1
        if failures:
            raise WrongKeyError(
                f"wrong encryption key for {self._root}: none of the {failures} newest encrypted messages"
                " decrypts with the configured passphrase; fix: set Context.EncryptionKey"
                " to the passphrase the history was written with"
            )

    def _remove_stale_temps(self, temps: list[os.DirEntry]) -> None:
        cutoff = (self._clock() - STALE_TEMP_AGE).timestamp()
        for entry in temps:
            try:
                if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
                    log.info("removed stale temp file %s left by an interrupted write", entry.path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning("cannot remove stale temp file %s: %s", entry.path, exc.strerror)


def _role_filter(roles: Collection[ChatRole] | None) -> Callable[[str], bool]:
    """A test on file names: does the message have one of these roles (all, when None)?"""
    if roles is None:
        return lambda name: True
    suffixes = tuple(f"_{role.slug}.json" for role in roles)
    return lambda name: name.endswith(suffixes)


def _iso_millis(timestamp: datetime) -> str:
    utc = timestamp.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def _name_stamp(timestamp: datetime) -> str:
    utc = timestamp.astimezone(UTC)
    return f"{utc:%Y%m%dT%H%M%S}{utc.microsecond // 1000:03d}Z"


def _bump_stamp(stamp: str) -> str:
    moment = datetime.strptime(stamp[:15], "%Y%m%dT%H%M%S").replace(
        microsecond=int(stamp[15:18]) * 1000, tzinfo=UTC
    )
    return _name_stamp(moment + timedelta(milliseconds=1))


def _make_private_dirs(root: Path) -> None:
    missing = []
    path = root
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    try:
        for directory in reversed(missing):
            try:
                os.mkdir(directory, 0o700)
            except FileExistsError:
                continue  # created concurrently; leave its mode alone
            os.chmod(directory, 0o700)  # umask may have narrowed it
    except OSError as exc:
        raise StoreError(
            f"cannot create conversation directory {root}: {exc.strerror}; "
            "fix: set Context.StorageRoot to a directory this user can write"
        ) from exc
    if not root.is_dir():
        raise StoreError(
            f"conversation store path {root} is not a directory; fix: move it away or set Context.StorageRoot"
        )


def _write_error(path: Path, exc: OSError) -> StoreError:
    folder = path if path.is_dir() else path.parent
    if exc.errno == errno.ENOENT and not folder.exists():
        return _folder_error(folder, exc)
    if exc.errno == errno.EROFS:
        fix = f"remount the file system holding {folder} read-write, or set Context.StorageRoot"
    else:
        fix = f"free disk space and make {folder} writable by this user"
    return StoreError(f"cannot write conversation file {path}: {exc.strerror or exc}; fix: {fix}")


def _folder_error(root: Path, exc: OSError) -> StoreError:
    """The store's own folder cannot be read: gone (removed or moved while running), or not ours."""
    if exc.errno == errno.ENOENT:
        return StoreError(
            f"conversation folder {root} is missing (removed or moved while Elara runs), so nothing "
            "is stored or remembered; fix: put it back, or restart Elara to begin a new history there"
        )
    return _read_error(root, exc)


def _read_error(path: Path, exc: OSError) -> StoreError:
    return StoreError(
        f"cannot read {path}: {exc.strerror or exc}; "
        "fix: make it readable by the user running Elara (owner, mode 0700 for the directory, 0600 for files)"
    )
