"""systemd's service notification protocol: READY, STATUS, WATCHDOG, RELOADING, STOPPING.

A few datagrams to `$NOTIFY_SOCKET` (an abstract socket when it starts with `@`); without that
variable every call does nothing, so the daemon runs the same under systemd and in a terminal."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping

log = logging.getLogger(__name__)


class SystemdNotifier:
    """Sends notifications to the service manager, if there is one; never raises."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        address = env.get("NOTIFY_SOCKET", "")
        self._address = "\0" + address[1:] if address.startswith("@") else address
        self._socket: socket.socket | None = None
        if self._address:
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        #: seconds between watchdog pings (half of WATCHDOG_USEC), or None when not asked for
        self.watchdog_interval: float | None = None
        usec, pid = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_interval = int(usec) / 2_000_000

    @property
    def enabled(self) -> bool:
        """True when a service manager is listening."""
        return self._socket is not None

    def send(self, **fields: str) -> None:
        """Send `KEY=value` lines in one datagram."""
        if self._socket is None:
            return
        message = "\n".join(f"{key}={value}" for key, value in fields.items()).encode()
        try:
            self._socket.sendto(message, self._address)
        except OSError as exc:  # the manager went away; the daemon goes on
            log.debug("sd_notify failed: %s", exc)

    def ready(self, status: str) -> None:
        """The service is up: every model loaded, the microphone open."""
        self.send(READY="1", STATUS=status)

    def status(self, text: str) -> None:
        """A one-line description of what the service is doing."""
        self.send(STATUS=text)

    def watchdog(self) -> None:
        """Still alive."""
        self.send(WATCHDOG="1")

    def reloading(self) -> None:
        """Reloading the configuration (followed by ready())."""
        self.send(RELOADING="1", MONOTONIC_USEC=str(time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000))

    def stopping(self) -> None:
        """Shutting down."""
        self.send(STOPPING="1", STATUS="stopping")

    def close(self) -> None:
        """Close the socket."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
