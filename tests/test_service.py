"""`elara run` as a service: readiness, status and watchdog notifications on a datagram socket the
test owns, `elara status`, reload on SIGHUP (good and broken configs) and a clean SIGTERM."""

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from elara.conversation.store import ConversationStore
from tests.rig import voice_clips
from tests.rig.daemon_process import DaemonProcess, daemon_env


class NotifySocket:
    """A datagram socket standing in for systemd's NOTIFY_SOCKET; collects what arrives."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.2)
        self.messages: list[dict[str, str]] = []
        self._running = True
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        while self._running:
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            self.messages.append(dict(line.split("=", 1) for line in data.decode().splitlines()))

    def values(self, key):
        return [m[key] for m in list(self.messages) if key in m]

    def wait_for(self, key, value=None, timeout=30.0, count=1):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [v for v in self.values(key) if value is None or v == value]
            if len(found) >= count:
                return
            time.sleep(0.05)
        raise AssertionError(f"no {count}× {key}={value} in {self.messages}")

    def close(self):
        self._running = False
        self._thread.join(2)
        self.sock.close()


def status(env):
    done = subprocess.run([sys.executable, "-m", "elara", "status", "--json"], env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def chats(server):
    return server.turns()


@pytest.fixture
def service(sound_card, ollama_server, tmp_path):
    config = tmp_path / "appsettings.json"
    config.write_text(json.dumps({"Context": {"LastN": 6}, "Listening": {"Mode": "wake_word"}}))
    notify = NotifySocket(tmp_path / "notify.sock")
    env = daemon_env(sound_card.env, ollama_server.url, tmp_path)
    env.update(NOTIFY_SOCKET=notify.path, WATCHDOG_USEC="1000000")
    daemon = DaemonProcess(env, ("--config", str(config)))
    try:
        yield daemon, notify, env, config
    finally:
        daemon.kill()
        notify.close()
        (tmp_path / "daemon.log").write_text(daemon.log())


def ask(card, tmp_path, name, question):
    clip = voice_clips.write_wav(tmp_path / f"{name}.wav", voice_clips.concat(
        voice_clips.silence(0.3), voice_clips.piper_speech("Hey Jarvis."), voice_clips.silence(0.6),
        voice_clips.piper_speech(question), voice_clips.silence(1.5)))
    card.play_into_mic(clip)


def test_the_daemon_as_a_service(service, sound_card, ollama_server, tmp_path):
    daemon, notify, env, config = service
    notify.wait_for("READY", "1", timeout=90)
    daemon.wait_for("is ready", timeout=10)  # its line may reach us just after READY
    log = daemon.log()
    # READY comes only once every model is loaded and the microphone is open.
    assert notify.messages[0] == {"STATUS": "loading models"}
    assert "models loaded" in log and "microphone:" in log
    assert log.index("microphone:") < log.index("is ready")
    assert not notify.values("WATCHDOG") or notify.messages.index({"WATCHDOG": "1"}) > 0
    notify.wait_for("WATCHDOG", "1", count=3, timeout=10)

    shown = status(env)
    assert shown["state"] == "idle" and shown["counters"]["turns"] == 0
    assert shown["context"]["last_n"] == 6 and shown["models"]["wake_word"] == ["hey_jarvis"]
    assert str(config) in shown["config_files"]

    ask(sound_card, tmp_path, "one", "What is the capital of France?")
    daemon.wait_for("turn timings", timeout=60)
    daemon.wait_for("waiting for the wake word", count=2, timeout=30)
    # READY carried the first "waiting for the wake word"; the end of the turn sends the second.
    notify.wait_for("STATUS", "waiting for the wake word", count=2, timeout=10)
    statuses = notify.values("STATUS")
    for state in ("listening", "transcribing", "thinking", "speaking"):
        assert state in statuses, statuses
    assert statuses[-1] == "waiting for the wake word"
    assert status(env)["counters"]["turns"] == 1

    # A good new config: SIGHUP applies it without a restart (LastN 0: no history in the prompt).
    config.write_text(json.dumps({"Context": {"LastN": 0}, "Listening": {"Mode": "wake_word"}}))
    daemon.process.send_signal(signal.SIGHUP)
    daemon.wait_for("configuration reloaded", timeout=30)
    notify.wait_for("RELOADING", "1")
    assert status(env)["context"]["last_n"] == 0
    ask(sound_card, tmp_path, "two", "How far away is the moon?")
    daemon.wait_for("turn timings", count=2, timeout=60)
    messages = chats(ollama_server)[-1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "moon" in messages[-1]["content"].lower()

    # A broken config on SIGHUP is refused; the running one stays and the daemon keeps working.
    config.write_text('{"Context": {"LastN": "six"}}')
    daemon.process.send_signal(signal.SIGHUP)
    daemon.wait_for("configuration reload rejected", timeout=30)
    assert 'Context.LastN: expected an integer' in daemon.log()
    after = status(env)
    assert after["context"]["last_n"] == 0 and after["counters"]["rejected_reloads"] == 1
    daemon.wait_for("waiting for the wake word", count=3, timeout=30)

    code, seconds = daemon.terminate()
    assert code == 0 and seconds < 5, daemon.log()
    notify.wait_for("STOPPING", "1", timeout=5)
    stored = ConversationStore(tmp_path / "store", "end-to-end key").read_tail(10)
    assert len(stored) == 4
    gone = subprocess.run([sys.executable, "-m", "elara", "status"], env=env,
                          capture_output=True, text=True, timeout=30)
    assert gone.returncode == 3 and "not running" in gone.stderr
