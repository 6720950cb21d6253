"""The daemon's status socket: a Unix socket (mode 0600, in a 0700 directory) that answers one
line, `status`, with a JSON snapshot; and the client `elara status` uses."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from elara.errors import DaemonNotRunning, ElaraError

log = logging.getLogger(__name__)


class StatusServer:
    """Serves `snapshot()` as JSON to whoever connects and says `status`."""

    def __init__(self, path: Path, snapshot: Callable[[], dict[str, Any]],
                 actions: dict[str, Callable[[], Awaitable[None]]] | None = None) -> None:
        self.path = path
        self._snapshot = snapshot
        #: other one-line requests the daemon acts on (e.g. `reload-memory`)
        self._actions = dict(actions or {})
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        """Bind the socket; a stale one from a crashed daemon is replaced, a live one is an error."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.path.parent, 0o700)
        if self.path.exists():
            if _answers(self.path):
                raise ElaraError(f"another Elara daemon is running (it answers on {self.path}); "
                                 "stop it first (`systemctl --user stop elara`)", code="already_running")
            self.path.unlink()
        old_umask = os.umask(0o177)  # the socket is created 0600, with no window where it is wider
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))
        finally:
            os.umask(old_umask)
        log.info("status socket at %s", self.path)

    async def stop(self) -> None:
        """Close the socket and remove its file."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = (await asyncio.wait_for(reader.readline(), 2.0)).decode(errors="replace").strip()
            if request == "status":
                reply = self._snapshot()
            elif request in self._actions:
                await self._actions[request]()
                reply = {"done": request}
            else:
                reply = {"error": f"unknown request {request[:40]!r}; try 'status'"}
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
            return True
        except OSError:
            return False


def query_status(path: Path, timeout: float = 3.0, request: str = "status") -> dict[str, Any]:
    """Ask the daemon for its status (or another request); DaemonNotRunning when nothing answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        try:
            client.connect(str(path))
            client.sendall(request.encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = client.recv(65536)
                if not chunk:
                    break
                data += chunk
        except (FileNotFoundError, ConnectionRefusedError):
            raise DaemonNotRunning(
                f"Elara is not running (nothing answers at {path}): start it with "
                "`systemctl --user start elara` or `elara run`") from None
        except OSError as exc:
            raise DaemonNotRunning(f"the daemon at {path} did not answer: {exc}") from None
    try:
        return json.loads(data)
    except json.JSONDecodeError:
        raise DaemonNotRunning(f"the daemon at {path} sent an unreadable answer") from None
