"""The sd_notify protocol over real datagram sockets, including abstract ones."""

import os
import socket

from elara.service.notify import SystemdNotifier


def receive(sock):
    sock.settimeout(2)
    return dict(line.split("=", 1) for line in sock.recv(4096).decode().splitlines())


def test_messages_reach_a_path_socket(tmp_path):
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        notifier = SystemdNotifier({"NOTIFY_SOCKET": path})
        assert notifier.enabled
        notifier.ready("waiting for the wake word")
        assert receive(sock) == {"READY": "1", "STATUS": "waiting for the wake word"}
        notifier.watchdog()
        assert receive(sock) == {"WATCHDOG": "1"}
        notifier.reloading()
        message = receive(sock)
        assert message["RELOADING"] == "1" and int(message["MONOTONIC_USEC"]) > 0
        notifier.stopping()
        assert receive(sock) == {"STOPPING": "1", "STATUS": "stopping"}
        notifier.close()


def test_abstract_socket():
    name = f"elara-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        SystemdNotifier({"NOTIFY_SOCKET": "@" + name}).status("thinking")
        assert receive(sock) == {"STATUS": "thinking"}


def test_without_a_manager_nothing_happens_and_nothing_raises(tmp_path):
    notifier = SystemdNotifier({})
    assert not notifier.enabled and notifier.watchdog_interval is None
    notifier.ready("x")
    gone = SystemdNotifier({"NOTIFY_SOCKET": str(tmp_path / "nobody-listens")})
    gone.status("still fine")  # the manager went away: logged at DEBUG, never raised


def test_watchdog_interval_is_half_the_timeout_and_only_for_this_process():
    assert SystemdNotifier({"WATCHDOG_USEC": "30000000"}).watchdog_interval == 15.0
    assert SystemdNotifier({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}).watchdog_interval is None
    mine = {"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())}
    assert SystemdNotifier(mine).watchdog_interval == 1.0
    assert SystemdNotifier({"WATCHDOG_USEC": "soon"}).watchdog_interval is None
