"""One Wyoming client, for the speech services (`remote`) and the satellites (`satellites`).

The protocol is the `wyoming` library's: its event types and its `async_read_event` /
`async_write_event` framing, over asyncio streams opened on an Elara `ServiceAddress` (TCP or a
Unix socket) within a connect timeout, every read and every write bounded. The library's
`AsyncClient` does not fit here: its close waits for unsent bytes to drain, which a service that
stopped reading never allows (here they are dropped), and its read bound (`asyncio.wait_for`, a
task per event) costs more than the read on a reply of many audio chunks.

The satellites hold a connection open for good (`connect`); the speech engines, which block in
worker threads, run one request per connection (`request`), and anything that goes wrong becomes a
`SpeechServiceError` naming the service and what to fix.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from wyoming.event import async_read_event, async_write_event

from elara.errors import SpeechServiceError
from elara.settings import ServiceAddress

if TYPE_CHECKING:  # pragma: no cover - typing only
    from wyoming.event import Event, Eventable
    from wyoming.info import Info

T = TypeVar("T")

#: Seconds a connection may take to open; a service that is down fails fast.
CONNECT_SECONDS = 2.0


class WyomingConnection:
    """An open connection to a Wyoming peer: events out and in, each write and read bounded."""

    def __init__(self, client: WyomingClient, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.client = client
        self._reader = reader
        self._writer: asyncio.StreamWriter | None = writer

    async def send(self, *eventables: Eventable) -> None:
        """Write events; TimeoutError when the peer takes none within the timeout, OSError when
        the connection breaks or is closed."""
        for eventable in eventables:
            if self._writer is None:
                raise ConnectionResetError("the connection is closed")
            async with asyncio.timeout(self.client.timeout):
                await async_write_event(eventable.event(), self._writer)

    async def receive(self) -> Event | None:
        """The next event, or None once the connection is closed; TimeoutError when none comes
        within the timeout."""
        if self._writer is None:
            return None
        async with asyncio.timeout(self.client.timeout):
            return await async_read_event(self._reader)

    async def reply(self) -> Event:
        """The next event of a service's answer; SpeechServiceError when the service closes the
        connection first or answers with a Wyoming `error`."""
        from wyoming.error import Error

        event = await self.receive()
        if event is None:
            raise self.client.error("connection_lost", "the service closed the connection mid-request")
        if Error.is_type(event.type):
            raise self.client.error("service_error",
                                    f"the service answered with an error: {Error.from_event(event).text}")
        return event

    async def close(self) -> None:
        """Close the connection; what the peer has not read yet is dropped, not waited for."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        if writer.transport.get_write_buffer_size():
            writer.transport.abort()  # a close would wait for the peer to read it, maybe for ever
        else:
            writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


class WyomingClient:
    """A Wyoming service or satellite at `address`: connections to it, and blocking requests."""

    def __init__(self, address: ServiceAddress, service: str, *, timeout: float, setting: str,
                 connect_seconds: float = CONNECT_SECONDS) -> None:
        self.address = address
        self.service = service  # "speech-to-text", "text-to-speech", "satellite kitchen": for messages
        self.timeout = float(timeout)  # for each read and each write
        self.setting = setting  # the setting naming the address: what to fix when it is wrong
        self.connect_seconds = min(float(connect_seconds), self.timeout)

    async def _open(self) -> WyomingConnection:
        async with asyncio.timeout(self.connect_seconds):
            if self.address.path is not None:
                reader, writer = await asyncio.open_unix_connection(self.address.path)
            else:
                reader, writer = await asyncio.open_connection(self.address.host, self.address.port)
        return WyomingConnection(self, reader, writer)

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[WyomingConnection]:
        """An open connection, closed after; OSError (or TimeoutError) when it can't be opened."""
        connection = await self._open()
        try:
            yield connection
        finally:
            await connection.close()

    def request(self, exchange: Callable[[WyomingConnection], Awaitable[T]]) -> T:
        """Run `exchange` on a connection of its own and return its result. Blocks (in a thread
        with no running event loop: a worker thread, or the CLI); whatever fails — the service
        unreachable, no answer in time, the connection lost, an `error` from the service — is a
        SpeechServiceError with that code."""
        return asyncio.run(self._request(exchange))

    async def _request(self, exchange: Callable[[WyomingConnection], Awaitable[T]]) -> T:
        try:
            connection = await self._open()
        except OSError as exc:  # TimeoutError is one too
            raise SpeechServiceError(
                f"{self.service} at {self.address} is unreachable ({exc or type(exc).__name__}). Fix: start "
                f"the service, or point {self.setting} at where it runs", code="unreachable",
                service=self.service) from exc
        try:
            return await exchange(connection)
        except TimeoutError as exc:
            raise self.error("timeout", "no answer within the timeout") from exc
        except (OSError, EOFError) as exc:  # EOFError: asyncio's IncompleteReadError, cut mid-event
            raise self.error("connection_lost", f"the connection broke ({exc or type(exc).__name__})") from exc
        finally:
            await connection.close()

    def describe(self) -> Info:
        """The service's `info` (wyoming.info.Info): its programs, models and voices, or for a
        satellite, the satellite (asking does not take it from a running hub)."""
        return self.request(_describe)

    def error(self, code: str, what: str) -> SpeechServiceError:
        """A SpeechServiceError for this service: `code` (see its apologies) and what happened."""
        return SpeechServiceError(f"{self.service} at {self.address}: {what}", code=code, service=self.service)


async def _describe(connection: WyomingConnection) -> Info:
    from wyoming.info import Describe, Info

    await connection.send(Describe())
    while True:
        event = await connection.reply()
        if Info.is_type(event.type):
            return Info.from_event(event)
