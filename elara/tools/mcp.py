"""An MCP server as a tool source (the official SDK's client): started over stdio or streamable
HTTP, its tools listed, each call bounded by `TimeoutSeconds`, and restarted with backoff when it
dies — its tools withdrawn meanwhile.

The SDK's transports are anyio context managers that must be entered and left in one task, so each
server has one task (`_serve`) that holds its session open until it is told to stop or the
connection breaks; calls use the session from any task of the same loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx2
import mcp.types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from elara.errors import ConfigError
from elara.service.backoff import Backoff
from elara.settings import McpServerSettings
from elara.tools.calls import ToolOutcome, ToolSpec

log = logging.getLogger(__name__)

#: the first wait before a server that failed is started again, and the longest
RESTART_FIRST, RESTART_CAP = 1.0, 60.0
#: the least time a server is given to start (TimeoutSeconds, when longer)
START_SECONDS = 30.0
#: how often a server that is up is pinged, so one that died while idle is noticed
PING_SECONDS = 15.0
STARTING, UP, DOWN = "starting", "up", "down"


class McpToolSource:
    """One `Tools.McpServers` entry: its tools while it is up, and calls to them."""

    def __init__(self, settings: McpServerSettings, *, restart_first: float = RESTART_FIRST,
                 restart_cap: float = RESTART_CAP, ping_seconds: float = PING_SECONDS) -> None:
        self.settings = settings
        self._backoff = Backoff(restart_first, restart_cap)
        self._ping_seconds = ping_seconds
        self._session: ClientSession | None = None
        self._specs: list[ToolSpec] = []
        self._task: asyncio.Task[None] | None = None
        self._broken = asyncio.Event()  # the session failed: leave it and start again
        self._tried = asyncio.Event()  # the first start ended, either way
        self.state = STARTING
        self.last_error: str | None = None
        self.restarts = 0

    @property
    def name(self) -> str:
        """The server's Name."""
        return self.settings.name

    @property
    def _start_seconds(self) -> float:
        return max(START_SECONDS, self.settings.timeout_seconds)

    def specs(self) -> list[ToolSpec]:
        """Its tools while it is up; none while it starts again."""
        return list(self._specs) if self.state == UP else []

    async def start(self) -> None:
        """Start it and wait for its first start to end (bounded by its start's timeout)."""
        if self._task is None:
            self._task = asyncio.create_task(self._serve(), name=f"mcp-{self.name}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._start_seconds + 1):
                await self._tried.wait()

    async def aclose(self) -> None:
        """Stop the server and its task."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.state, self._session, self._specs = DOWN, None, []

    def status(self) -> dict[str, Any]:
        """Its state, tools, restarts and the last error."""
        return {"state": self.state, "tools": [s.tool for s in self.specs()], "restarts": self.restarts,
                "last_error": self.last_error,
                "transport": "http" if self.settings.url else "stdio"}

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Call one of its tools; a timeout, an error result or a dead server is a failed outcome."""
        session, where = self._session, f"{self.name}/{tool}"
        if session is None or self.state != UP:
            return ToolOutcome.error(f"the MCP server {self.name} is not running ({self.last_error or 'starting'})")
        seconds = self.settings.timeout_seconds
        try:
            # The SDK's own timeout answers first; the outer one is in case it does not.
            async with asyncio.timeout(seconds + 1):
                result = await session.call_tool(tool, dict(arguments), read_timeout_seconds=seconds)
        except (TimeoutError, mcp.MCPError) as exc:
            code = exc.code if isinstance(exc, mcp.MCPError) else mcp.types.REQUEST_TIMEOUT
            if code == mcp.types.REQUEST_TIMEOUT:
                log.warning("MCP tool %s did not answer within %g s", where, seconds)
                return ToolOutcome.error(f"{where} did not answer within {seconds:g} s")
            if code != mcp.types.CONNECTION_CLOSED:
                return ToolOutcome.error(f"{where}: {exc.error.message if isinstance(exc, mcp.MCPError) else exc}")
            return self._died(f"the connection closed during a call to {tool}")
        except Exception as exc:  # the transport broke mid-call
            return self._died(f"{type(exc).__name__}: {exc}")
        if not isinstance(result, mcp.types.CallToolResult):
            return ToolOutcome.error(f"{where} answered with something other than a result")
        text = _text(result)
        return ToolOutcome.error(text) if result.is_error else ToolOutcome(text)

    # -- the server's task -----------------------------------------------------------------------

    async def _serve(self) -> None:
        """Hold a session open; after it ends or fails, wait the backoff and start again."""
        while True:
            self._broken.clear()
            try:
                async with self._connect() as session:
                    await self._list(session)
                    self._up(session)
                    await self._watch(session)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # anything the server or its transport raised
                why = _describe(exc)
                if self.settings.url is not None and isinstance(_leaf(exc), mcp.MCPError):
                    why += f" from {self.settings.url}: check its Url and HeadersFile"
                self._failed(why)
            self._session, self._specs = None, []
            self.state = DOWN
            self._tried.set()
            delay = self._backoff.failed()
            log.warning("MCP server %s is down (%s): starting it again in %.0f s",
                        self.name, self.last_error, delay)
            await asyncio.sleep(delay)
            self.restarts += 1
            self.state = STARTING

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[ClientSession]:
        """A session initialized over the server's transport, within TimeoutSeconds."""
        s = self.settings
        async with contextlib.AsyncExitStack() as stack:
            async with asyncio.timeout(self._start_seconds):
                if s.url is not None:
                    client = await stack.enter_async_context(httpx2.AsyncClient(
                        headers=_headers(s), timeout=httpx2.Timeout(30.0, read=300.0)))
                    read, write = await stack.enter_async_context(
                        streamable_http_client(s.url, http_client=client))
                else:
                    assert s.command is not None
                    parameters = StdioServerParameters(command=s.command, args=list(s.args),
                                                       env=dict(s.env or {}))
                    read, write = await stack.enter_async_context(stdio_client(parameters))
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._message))
                await session.initialize()
            yield session

    async def _list(self, session: ClientSession) -> None:
        """Read its tools (all pages)."""
        specs: list[ToolSpec] = []
        cursor: str | None = None
        while True:
            params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
            listed = await session.list_tools(params=params)
            specs += [ToolSpec(self.name, t.name, t.description or t.title or t.name,
                               dict(t.input_schema or {"type": "object", "properties": {}}))
                      for t in listed.tools]
            cursor = listed.next_cursor
            if not cursor:
                break
        self._specs = specs

    def _up(self, session: ClientSession) -> None:
        self._session, self.state, self.last_error = session, UP, None
        self._backoff.reset()
        self._tried.set()
        log.info("MCP server %s is up with %d tools: %s", self.name, len(self._specs),
                 ", ".join(s.tool for s in self._specs) or "none")

    async def _watch(self, session: ClientSession) -> None:
        """Until the session breaks: a ping now and then notices a server that died while idle."""
        while not self._broken.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._ping_seconds):
                    await self._broken.wait()
            if self._broken.is_set():
                break
            async with asyncio.timeout(self.settings.timeout_seconds):
                await session.send_ping()

    async def _message(self, message: Any) -> None:
        """The session's notifications: a changed tool list is read again; a transport error
        breaks the session."""
        if isinstance(message, Exception):
            self._failed(_describe(message))
        elif isinstance(message, mcp.types.ToolListChangedNotification) and self._session is not None:
            asyncio.get_running_loop().create_task(self._relist(self._session))

    async def _relist(self, session: ClientSession) -> None:
        try:
            await self._list(session)
            log.info("MCP server %s changed its tools: %s", self.name, ", ".join(s.tool for s in self._specs))
        except Exception as exc:
            self._failed(_describe(exc))

    def _died(self, why: str) -> ToolOutcome:
        self._failed(why)
        log.warning("MCP server %s failed during a call: %s", self.name, why)
        return ToolOutcome.error(f"the MCP server {self.name} failed during the call; it is being restarted")

    def _failed(self, why: str) -> None:
        self.last_error = why
        self.state, self._specs = DOWN, []
        self._broken.set()


def _headers(settings: McpServerSettings) -> dict[str, str]:
    """The HTTP headers of `HeadersFile` (a JSON object of strings); ConfigError naming the fix."""
    if settings.headers_file is None:
        return {}
    path = Path(settings.headers_file).expanduser()
    where = f"Tools.McpServers ({settings.name}).HeadersFile {path}"
    try:
        headers = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read ({exc.strerror}): create it or fix the path") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where} is not JSON ({exc.msg}): write an object such as "
                          '{"Authorization": "Bearer …"}') from None
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise ConfigError(f'{where} must be a JSON object of strings, such as {{"Authorization": "Bearer …"}}')
    return headers


def _text(result: mcp.types.CallToolResult) -> str:
    """A result's content as text for the model (other kinds of content named, not inlined)."""
    parts = []
    for block in result.content:
        if isinstance(block, mcp.types.TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{block.type}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts) or "(no content)"


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside exception groups (the SDK's task groups wrap what broke)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    """One line for what broke."""
    exc = _leaf(exc)
    if isinstance(exc, TimeoutError):
        return "it did not start in time"
    return str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
