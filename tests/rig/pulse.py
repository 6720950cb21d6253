"""A virtual sound card for the tests: a private PulseAudio daemon with a fake mic and speaker.

    with VirtualSoundCard() as card:          # or card = VirtualSoundCard().start(); card.stop()
        subprocess.run([...], env={**os.environ, **card.env})
        card.play_into_mic("hello.wav")       # a 16 kHz mono WAV arrives bit-exact at the mic
        rec = card.record_speaker()
        ...                                   # something plays to the default output
        wav = rec.stop()                      # what the speaker played, 16 kHz mono s16le WAV

The daemon runs as the current user with its runtime directory and HOME in a temporary
directory, no default.pa (`-n`), and only these modules:

- the native protocol on `<tmp>/pulse.sock`, anonymous;
- sink `elara_mic` (null, 16 kHz mono s16le): whatever is played into it comes out of the
  source `elara_mic_in` (its monitor, remapped into a real source), the default source;
- sink `elara_speaker` (null, 16 kHz mono s16le), the default sink; record it through
  `elara_speaker.monitor`.

Null sinks get `norewinds=1`: without it, audio written into them goes missing. PortAudio reaches
the daemon through ALSA's `pulse`/`default` devices (libasound2-plugins) when `PULSE_SERVER` is set.
PortAudio lists devices once, when `sounddevice` is imported, so start the card (and set the
environment) before anything in the process imports sounddevice, or run the audio in a subprocess
that gets `card.env`.

Run standalone (`python -m tests.rig.pulse` from the repository root) it starts a card, prints `export` lines for a shell, and
stops the card on SIGTERM or Ctrl-C.

Needs the Debian packages pulseaudio, pulseaudio-utils (paplay, parecord, pactl),
libasound2-plugins (ALSA's pulse device) and libportaudio2.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

MIC_SINK = "elara_mic"
MIC_SOURCE = "elara_mic_in"
SPEAKER_SINK = "elara_speaker"
RATE = 16_000


class SoundCardError(RuntimeError):
    """The virtual sound card could not be started or driven."""


def pulse_available() -> str | None:
    """None if the card can run here, else what is missing."""
    missing = [tool for tool in ("pulseaudio", "pactl", "paplay", "parecord") if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (Debian: apt-get install pulseaudio pulseaudio-utils)"
    if not any(Path(d).joinpath("libasound_module_pcm_pulse.so").exists()
               for d in ("/usr/lib/x86_64-linux-gnu/alsa-lib", "/usr/lib/aarch64-linux-gnu/alsa-lib",
                         "/usr/lib/alsa-lib", "/usr/lib64/alsa-lib")):
        return "missing ALSA's pulse plugin (Debian: apt-get install libasound2-plugins)"
    return None


def write_wav(path: str | os.PathLike[str], samples: np.ndarray, rate: int = RATE) -> Path:
    """Write mono int16 samples as a WAV file."""
    path = Path(path)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(samples, dtype="<i2").tobytes())
    return path


def read_wav(path: str | os.PathLike[str]) -> tuple[np.ndarray, int]:
    """(mono int16 samples, rate) of a 16-bit WAV file; a multi-channel file gives its first channel."""
    with wave.open(str(path), "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: expected 16-bit samples, got {8 * w.getsampwidth()}-bit")
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return data.reshape(-1, w.getnchannels())[:, 0].astype(np.int16), w.getframerate()


def find_exact(haystack: np.ndarray, needle: np.ndarray) -> int | None:
    """The first offset at which `needle` occurs sample for sample in `haystack`, or None."""
    haystack, needle = np.asarray(haystack), np.asarray(needle)
    if len(needle) == 0 or len(needle) > len(haystack):
        return None
    # anchor on a few samples from the needle's first non-zero one (silence would match anywhere)
    nonzero = np.flatnonzero(needle)
    start = int(nonzero[0]) if len(nonzero) else 0
    anchor = needle[start:start + 8]
    view = np.lib.stride_tricks.sliding_window_view(haystack, len(anchor))
    for hit in np.flatnonzero((view == anchor).all(axis=1)):
        offset = int(hit) - start
        if offset >= 0 and offset + len(needle) <= len(haystack) and np.array_equal(
                haystack[offset:offset + len(needle)], needle):
            return offset
    return None


def match_report(haystack: np.ndarray, needle: np.ndarray) -> str:
    """Why `find_exact` failed: where the needle's start is, and how far it matches from there."""
    haystack, needle = np.asarray(haystack), np.asarray(needle)
    nonzero = np.flatnonzero(needle)
    start = int(nonzero[0]) if len(nonzero) else 0
    anchor = needle[start:start + 8]
    if len(haystack) < len(anchor):
        return f"recording too short ({len(haystack)} samples)"
    view = np.lib.stride_tricks.sliding_window_view(haystack, len(anchor))
    hits = np.flatnonzero((view == anchor).all(axis=1))
    if not len(hits):
        return f"the clip's start is not in the {len(haystack)}-sample recording"
    offset = int(hits[0]) - start
    part = haystack[max(offset, 0):offset + len(needle)]
    same = part == needle[max(-offset, 0):max(-offset, 0) + len(part)]
    first_bad = int(np.argmin(same)) if not same.all() else len(part)
    return (f"clip ({len(needle)} samples) starts at {offset} in the {len(haystack)}-sample "
            f"recording; matches for {first_bad} samples")


def best_offset(haystack: np.ndarray, needle: np.ndarray) -> tuple[int, float]:
    """(offset, normalised correlation in [-1, 1]) of the best match of `needle` in `haystack`
    (FFT cross-correlation; for audio that went through a resampler)."""
    h = np.asarray(haystack, dtype=np.float64)
    n = np.asarray(needle, dtype=np.float64)
    if len(n) == 0 or len(n) > len(h):
        return 0, 0.0
    size = 1 << int(np.ceil(np.log2(len(h) + len(n))))
    corr = np.fft.irfft(np.fft.rfft(h, size) * np.conj(np.fft.rfft(n, size)), size)[:len(h) - len(n) + 1]
    squares = np.concatenate([[0.0], np.cumsum(h * h)])
    window = np.maximum(squares[len(n):] - squares[:-len(n)], 0.0)  # energy under the needle
    energy = np.sqrt(window) * np.sqrt((n * n).sum())
    score = np.divide(corr, energy, out=np.zeros_like(corr), where=energy > 0)
    best = int(np.argmax(score))
    return best, float(score[best])


class Recording:
    """A `parecord` of a source that runs until `stop()`."""

    def __init__(self, process: subprocess.Popen[bytes], path: Path) -> None:
        self.process = process
        self.path = path

    def wait_started(self, timeout: float = 5.0) -> Recording:
        """Wait (bounded) until audio is being written (a null sink's monitor never pauses)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SoundCardError(f"parecord exited with status {self.process.returncode}")
            if self.path.exists() and self.path.stat().st_size > 44 + 2 * RATE // 20:
                return self
            time.sleep(0.02)
        raise SoundCardError(f"parecord wrote nothing to {self.path} in {timeout} s")

    def stop(self, timeout: float = 5.0, settle: float = 0.2) -> Path:
        """End the recording (SIGINT lets parecord finish the WAV header); the WAV's path.
        Waits `settle` seconds first, so audio that was just played reaches the file."""
        if self.process.poll() is None:
            time.sleep(settle)
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        return self.path

    def samples(self) -> np.ndarray:
        """Stop if needed, then the recorded samples (16 kHz mono int16)."""
        return read_wav(self.stop())[0]


class VirtualSoundCard:
    """A private PulseAudio daemon with a fake microphone and speaker; see the module docstring."""

    mic_sink = MIC_SINK
    mic_source = MIC_SOURCE
    speaker_sink = SPEAKER_SINK
    speaker_monitor = f"{SPEAKER_SINK}.monitor"
    mic_monitor = f"{MIC_SINK}.monitor"

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self._own_root = root is None
        self.root = Path(root) if root is not None else None
        self.process: subprocess.Popen[bytes] | None = None
        self._children: list[subprocess.Popen[bytes]] = []

    # -- life cycle --------------------------------------------------------------------------

    @property
    def socket(self) -> Path:
        assert self.root is not None, "not started"
        return self.root / "pulse.sock"

    @property
    def server(self) -> str:
        """The PULSE_SERVER value: `unix:<socket>`."""
        return f"unix:{self.socket}"

    @property
    def env(self) -> dict[str, str]:
        """What a client process needs in its environment to use this card. PULSE_SERVER is the
        essential one; PULSE_SINK / PULSE_SOURCE pin the fake speaker and mic even if the
        process's environment names others."""
        return {"PULSE_SERVER": self.server, "PULSE_SINK": self.speaker_sink,
                "PULSE_SOURCE": self.mic_source}

    def _daemon_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PULSE_")}
        env.update(HOME=str(self.root), XDG_RUNTIME_DIR=str(self.root),
                   XDG_CONFIG_HOME=str(self.root / "config"), XDG_STATE_HOME=str(self.root / "state"))
        return env

    def _client_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def start(self, timeout: float = 10.0) -> VirtualSoundCard:
        """Start the daemon and wait (bounded) until it answers; SoundCardError if it doesn't."""
        if self.process is not None:
            return self
        problem = pulse_available()
        if problem:
            raise SoundCardError(problem)
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="elara-pulse-"))
        self.root.mkdir(parents=True, exist_ok=True)
        config = self.root / "card.pa"
        null = "rate=16000 channels=1 format=s16le norewinds=1"
        config.write_text(
            f"load-module module-native-protocol-unix auth-anonymous=1 socket={self.socket}\n"
            f"load-module module-null-sink sink_name={MIC_SINK} {null}"
            f" sink_properties=device.description=Elara-test-microphone\n"
            f"load-module module-remap-source master={MIC_SINK}.monitor source_name={MIC_SOURCE}"
            f" source_properties=device.description=Elara-test-microphone-input\n"
            f"load-module module-null-sink sink_name={SPEAKER_SINK} {null}"
            f" sink_properties=device.description=Elara-test-speaker\n"
            f"set-default-source {MIC_SOURCE}\n"
            f"set-default-sink {SPEAKER_SINK}\n")
        self.socket.unlink(missing_ok=True)
        log = open(self.root / "pulseaudio.log", "ab")
        try:
            self.process = subprocess.Popen(
                ["pulseaudio", "--daemonize=no", "--exit-idle-time=-1", "-n", "--use-pid-file=no",
                 "--disallow-exit", "--log-target=stderr", f"--file={config}"],
                env=self._daemon_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if self.socket.exists() and self._pactl_ok():
                return self
            time.sleep(0.05)
        message = self.log_tail()
        self.stop()
        raise SoundCardError(f"pulseaudio did not come up in {timeout} s:\n{message}")

    def _pactl_ok(self) -> bool:
        try:
            return subprocess.run(["pactl", "info"], env=self._client_env(), capture_output=True,
                                  timeout=5).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def log_tail(self, lines: int = 30) -> str:
        """The end of the daemon's log."""
        try:
            text = (self.root / "pulseaudio.log").read_text(errors="replace")  # type: ignore[operator]
        except (OSError, TypeError):
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def kill_daemon(self, timeout: float = 5.0) -> None:
        """Stop only the daemon (SIGTERM, then SIGKILL), by its PID; keeps the directory."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)

    def restart(self, timeout: float = 10.0) -> VirtualSoundCard:
        """Stop the daemon and start a new one on the same socket (a device that goes and comes back)."""
        self.kill_daemon()
        return self.start(timeout)

    def stop(self) -> None:
        """Stop helpers and the daemon (by PID, bounded waits) and remove the temporary directory."""
        for child in self._children:
            if child.poll() is None:
                child.kill()
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self._children.clear()
        self.kill_daemon()
        if self._own_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> VirtualSoundCard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- driving it --------------------------------------------------------------------------

    def pactl(self, *args: str, timeout: float = 10.0) -> str:
        """Run `pactl ARGS` against this card; its output."""
        done = subprocess.run(["pactl", *args], env=self._client_env(), capture_output=True,
                              text=True, timeout=timeout)
        if done.returncode != 0:
            raise SoundCardError(f"pactl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def add_echo(self, latency_ms: int = 60, volume: float = 0.5, adjust_seconds: int = 0) -> int:
        """Route the speaker back into the microphone, as a room would: `module-loopback` from the
        speaker's monitor into the microphone's sink, `latency_ms` late and at `volume` (linear),
        mixed with whatever is played into the mic. With `adjust_seconds` 0 the echo path stays as
        it is (a microphone and a speaker on one sound card); otherwise the loopback re-times its
        resampler that often to hold its latency, so the path drifts as between two devices with
        clocks of their own. Returns the module to `remove_echo`."""
        module = int(self.pactl("load-module", "module-loopback", f"source={self.speaker_monitor}",
                                f"sink={MIC_SINK}", f"latency_msec={latency_ms}",
                                f"adjust_time={adjust_seconds}",
                                "source_dont_move=true", "sink_dont_move=true").strip())
        for line in self.pactl("list", "short", "sink-inputs").splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] == str(module):
                self.pactl("set-sink-input-volume", fields[0], f"{round(volume * 65536)}")
        return module

    def remove_echo(self, module: int) -> None:
        """Undo `add_echo`."""
        self.pactl("unload-module", str(module))

    def move_echo(self, module: int, latency_ms: int, volume: float = 0.5) -> int:
        """The echo path moved (a stalled sound server's loopback buffer grown, a speaker changed
        its buffering): `add_echo` again `latency_ms` late, then the old path undone. Returns the
        new module to `remove_echo`."""
        moved = self.add_echo(latency_ms=latency_ms, volume=volume)
        self.remove_echo(module)
        return moved

    def add_room(self, name: str) -> tuple[str, str]:
        """Another room's microphone and speaker: null sinks `<name>_mic` (play into it; record
        its `.monitor` as the microphone) and `<name>_speaker` (play to it; record its `.monitor`).
        Returns the two sink names."""
        null = ["rate=16000", "channels=1", "format=s16le", "norewinds=1"]
        sinks = (f"{name}_mic", f"{name}_speaker")
        for sink in sinks:
            self.pactl("load-module", "module-null-sink", f"sink_name={sink}", *null)
        return sinks

    def play_into_mic(self, wav_path: str | os.PathLike[str], wait: bool = True,
                      timeout: float | None = None, sink: str = MIC_SINK) -> subprocess.Popen[bytes]:
        """Play a WAV into the fake microphone (or another room's, `sink`) in real time (`paplay`);
        a 16 kHz mono s16 file arrives bit-exact. With `wait`, returns when it was played (bounded
        by its length + 10 s)."""
        process = subprocess.Popen(["paplay", f"--device={sink}", str(wav_path)],
                                   env=self._client_env(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._children.append(process)
        if wait:
            if timeout is None:
                with wave.open(str(wav_path), "rb") as w:
                    timeout = w.getnframes() / w.getframerate() + 10.0
            try:
                _, err = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
                raise SoundCardError(f"paplay {wav_path} did not finish in {timeout:.0f} s") from None
            if process.returncode != 0:
                raise SoundCardError(f"paplay {wav_path} failed: {err.decode(errors='replace').strip()}")
        return process

    def record_speaker(self, path: str | os.PathLike[str] | None = None, *,
                       wait_started: bool = True, source: str | None = None) -> Recording:
        """Start recording what the fake speaker plays (16 kHz mono s16le WAV); `.stop()` ends it.
        With `wait_started`, returns once audio is being written (the recording still starts a
        little before or after this point: find played audio in it by searching). `source`
        records another source instead: `mic_monitor` is what the microphone hears (the clips
        played into it and, with `add_echo`, the speaker's echo) on one timeline."""
        assert self.root is not None, "not started"
        if path is None:
            path = Path(tempfile.mkstemp(prefix="speaker-", suffix=".wav", dir=self.root)[1])
        path = Path(path)
        process = subprocess.Popen(
            ["parecord", f"--device={source or self.speaker_monitor}", f"--rate={RATE}", "--channels=1",
             "--format=s16le", "--file-format=wav", str(path)],
            env=self._client_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self._children.append(process)
        recording = Recording(process, path)
        if wait_started:
            recording.wait_started()
        return recording


def main() -> int:
    """Start a card, print its environment as shell `export` lines, run until SIGTERM/SIGINT."""
    card = VirtualSoundCard()

    def finish(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    try:
        card.start()
        for key, value in card.env.items():
            print(f"export {key}={value}")
        print(f"# pid {card.process.pid if card.process else '?'}; root {card.root}", flush=True)
        while card.process is not None and card.process.poll() is None:
            time.sleep(0.5)
        print("pulseaudio exited:\n" + card.log_tail(), file=sys.stderr)
        return 1
    finally:
        card.stop()


if __name__ == "__main__":
    sys.exit(main())
