"""`elara history rekey`: every message file re-encrypted to a new key, atomically per file and
resumable after a kill -9; checked with the independent reader (tests/spec_reader.py)."""

import os
import socket
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidTag

from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.rekey import rekey
from elara.conversation.store import ConversationStore
from tests.spec_reader import independent_open, independent_seal, read_all

OLD = "the old passphrase"
NEW = "the new passphrase"
START = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def fill(root: Path, count: int, passphrase: str = OLD) -> list[dict]:
    """A real store with `count` messages; returns their plaintexts."""
    store = ConversationStore(root, passphrase)
    for i in range(count):
        role = ChatRole.USER if i % 2 == 0 else ChatRole.ASSISTANT
        store.append(ChatMessage(role, f"message {i}", START + timedelta(seconds=i)))
    return read_all(root, passphrase)


def opens_with(path: Path) -> list[str]:
    """Which of the two keys open this file."""
    found = []
    for name, passphrase in (("old", OLD), ("new", NEW)):
        try:
            independent_open(passphrase, path.read_bytes())
            found.append(name)
        except InvalidTag:
            pass
    return found


def message_files(root: Path) -> list[Path]:
    return sorted(root.glob("*_*.json"))


def test_every_file_is_re_encrypted_and_nothing_else_changes(tmp_path):
    root = tmp_path / "store"
    before = fill(root, 6)
    names = [p.name for p in message_files(root)]
    report = rekey(root, OLD, NEW)
    assert (report.converted, report.already, report.unreadable) == (6, 0, ())
    assert read_all(root, NEW) == before
    assert [p.name for p in message_files(root)] == names
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in message_files(root))
    assert sorted(p.name for p in root.iterdir()) == names  # no temp file left
    assert [m.content for m in ConversationStore(root, NEW).read_tail(10)] == [
        f"message {i}" for i in range(6)]


def test_a_run_stopped_midway_is_finished_by_the_next(tmp_path):
    root = tmp_path / "store"
    before = fill(root, 7)
    done = []

    def stop_after_three(path):
        done.append(path)
        if len(done) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rekey(root, OLD, NEW, on_file=stop_after_three)
    # Each file opens with exactly one of the keys; none is lost.
    assert [opens_with(p) for p in message_files(root)] == [["new"]] * 3 + [["old"]] * 4
    report = rekey(root, OLD, NEW)
    assert (report.converted, report.already) == (4, 3)
    assert read_all(root, NEW) == before


def test_kill_9_midway_loses_nothing_and_the_command_finishes_the_job(tmp_path):
    root = tmp_path / "store"
    before = fill(root, 8)
    new_key = tmp_path / "new.key"
    new_key.write_text(NEW + "\n")
    # A real process killed with SIGKILL right after its third file is under the new key.
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from elara.conversation.rekey import rekey
        done = []
        def maybe_die(path):
            done.append(path)
            if len(done) == 3:
                os.kill(os.getpid(), signal.SIGKILL)
        rekey(Path({str(root)!r}), {OLD!r}, {NEW!r}, on_file=maybe_die)
    """)
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert killed.returncode == -9, killed.stderr
    assert [opens_with(p) for p in message_files(root)] == [["new"]] * 3 + [["old"]] * 5

    env = cli_env(tmp_path, root)
    finished = elara(env, "history", "rekey", "--to-key-file", str(new_key))
    assert finished.returncode == 0, finished.stderr
    assert "5 re-encrypted, 3 already under the new key, 0 left alone" in finished.stdout
    assert read_all(root, NEW) == before


def cli_env(tmp_path: Path, root: Path, key: str = OLD) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ELARA") and k != "CREDENTIALS_DIRECTORY"}
    env.update({"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
                "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_RUNTIME_DIR": str(tmp_path / "run"),
                "ELARA__Context__StorageRoot": str(root), "ELARA__Context__EncryptionKey": key})
    return env


def elara(env, *args):
    return subprocess.run([sys.executable, "-m", "elara", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_command_says_what_to_change_and_the_history_reads_with_the_new_key(tmp_path):
    root = tmp_path / "store"
    before = fill(root, 4)
    new_key = tmp_path / "new.key"
    new_key.write_text(NEW + "\n")
    env = cli_env(tmp_path, root)
    done = elara(env, "history", "rekey", "--to-key-file", str(new_key))
    assert done.returncode == 0, done.stderr
    assert "4 re-encrypted, 0 already under the new key, 0 left alone" in done.stdout
    assert f"set Context.EncryptionKeyFile to {new_key}" in done.stdout
    assert read_all(root, NEW) == before
    assert elara(env, "history", "list").returncode == 78  # the old key no longer opens it
    env["ELARA__Context__EncryptionKeyFile"] = str(new_key)
    listed = elara(env, "history", "list")
    assert listed.returncode == 0 and "message 3" in listed.stdout
    again = elara(env, "history", "rekey", "--to-key-file", str(new_key))
    assert again.returncode == 0 and "nothing to change" in again.stdout


def test_a_generated_key_gets_the_install_command(tmp_path):
    key_file = tmp_path / "config" / "elara" / "key"
    key_file.parent.mkdir(parents=True)
    key_file.write_text(OLD + "\n")
    root = tmp_path / "store"
    fill(root, 2)
    new_key = tmp_path / "new.key"
    new_key.write_text(NEW)
    env = cli_env(tmp_path, root)
    del env["ELARA__Context__EncryptionKey"]
    done = elara(env, "history", "rekey", "--to-key-file", str(new_key))
    assert done.returncode == 0, done.stderr
    assert f"install -m 600 {new_key} {key_file}" in done.stdout
    assert key_file.read_text() == OLD + "\n"  # replacing the old key is left to the user
    assert [opens_with(p) for p in message_files(root)] == [["new"]] * 2


def test_bad_key_files_and_a_wrong_current_key_exit_78_and_change_nothing(tmp_path):
    root = tmp_path / "store"
    fill(root, 3)
    before = {p: p.read_bytes() for p in message_files(root)}
    env = cli_env(tmp_path, root)
    missing = elara(env, "history", "rekey", "--to-key-file", str(tmp_path / "nope"))
    assert missing.returncode == 78 and "--to-key-file: cannot read the key file" in missing.stderr
    (tmp_path / "empty").write_text("\n")
    empty = elara(env, "history", "rekey", "--to-key-file", str(tmp_path / "empty"))
    assert empty.returncode == 78 and "is empty" in empty.stderr
    (tmp_path / "new.key").write_text(NEW)
    wrong = elara(cli_env(tmp_path, root, key="not the key"),
                  "history", "rekey", "--to-key-file", str(tmp_path / "new.key"))
    assert wrong.returncode == 78
    assert "none of the 3 message files" in wrong.stderr and "--from-key-file" in wrong.stderr
    assert {p: p.read_bytes() for p in message_files(root)} == before
    (tmp_path / "old.key").write_text(OLD)
    rescued = elara(cli_env(tmp_path, root, key="not the key"), "history", "rekey",
                    "--from-key-file", str(tmp_path / "old.key"), "--to-key-file", str(tmp_path / "new.key"))
    assert rescued.returncode == 0, rescued.stderr
    assert [opens_with(p) for p in message_files(root)] == [["new"]] * 3


def test_a_file_neither_key_opens_is_reported_and_left_alone(tmp_path):
    root = tmp_path / "store"
    fill(root, 3)
    stranger = root / "20260304T050610000Z_0004_user.json"
    stranger.write_bytes(independent_seal("a third key", b'{"content": "x"}'))
    original = stranger.read_bytes()
    (tmp_path / "new.key").write_text(NEW)
    done = elara(cli_env(tmp_path, root), "history", "rekey", "--to-key-file", str(tmp_path / "new.key"))
    assert done.returncode == 1
    assert f"left alone (opens with neither key): {stranger}" in done.stdout
    assert "3 re-encrypted, 0 already under the new key, 1 left alone" in done.stdout
    assert stranger.read_bytes() == original
    assert [opens_with(p) for p in message_files(root) if p != stranger] == [["new"]] * 3


def test_refuses_while_the_daemon_answers(tmp_path):
    root = tmp_path / "store"
    fill(root, 2)
    before = {p: p.read_bytes() for p in message_files(root)}
    (tmp_path / "new.key").write_text(NEW)
    sock_dir = tmp_path / "run" / "elara"
    sock_dir.mkdir(parents=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as daemon:
        daemon.bind(str(sock_dir / "status.sock"))
        daemon.listen()
        done = elara(cli_env(tmp_path, root), "history", "rekey", "--to-key-file", str(tmp_path / "new.key"))
    assert done.returncode == 1 and "stop it first" in done.stderr
    assert {p: p.read_bytes() for p in message_files(root)} == before
    # A socket file nobody answers on (a crashed daemon) does not stop the rekey.
    finished = elara(cli_env(tmp_path, root), "history", "rekey", "--to-key-file", str(tmp_path / "new.key"))
    assert finished.returncode == 0, finished.stderr
