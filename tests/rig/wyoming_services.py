"""Real Wyoming speech services for the tests: wyoming-faster-whisper and wyoming-piper (from
PyPI, in the dev extra) started on 127.0.0.1 with the models Elara ships, so nothing downloads.
Every wait is bounded and every process is stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from elara.voice.models import resolve_voice, resolve_whisper

BIN = Path(sys.executable).parent
#: wyoming-satellite 1.0.0 lives in a virtual environment of its own (it pins wyoming 1.4.1)
SATELLITE_PYTHON = Path(__file__).resolve().parents[2] / ".venv-satellite" / "bin" / "python"


def free_port() -> int:
    """A loopback port free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Service:
    """One started service process, reachable at `uri`."""

    def __init__(self, args: list[str], port: int, name: str, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.env = env
        self.port = port
        self.name = name
        self.uri = f"wyoming://127.0.0.1:{port}"
        self.output: list[str] = []
        self._spawn()

    def _spawn(self) -> None:
        self.process = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True, env=self.env,
                                        start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.output.append(line.rstrip("\n"))

    def wait_ready(self, timeout: float = 60.0) -> Service:
        """Return once the service accepts connections; AssertionError (with its output) if not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError(f"{self.name} did not start; it said:\n" + "\n".join(self.output))

    def kill(self) -> None:
        """SIGKILL to its whole process group: it dies mid-whatever it was doing (with the
        commands it runs, such as a satellite's microphone)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def restart(self) -> Service:
        """Start it again, on the same port, after `kill`."""
        self._spawn()
        return self.wait_ready()

    def stop(self) -> None:
        """Stop it and what it started (SIGTERM, then SIGKILL after 5 s)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


def start_whisper(data_dir: Path, port: int | None = None) -> Service:
    """wyoming-faster-whisper with Elara's own tiny.en (CTranslate2, int8), offline; `data_dir`
    is required by it and stays empty with a model path."""
    port = port or free_port()
    model = resolve_whisper("tiny.en").path
    data = data_dir
    args = [str(BIN / "wyoming-faster-whisper"), "--uri", f"tcp://127.0.0.1:{port}", "--model", str(model),
            "--data-dir", str(data), "--local-files-only", "--language", "en", "--device", "cpu",
            "--compute-type", "int8", "--beam-size", "1"]
    return Service(args, port, "wyoming-faster-whisper").wait_ready()


def start_piper(data_dir: Path, port: int | None = None) -> Service:
    """wyoming-piper with Elara's joe voice in `data_dir` under the names it looks for."""
    port = port or free_port()
    voice = resolve_voice("en_US-joe-medium")
    data_dir.mkdir(parents=True, exist_ok=True)
    for source, name in ((voice.path, "en_US-joe-medium.onnx"), (voice.config_path, "en_US-joe-medium.onnx.json")):
        target = data_dir / name
        if not target.exists():
            target.symlink_to(Path(str(source)))
    args = [str(BIN / "wyoming-piper"), "--uri", f"tcp://127.0.0.1:{port}", "--voice", "en_US-joe-medium",
            "--data-dir", str(data_dir)]
    return Service(args, port, "wyoming-piper").wait_ready()


def start_satellite(name: str, env: dict[str, str], mic_source: str, speaker_sink: str,
                    port: int | None = None) -> Service:
    """A real wyoming-satellite 1.0.0 on 127.0.0.1 (no wake word of its own: it streams, the hub
    listens) whose microphone is `parec` from `mic_source` and whose speaker is `pacat` to
    `speaker_sink` on the virtual sound card (`env` reaches it)."""
    port = port or free_port()
    args = [str(SATELLITE_PYTHON), "-m", "wyoming_satellite", "--uri", f"tcp://127.0.0.1:{port}", "--name", name,
            "--area", name, "--no-zeroconf",
            "--mic-command", f"parec --device={mic_source} --rate=16000 --channels=1 --format=s16le "
                             "--latency-msec=20 --raw",
            "--mic-command-rate", "16000", "--mic-command-width", "2", "--mic-command-channels", "1",
            "--snd-command", f"pacat --device={speaker_sink} --rate=22050 --channels=1 --format=s16le "
                             "--latency-msec=50 --raw",
            "--snd-command-rate", "22050", "--snd-command-width", "2", "--snd-command-channels", "1"]
    service = Service(args, port, f"wyoming-satellite {name}", env=env)
    service.uri = f"tcp://127.0.0.1:{port}"
    return service.wait_ready()


@contextlib.contextmanager
def both(root: Path) -> Iterator[tuple[Service, Service]]:
    """wyoming-faster-whisper and wyoming-piper (their data under `root`), stopped afterwards."""
    whisper = start_whisper(root / "whisper")
    try:
        piper = start_piper(root / "piper")
    except BaseException:
        whisper.stop()
        raise
    try:
        yield whisper, piper
    finally:
        whisper.stop()
        piper.stop()


class SilentService:
    """A TCP listener on loopback that accepts connections, reads, and never answers: a service
    that hangs."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self.port = self._sock.getsockname()[1]
        self.uri = f"wyoming://127.0.0.1:{self.port}"
        self._held: list[socket.socket] = []
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                connection, _ = self._sock.accept()
            except OSError:
                return
            self._held.append(connection)

    def close(self) -> None:
        """Stop listening and drop the held connections."""
        self._closed = True
        self._sock.close()
        for connection in self._held:
            connection.close()
