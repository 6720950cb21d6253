"""`elara run` as a real subprocess for the end-to-end tests and benchmarks: its log is read
line by line on a thread, and every wait is bounded."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path


class DaemonProcess:
    """A started `python -m elara run` with its stderr collected."""

    def __init__(self, env: dict[str, str], args: tuple[str, ...] = ()) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "elara", *args, "run"], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def count(self, pattern: str) -> int:
        """How many log lines so far match the regular expression."""
        rx = re.compile(pattern)
        with self._changed:
            return sum(1 for line in self.lines if rx.search(line))

    def wait_for(self, pattern: str, *, count: int = 1, timeout: float = 30.0) -> str:
        """Wait until `count` log lines match; returns the last match. AssertionError on timeout."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                matches = [line for line in self.lines if rx.search(line)]
                if len(matches) >= count:
                    return matches[count - 1]
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(
                        f"no {count}× /{pattern}/ in the daemon's log; it said:\n" + self.log())
                self._changed.wait(min(left, 0.2))

    def log(self) -> str:
        """Everything the daemon logged so far."""
        with self._changed:
            return "\n".join(self.lines)

    def log_before(self, pattern: str, seconds: float, *, skip: int = 0) -> str:
        """The lines logged in the `seconds` before each line matching `pattern` (after the first
        `skip` of them), and the line: what a failure's report shows first, before a cut."""
        rx = re.compile(pattern)
        with self._changed:
            lines = list(self.lines)
        stamps = [_stamp(line) for line in lines]
        shown: set[int] = set()
        for index in [i for i, line in enumerate(lines) if rx.search(line)][skip:]:
            at = stamps[index]
            start = index
            while start > 0 and at is not None and (stamps[start - 1] is None or at - stamps[start - 1] <= seconds):
                start -= 1
            shown.update(range(start, index + 1))
        return "\n".join(lines[i] for i in sorted(shown))

    def terminate(self, timeout: float = 10.0) -> tuple[int, float]:
        """SIGTERM; returns (exit status, seconds it took). Kills it if it doesn't stop in time."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
            raise AssertionError(f"the daemon ignored SIGTERM for {timeout} s:\n{self.log()}") from None
        self._reader.join(5)
        return status, time.monotonic() - started

    def kill(self) -> None:
        """Make sure it is gone (test clean-up)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
        self._reader.join(5)


@contextlib.contextmanager
def listening_daemon(env: dict[str, str], log_to: Path | None = None, *,
                     timeout: float = 120) -> Iterator[DaemonProcess]:
    """`elara run` with `env`, handed over once it listens for the wake word; killed afterwards,
    and its log written to `log_to` (the folder made if need be: a failing run keeps it)."""
    daemon = DaemonProcess(env)
    try:
        daemon.wait_for("waiting for the wake word", timeout=timeout)
        yield daemon
    finally:
        daemon.kill()
        if log_to is not None:
            log_to.parent.mkdir(parents=True, exist_ok=True)
            log_to.write_text(daemon.log())


def daemon_env(card_env: dict[str, str], ollama_url: str, tmp: Path, **settings: str) -> dict[str, str]:
    """A clean environment for a daemon on the virtual card: a private store and config home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELARA")}
    env.update(card_env)
    env.update({
        "HOME": str(tmp / "home"), "XDG_CONFIG_HOME": str(tmp / "config"),
        "XDG_CACHE_HOME": str(tmp / "cache"), "XDG_RUNTIME_DIR": str(tmp / "run"),
        "ELARA__LanguageModel__Host": ollama_url,
        "ELARA__LanguageModel__Model": "test-model",
        "ELARA__Context__EncryptionKey": "end-to-end key",
        "ELARA__Context__StorageRoot": str(tmp / "store"),
    })
    (tmp / "run").mkdir(exist_ok=True, mode=0o700)
    env.update({f"ELARA__{k}": v for k, v in settings.items()})
    return env


def asking_status(env: dict[str, str]) -> subprocess.Popen[str]:
    """`elara status --json` started, not waited for: read it with `status_answer`."""
    return subprocess.Popen([sys.executable, "-m", "elara", "status", "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def status_answer(asking: subprocess.Popen[str]) -> dict:
    """What an `asking_status` command answered."""
    out, err = asking.communicate(timeout=30)
    assert asking.returncode == 0, err
    return json.loads(out)


def daemon_status(env: dict[str, str]) -> dict:
    """`elara status --json` against the daemon `env` reaches."""
    return status_answer(asking_status(env))


def spoken_question(path: Path, text: str) -> Path:
    """A WAV of "Hey Jarvis." and `text` in Piper's voice, with the pauses a person leaves."""
    from tests.rig import voice_clips

    silence = voice_clips.silence
    return voice_clips.write_wav(path, voice_clips.concat(
        silence(0.5), voice_clips.piper_speech("Hey Jarvis."), silence(0.6), voice_clips.piper_speech(text),
        silence(1.5)))


def _stamp(line: str) -> float | None:
    """When a log line was logged (seconds since the epoch), or None for a continued line."""
    try:
        return time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + int(line[20:23]) / 1000
    except ValueError:
        return None
