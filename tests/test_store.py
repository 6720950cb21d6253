"""ConversationStore on real files: ordering, durability, permissions, bad input and the tail index."""

from __future__ import annotations

import base64
import json
import logging
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from elara.conversation import store as store_module
from elara.conversation.crypto import DEFAULT_PASSPHRASE, derive_key, seal
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore, StoredMessage, VerifyReport, encode_message
from elara.errors import StoreError, WrongKeyError

PASS = "test passphrase"
REPO = Path(__file__).resolve().parent.parent
T0 = datetime(2026, 11, 22, 6, 55, 11, 123000, tzinfo=UTC)
NAME = re.compile(r"^\d{8}T\d{9}Z_\d{4,}_(user|assistant|system)\.json$")


def msg(content: str, at: datetime = T0, role: ChatRole = ChatRole.USER, **metadata: str) -> ChatMessage:
    return ChatMessage(role=role, content=content, timestamp_utc=at, metadata=metadata)


def contents(messages) -> list[str]:
    return [m.content for m in messages]


def message_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if NAME.match(p.name))


def write_sealed(root: Path, name: str, message: ChatMessage, passphrase: str = PASS) -> Path:
    """Put a message file in place directly (fast; bypasses append's fsyncs)."""
    path = root / name
    path.write_bytes(seal(derive_key(passphrase), encode_message(message)))
    return path


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in root.iterdir()}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "Conversation"


# -- round trip and ordering ------------------------------------------------


def test_round_trip_keeps_role_content_time_and_metadata(root):
    store = ConversationStore(root, PASS)
    sent = [
        msg("What's the weather like tomorrow?", T0, ChatRole.USER, source="voice", lang="en"),
        msg("Sunny, around twenty degrees.", T0 + timedelta(seconds=2), ChatRole.ASSISTANT),
        msg("Announcement", T0 + timedelta(seconds=3), ChatRole.SYSTEM, kind="announcement"),
    ]
    paths = [store.append(m) for m in sent]
    assert store.read_tail(3) == sent
    assert [p.name for p in paths] == [
        "20261122T065511123Z_0001_user.json",
        "20261122T065513123Z_0002_assistant.json",
        "20261122T065514123Z_0003_system.json",
    ]
    assert all(p.parent == root == store.root for p in paths)


def test_timestamps_are_kept_to_the_millisecond(root):
    store = ConversationStore(root, PASS)
    store.append(msg("x", T0.replace(microsecond=123999)))
    assert store.read_tail(1)[0].timestamp_utc == T0


def test_same_millisecond_appends_keep_append_order(root):
    store = ConversationStore(root, PASS)
    for i in range(12):
        store.append(msg(f"m{i}", T0, ChatRole.USER if i % 2 else ChatRole.ASSISTANT))
    assert contents(store.read_tail(12)) == [f"m{i}" for i in range(12)]
    assert len(set(message_files(root))) == 12


def test_clock_going_backwards_keeps_append_order_and_true_timestamps(root):
    store = ConversationStore(root, PASS)
    times = [T0, T0 - timedelta(hours=1), T0 - timedelta(days=2), T0 + timedelta(milliseconds=1)]
    for i, at in enumerate(times):
        store.append(msg(f"m{i}", at))
    names = message_files(root)
    assert [n[:19] for n in names] == ["20261122T065511123Z"] * 3 + ["20261122T065511124Z"]
    tail = store.read_tail(10)
    assert contents(tail) == ["m0", "m1", "m2", "m3"]
    assert [m.timestamp_utc for m in tail] == times


def test_reopen_continues_seq_and_order(root):
    first = ConversationStore(root, PASS)
    for i in range(3):
        first.append(msg(f"a{i}"))
    second = ConversationStore(root, PASS)
    path = second.append(msg("b0", T0 - timedelta(minutes=5)))
    assert path.name == "20261122T065511123Z_0004_user.json"
    assert contents(second.read_tail(4)) == ["a0", "a1", "a2", "b0"]


def test_seq_growing_past_9999_in_one_millisecond_keeps_order(root):
    root.mkdir(mode=0o700)
    write_sealed(root, "20261122T065511123Z_9999_user.json", msg("old"))
    store = ConversationStore(root, PASS)
    first = store.append(msg("new", T0))
    second = store.append(msg("newer", T0))
    assert first.name == "20261122T065511124Z_10000_user.json"
    assert second.name == "20261122T065511124Z_10001_user.json"
    assert message_files(root) == ["20261122T065511123Z_9999_user.json", first.name, second.name]
    assert contents(store.read_tail(3)) == ["old", "new", "newer"]
    assert store.read_tail(1)[0].timestamp_utc == T0  # the name moved, the message's time did not


# -- files on disk -----------------------------------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o277])
def test_modes_are_0700_and_0600_whatever_the_umask(tmp_path, umask):
    root = tmp_path / "cache" / "elara" / "Conversation"
    old = os.umask(umask)
    try:
        store = ConversationStore(root, PASS)
        path = store.append(msg("hi"))
    finally:
        os.umask(old)
    for directory in (tmp_path / "cache", tmp_path / "cache" / "elara", root):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_append_leaves_no_temp_files(root):
    store = ConversationStore(root, PASS)
    for i in range(5):
        store.append(msg(f"m{i}"))
    assert sorted(os.listdir(root)) == message_files(root)


def test_append_never_overwrites_a_file_that_appeared_meanwhile(root, monkeypatch):
    store = ConversationStore(root, PASS)
    store.append(msg("first"))
    real_link = os.link
    raced: list[Path] = []

    def racing_link(src, dst, *args, **kwargs):
        if not raced:  # another writer takes the very name we chose, just before us
            Path(dst).write_bytes(b"someone else's bytes")
            raced.append(Path(dst))
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "link", racing_link)
    path = store.append(msg("second"))
    assert raced and path != raced[0]
    assert raced[0].read_bytes() == b"someone else's bytes"
    assert path.name > raced[0].name
    assert sorted(os.listdir(root)) == message_files(root)
    assert contents(store.read_tail(1)) == ["second"]


def test_annotate_adds_metadata_in_place_and_a_failed_write_leaves_the_message_as_it_was(root, monkeypatch):
    store = ConversationStore(root, PASS)
    first = store.append(msg("How far is it from Paris?", source="voice"))
    store.append(msg("How far is it from Paris to Berlin?"))
    store.annotate(first, {"superseded": "true"})
    kept = store.read_tail(5)
    assert contents(kept) == ["How far is it from Paris?", "How far is it from Paris to Berlin?"]
    assert dict(kept[0].metadata) == {"source": "voice", "superseded": "true"}
    assert sorted(os.listdir(root)) == message_files(root)  # same names, no temp file left
    assert stat.S_IMODE(first.stat().st_mode) == 0o600
    # another process reads the annotated file
    assert dict(ConversationStore(root, PASS).read_tail(2)[0].metadata)["superseded"] == "true"

    before = first.read_bytes()

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(StoreError, match="free disk space"):
        store.annotate(first, {"other": "x"})
    assert first.read_bytes() == before and sorted(os.listdir(root)) == message_files(root)
    with pytest.raises(ValueError):
        store.annotate(root.parent / first.name, {"other": "x"})
    first.unlink()
    with pytest.raises(StoreError, match="gone or unreadable"):
        store.annotate(first, {"other": "x"})


def test_stale_temp_files_are_removed_at_open_fresh_ones_kept(root):
    ConversationStore(root, PASS).append(msg("hi"))
    stale, fresh = root / ".tmp-stale", root / ".tmp-fresh"
    stale.write_bytes(b"half a message")
    fresh.write_bytes(b"being written")
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).timestamp()
    os.utime(stale, (hour_ago, hour_ago))
    ConversationStore(root, PASS)
    assert not stale.exists() and fresh.exists()
    ConversationStore(root, PASS, clock=lambda: datetime.now(UTC) + timedelta(days=1))
    assert not fresh.exists()


# -- reading -----------------------------------------------------------------


def test_read_tail_sizes(root):
    store = ConversationStore(root, PASS)
    assert store.read_tail(6) == []
    for i in range(3):
        store.append(msg(f"m{i}"))
    assert store.read_tail(0) == []
    assert store.read_tail(-1) == []
    assert contents(store.read_tail(2)) == ["m1", "m2"]
    assert contents(store.read_tail(100)) == ["m0", "m1", "m2"]


def test_another_instance_appending_and_purging_is_seen(root):
    daemon = ConversationStore(root, PASS)
    daemon.append(msg("d0", T0))
    assert contents(daemon.read_tail(6)) == ["d0"]
    cli = ConversationStore(root, PASS)
    cli.append(msg("c0", T0 + timedelta(seconds=1)))
    assert contents(daemon.read_tail(6)) == ["d0", "c0"]
    path = daemon.append(msg("d1", T0))  # continues after the other writer's file
    assert path.name == "20261122T065512123Z_0003_user.json"
    assert contents(cli.read_tail(6)) == ["d0", "c0", "d1"]
    assert cli.purge(T0 + timedelta(milliseconds=1)) == 1
    assert contents(daemon.read_tail(6)) == ["c0", "d1"]


def test_read_tail_beyond_the_in_memory_window(root):
    root.mkdir()
    total = store_module.TAIL_WINDOW + 100
    for i in range(total):
        write_sealed(root, f"20261122T065511123Z_{i + 1:05d}_user.json", msg(f"m{i}"))
    store = ConversationStore(root, PASS)
    tail = store.read_tail(total + 10)
    assert len(tail) == total
    assert tail[0].content == "m0" and tail[-1].content == f"m{total - 1}"


def test_read_tail_does_not_list_the_directory(root, monkeypatch):
    root.mkdir()
    for i in range(2000):
        write_sealed(root, f"20261122T065511123Z_{i + 1:04d}_user.json", msg(f"m{i}"))
    store = ConversationStore(root, PASS)
    calls: list[str] = []
    real_scandir, real_listdir = os.scandir, os.listdir

    def counting_scandir(*args, **kwargs):
        calls.append("scandir")
        return real_scandir(*args, **kwargs)

    def counting_listdir(*args, **kwargs):
        calls.append("listdir")
        return real_listdir(*args, **kwargs)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    monkeypatch.setattr(os, "listdir", counting_listdir)
    for _ in range(20):
        assert contents(store.read_tail(6)) == [f"m{i}" for i in range(1994, 2000)]
    store.append(msg("own", T0))
    assert contents(store.read_tail(2)) == ["m1999", "own"]
    assert calls == []


def test_iter_messages_and_verify(root):
    store = ConversationStore(root, PASS)
    paths = [store.append(msg(f"m{i}")) for i in range(3)]
    (root / "20261122T065511123Z_0000_user.json").write_bytes(b"garbage")
    stored = list(store.iter_messages())
    assert all(isinstance(s, StoredMessage) for s in stored)
    assert [s.path for s in stored] == paths
    assert contents(s.message for s in stored) == ["m0", "m1", "m2"]
    assert store.verify() == VerifyReport(readable=3, unreadable=(root / "20261122T065511123Z_0000_user.json",))


def test_purge_deletes_by_name_timestamp(root):
    store = ConversationStore(root, PASS)
    for day in range(5):
        store.append(msg(f"day{day}", T0 + timedelta(days=day)))
    assert store.purge(T0 + timedelta(days=2)) == 2
    assert contents(store.read_tail(10)) == ["day2", "day3", "day4"]
    assert store.purge(T0) == 0
    with pytest.raises(ValueError):
        store.purge(datetime(2026, 1, 1))


def test_one_mebibyte_message_round_trips(root):
    big = "ä" * (512 * 1024)  # 1 MiB of UTF-8
    store = ConversationStore(root, PASS)
    store.append(msg(big))
    assert ConversationStore(root, PASS).read_tail(1)[0].content == big


# -- bad input ---------------------------------------------------------------


def _tampered(data: bytes) -> bytes:
    envelope = json.loads(data)
    raw = bytearray(base64.b64decode(envelope["ciphertext"]))
    raw[0] ^= 0xFF
    envelope["ciphertext"] = base64.b64encode(bytes(raw)).decode()
    return json.dumps(envelope).encode()


def test_bad_files_are_skipped_with_one_warning_each(root, caplog):
    store = ConversationStore(root, PASS)
    store.append(msg("good0", T0))
    good = store.append(msg("good1", T0))
    bad = {
        "corrupted": b"\x00\x01 not an envelope at all",
        "truncated": good.read_bytes()[:40],
        "tampered": _tampered(good.read_bytes()),
        "foreign": b'{"role": "User", "content": "plain text, never encrypted"}',
        "non_utf8": b"\xff\xfe\xfa\xb0" * 10,
        "wrong_shape": seal(derive_key(PASS), b'{"role": "Robot", "content": 5}'),
        "not_json_inside": seal(derive_key(PASS), b"\xffnot json"),
    }
    bad_paths = []
    for i, data in enumerate(bad.values()):
        path = root / f"20261122T065511123Z_{i + 10:04d}_user.json"
        path.write_bytes(data)
        bad_paths.append(path)
    (root / "notes.txt").write_text("ignored")
    (root / "20261122T065511123Z_0099_user.json.bak").write_text("ignored")
    (root / "20261122T065511123Z_0098_robot.json").write_text("ignored")

    caplog.set_level(logging.WARNING, logger="elara.conversation.store")
    other = ConversationStore(root, PASS)  # one good file among the newest: the key is right
    for _ in range(3):
        assert contents(other.read_tail(2)) == ["good0", "good1"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == len(bad)
    for path in bad_paths:
        assert sum(str(path) in r.getMessage() for r in warnings) == 1
    assert not any("ignored" in r.getMessage() or "notes.txt" in r.getMessage() for r in warnings)
    assert other.unreadable_count == len(bad)
    assert other.verify().unreadable == tuple(bad_paths)
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == len(bad)


def test_warnings_do_not_leak_content(root, caplog):
    store = ConversationStore(root, PASS)
    store.append(msg("top secret words"))
    (root / "20261122T065511123Z_0005_user.json").write_bytes(seal(derive_key(PASS), b'{"content":"top secret words"}'))
    caplog.set_level(logging.INFO)
    store.read_tail(5)
    assert caplog.records and not any("secret" in r.getMessage() for r in caplog.records)


def test_wrong_key_raises_and_writes_nothing(root):
    store = ConversationStore(root, PASS)
    for i in range(3):
        store.append(msg(f"m{i}"))
    stale = root / ".tmp-stale"
    stale.write_bytes(b"left over")
    os.utime(stale, (0, 0))
    before = snapshot(root)
    with pytest.raises(WrongKeyError) as caught:
        ConversationStore(root, "not the passphrase")
    assert str(root) in str(caught.value)
    assert "Context.EncryptionKey" in str(caught.value)
    assert isinstance(caught.value, StoreError)
    assert snapshot(root) == before


def test_malformed_files_alone_are_not_a_wrong_key(root, caplog):
    root.mkdir()
    (root / "20261122T065511123Z_0001_user.json").write_bytes(b"garbage")
    (root / "20261122T065511123Z_0002_user.json").write_bytes(b'{"alg": "none"}')
    store = ConversationStore(root, "any passphrase")
    assert store.read_tail(6) == []
    assert store.unreadable_count == 2
    assert store.append(msg("hi")).name == "20261122T065511123Z_0003_user.json"


def test_default_passphrase_warns_every_time(root, caplog):
    caplog.set_level(logging.WARNING, logger="elara.conversation.store")
    ConversationStore(root, DEFAULT_PASSPHRASE)
    ConversationStore(root, DEFAULT_PASSPHRASE)
    ConversationStore(root, PASS)
    warnings = [r.getMessage() for r in caplog.records if "default encryption key" in r.getMessage()]
    assert len(warnings) == 2
    assert all("Context.EncryptionKey" in w for w in warnings)


# -- I/O errors --------------------------------------------------------------


def test_root_that_is_a_file_is_a_store_error(tmp_path):
    target = tmp_path / "Conversation"
    target.write_text("not a directory")
    with pytest.raises(StoreError, match=str(target)):
        ConversationStore(target, PASS)


def test_append_to_a_vanished_directory_is_a_store_error(root):
    store = ConversationStore(root, PASS)
    os.rmdir(root)
    with pytest.raises(StoreError, match=f"{root}.*fix:"):
        store.append(msg("hi"))


# Root ignores file modes, and the machines these tests run on run as root; so the two tests below
# run the store in a child process as a user the kernel checks: nobody, by way of `setpriv`, when
# we are root; this user when we are not.

UNPRIVILEGED_CHILD = """\
import json, os, sys
from datetime import UTC, datetime
from pathlib import Path
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore
from elara.errors import StoreError
root, passphrase = Path(sys.argv[1]), sys.argv[2]
def msg(content):
    return ChatMessage(role=ChatRole.USER, content=content, timestamp_utc=datetime(2026, 11, 22, tzinfo=UTC))
try:
{body}
except StoreError as e:
    print(json.dumps({{"error": type(e).__name__, "message": str(e)}}))
else:
    print(json.dumps({{"error": None}}))
"""


@dataclass(frozen=True)
class Unprivileged:
    """Runs Python against a store in `home`, as a user file permissions apply to."""

    prefix: tuple[str, ...]  # setpriv …, or nothing when we are not root
    home: Path  # a directory that user owns and can reach

    def run(self, body: str, root: Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run `body` (with `root`, `passphrase` and `msg()` defined) in a child process."""
        env = {**os.environ, "HOME": str(self.home), "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        code = UNPRIVILEGED_CHILD.format(body=textwrap.indent(textwrap.dedent(body), "    "))
        return subprocess.run([*self.prefix, sys.executable, "-c", code, str(root), PASS], cwd=self.home,
                              env=env, capture_output=True, text=True, timeout=timeout)

    def store_error(self, body: str, root: Path) -> str:
        """The message of the StoreError `body` raises; fails the test if it raises none or another."""
        done = self.run(body, root)
        assert done.returncode == 0, f"the child failed:\n{done.stderr}"
        outcome = json.loads(done.stdout.splitlines()[-1])
        assert outcome["error"] == "StoreError", f"expected a StoreError, got {outcome}"
        return str(outcome["message"])


@pytest.fixture
def unprivileged(tmp_path) -> Iterator[Unprivileged]:
    """This user when it is not root; else nobody under setpriv, in a directory nobody owns
    (pytest's tmp dirs sit in a 0700 root directory nobody can't enter)."""
    if os.geteuid() != 0:
        yield Unprivileged((), tmp_path)
        return
    setpriv = shutil.which("setpriv")
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        nobody = None
    if setpriv is None or nobody is None:
        pytest.skip("running as root without setpriv (util-linux) or a nobody user: "
                    "root ignores file permissions")
    home = Path(tempfile.mkdtemp(prefix="elara-unprivileged-"))
    try:
        os.chown(home, nobody.pw_uid, nobody.pw_gid)
        user = Unprivileged((setpriv, f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                             "--clear-groups"), home)
        probe = user.run("pass", home)  # can nobody start this Python and import elara at all?
        if probe.returncode != 0:
            pytest.skip(f"nobody can't run {sys.executable} with elara here: {probe.stderr.strip()[-300:]}")
        yield user
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_unwritable_directory_is_a_store_error(unprivileged):
    root = unprivileged.home / "Conversation"
    message = unprivileged.store_error("""
        store = ConversationStore(root, passphrase)
        root.chmod(0o500)
        store.append(msg("hi"))
    """, root)
    assert re.fullmatch(rf"cannot write conversation file {re.escape(str(root))}/\.[^/]+: Permission denied; "
                        rf"fix: free disk space and make {re.escape(str(root))} writable by this user", message), message
    assert message_files(root) == []


def test_unreadable_file_is_a_store_error(unprivileged):
    root = unprivileged.home / "Conversation"
    message = unprivileged.store_error("""
        ConversationStore(root, passphrase).append(msg("hi")).chmod(0o000)
        ConversationStore(root, passphrase).read_tail(1)
    """, root)
    [name] = message_files(root)
    assert message == (f"cannot read {root / name}: Permission denied; fix: make it readable by the user "
                       "running Elara (owner, mode 0700 for the directory, 0600 for files)")
