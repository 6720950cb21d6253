"""One MCP server as a source of tools, through the official `mcp` SDK: started over stdio
(`Command`) or reached over streamable HTTP (`Url`), its tools listed, called with a timeout, and
restarted with backoff when it dies, its tools withdrawn meanwhile.

The SDK's transports and session are anyio context managers whose task groups must be entered
and left by one task, so one long-lived task per server (the keeper) holds them open, and
everything else only talks to it through flags and events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import ClientSession, MCPError, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from elara import __version__
from elara.errors import ConfigError, ToolServerLost
from elara.service.backoff import Backoff
from elara.settings import McpServerSettings
from elara.tools.calls import ToolOutcome, ToolSpec

logger = logging.getLogger(__name__)

#: Variables a stdio server gets besides the SDK's safe few (PATH, HOME, USER, SHELL, TERM, ...).
_PASSED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "XDG_RUNTIME_DIR")
#: How long aclose() lets the keeper close the session and stop the process before cancelling it.
_CLOSE_SECONDS = 8.0
#: The most pages of tools one listing reads.
_MAX_PAGES = 50


class McpToolSource:
    """The tools of one MCP server (`Tools.McpServers[]`), kept connected in the background."""

    def __init__(self, settings: McpServerSettings, *, backoff_first: float = 1.0,
                 backoff_cap: float = 60.0, stable_seconds: float = 60.0,
                 health_seconds: float = 15.0, start_seconds: float | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._timeout = float(settings.timeout_seconds)
        #: The longest a start may take (TimeoutSeconds unless given).
        self._start_seconds = self._timeout if start_seconds is None else start_seconds
        self._backoff = Backoff(backoff_first, backoff_cap, clock=monotonic)
        #: An up-time this long forgives the failures before it (the next wait is the first).
        self._stable_seconds = stable_seconds
        #: How often an idle connection is pinged, so a server that died is noticed.
        self._health_seconds = health_seconds
        self._monotonic = monotonic
        self._state = "down"
        self._specs: list[ToolSpec] = []
        self._session: ClientSession | None = None
        self._up_since: float | None = None
        self._restarts = 0
        self._calls = 0
        self._failures = 0
        self._last_error: str | None = None
        #: The HTTP status a server refused the connection with (the SDK keeps only "an error").
        self._http_refusal: httpx2.Response | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._stopping = False
        self._stop = asyncio.Event()
        self._nudge = asyncio.Event()
        self._settled = asyncio.Event()
        self._relist = False
        self._lost: str | None = None
        self._connecting: anyio.CancelScope | None = None

    @property
    def name(self) -> str:
        """The server's Name: the source of each of its tools."""
        return self.settings.name

    def specs(self) -> list[ToolSpec]:
        """Its tools while it is up; none while it is starting or down."""
        return list(self._specs) if self._state == "up" else []

    def status(self) -> dict[str, Any]:
        """State ("starting", "up", "down", "stopped"), tools, restarts, calls, failures, last error."""
        return {"state": self._state, "transport": "stdio" if self.settings.command else "http",
                "tools": [spec.tool for spec in self.specs()], "restarts": self._restarts,
                "calls": self._calls, "failures": self._failures, "last_error": self._last_error}

    async def start(self) -> None:
        """Start the keeper (once) and wait, at most TimeoutSeconds, for the server's first answer
        or failure; a server that cannot start is down and retried in the background."""
        if self._keeper is not None:
            return
        self._state = "starting"
        self._keeper = asyncio.create_task(self._keep(), name=f"mcp-{self.name}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._start_seconds + 1.0):
                await self._settled.wait()

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run one of its tools, waiting at most TimeoutSeconds; never raises for the server."""
        session = self._session
        if session is None or self._state != "up":
            return self._failed(f"the MCP server {self.name} is not running "
                                f"({self._last_error or 'it is starting'})")
        self._calls += 1
        logger.debug("MCP %s/%s(%s)", self.name, tool, json.dumps(dict(arguments), ensure_ascii=False))
        try:
            # The SDK's own read timeout cancels the request at the server; the outer one also
            # bounds a write to a server that stopped reading.
            async with asyncio.timeout(self._timeout + 2.0):
                result = await session.call_tool(tool, dict(arguments), read_timeout_seconds=self._timeout)
        except TimeoutError:
            return self._timed_out(tool)
        except MCPError as exc:
            return self._call_error(tool, exc, session)
        except Exception as exc:  # a reply the SDK cannot read, a transport fault: the call failed
            logger.warning("MCP %s/%s failed: %s", self.name, tool, _reason(exc))
            return self._failed(f"{self.name}/{tool} failed: {_reason(exc)}")
        text = _result_text(result)
        logger.debug("MCP %s/%s → %s%s", self.name, tool, "error: " if result.is_error else "", text)
        if result.is_error:
            logger.info("MCP %s/%s answered with an error", self.name, tool)
            return self._failed(text)
        return ToolOutcome(text)

    async def aclose(self) -> None:
        """Stop the keeper: the session is closed and a stdio server's process ended."""
        keeper, self._keeper = self._keeper, None
        self._stopping = True
        self._stop.set()
        self._nudge.set()
        self._settled.set()
        if self._connecting is not None:
            self._connecting.cancel()
        if keeper is not None:
            try:
                async with asyncio.timeout(_CLOSE_SECONDS):
                    await asyncio.shield(keeper)
            except TimeoutError:
                logger.warning("MCP server %s did not close within %.0f s; cancelled", self.name,
                               _CLOSE_SECONDS)
                keeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await keeper
        self._state, self._specs, self._session = "stopped", [], None

    def _failed(self, text: str) -> ToolOutcome:
        self._failures += 1
        return ToolOutcome.error(text)

    def _timed_out(self, tool: str) -> ToolOutcome:
        logger.warning("MCP %s/%s did not answer within %g s", self.name, tool, self._timeout)
        return self._failed(f"{self.name}/{tool} did not answer within {self._timeout:g} s")

    def _call_error(self, tool: str, exc: MCPError, session: ClientSession) -> ToolOutcome:
        """A call that ended in an MCP error: the server gone, a timeout, or its refusal."""
        if exc.code == types.REQUEST_TIMEOUT:
            return self._timed_out(tool)
        if exc.code == types.CONNECTION_CLOSED and self._stopping:
            return self._failed(f"the MCP server {self.name} was stopped during the call to {tool}")
        if exc.code == types.CONNECTION_CLOSED:
            if self._session in (session, None):  # not a new session the keeper started since
                self._connection_lost(f"the connection closed during a call to {tool}")
            return self._failed(f"the MCP server {self.name} stopped during the call to {tool}; "
                                "it is being restarted")
        logger.info("MCP %s/%s refused: %s", self.name, tool, exc.message)
        return self._failed(f"{self.name}/{tool}: {exc.message}")

    def _connection_lost(self, reason: str) -> None:
        """Withdraw the tools now, and have the keeper restart the server."""
        self._specs, self._state, self._lost = [], "down", reason
        self._nudge.set()

    # ------------------------------------------------------------------------------------------
    # the keeper: one task that holds the SDK's context managers

    async def _keep(self) -> None:
        """Connect, hold the session until it is lost or stopped, wait out the backoff, again."""
        while not self._stopping:
            self._state, self._lost, self._relist = "starting", None, False
            try:
                await self._serve()
            except Exception as exc:  # whatever ended the connection: the server is down
                if not self._stopping:
                    self._went_down(self._explain(exc))
            if self._stopping:
                break
            with anyio.move_on_after(self._backoff.delay):
                await self._stop.wait()
            self._restarts += 0 if self._stopping else 1

    async def _serve(self) -> None:
        """One connection: open it, list the tools, and hold it until stopped or lost."""
        self._http_refusal = None
        async with contextlib.AsyncExitStack() as stack:
            session = await self._open(stack)
            try:
                with anyio.CancelScope() as self._connecting, anyio.fail_after(self._start_seconds):
                    await session.initialize()
                    specs = await self._list(session)
            finally:
                self._connecting = None
            if self._stopping:
                return
            self._came_up(session, specs)
            try:
                await self._hold(session)
            finally:
                self._session = None

    async def _open(self, stack: contextlib.AsyncExitStack) -> ClientSession:
        """Enter the transport and the session (both quick: nothing waits on the server yet)."""
        if self.settings.command is not None:
            logger.info("MCP server %s: starting %s", self.name, self.settings.command)
            params = StdioServerParameters(command=self.settings.command, args=list(self.settings.args),
                                           env=_environment(self.settings.env))
            read, write = await stack.enter_async_context(stdio_client(params))
        else:
            assert self.settings.url is not None
            logger.info("MCP server %s: connecting to %s", self.name, self.settings.url)
            # The SDK's own HTTP timeouts (a long read, for its event stream): the calls are
            # bounded here, by TimeoutSeconds.
            client = httpx2.AsyncClient(headers=read_headers(self.settings),
                                        timeout=httpx2.Timeout(30.0, read=300.0),
                                        event_hooks={"response": [self._note_refusal]})
            await stack.enter_async_context(client)
            read, write = await stack.enter_async_context(
                streamable_http_client(self.settings.url, http_client=client))
        return await stack.enter_async_context(
            ClientSession(read, write, message_handler=self._on_message,
                          client_info=types.Implementation(name="elara", version=__version__)))

    async def _list(self, session: ClientSession) -> list[ToolSpec]:
        """Every tool the server offers, as specs (each needs Tools.Allow: read_only is False,
        since a server's own readOnlyHint is only its word)."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            listed = await session.list_tools(params=params)
            tools.extend(listed.tools)
            cursor = listed.next_cursor
            if not cursor:
                break
        return [ToolSpec(self.name, tool.name, tool.description or tool.title or "",
                         dict(tool.input_schema), read_only=False) for tool in tools]

    def _came_up(self, session: ClientSession, specs: list[ToolSpec]) -> None:
        self._session, self._specs, self._state = session, specs, "up"
        self._up_since = self._monotonic()
        self._settled.set()
        logger.info("MCP server %s is up with %d tools: %s", self.name, len(specs),
                    ", ".join(spec.tool for spec in specs) or "none")

    async def _hold(self, session: ClientSession) -> None:
        """Wait for a stop, a lost connection or a changed list; ping the server when idle."""
        while True:
            with anyio.move_on_after(self._health_seconds) as idle:
                await self._nudge.wait()
            if idle.cancelled_caught:
                await self._ping(session)
                continue
            self._nudge.clear()
            if self._stopping:
                return
            if self._lost is not None:
                raise ToolServerLost(self._lost)
            if self._relist:
                self._relist = False
                with anyio.fail_after(self._timeout):
                    self._specs = await self._list(session)
                logger.info("MCP server %s changed its tools: %s", self.name,
                            ", ".join(spec.tool for spec in self._specs) or "none")

    async def _ping(self, session: ClientSession) -> None:
        try:
            with anyio.fail_after(self._timeout):
                await session.send_ping()
        except (MCPError, TimeoutError) as exc:
            raise ToolServerLost(f"it stopped answering pings ({_reason(exc)})") from exc

    def _went_down(self, reason: str) -> None:
        """Record why it is down, withdraw its tools, and set the wait before the next try."""
        if self._up_since is not None and self._monotonic() - self._up_since >= self._stable_seconds:
            self._backoff.reset()
        self._up_since = None
        self._specs, self._state, self._last_error, self._lost = [], "down", reason, None
        delay = self._backoff.failed()
        logger.warning("MCP server %s is down: %s; trying again in %.1f s", self.name, reason, delay)
        self._settled.set()

    async def _on_message(self, message: Any) -> None:
        """Notifications from the server: a changed list of tools is listed again."""
        if isinstance(message, types.ToolListChangedNotification):
            self._relist = True
            self._nudge.set()
        elif isinstance(message, Exception):
            logger.debug("MCP server %s: transport fault: %s", self.name, message)

    async def _note_refusal(self, response: httpx2.Response) -> None:
        """Keep an HTTP refusal (401, 404, ...) met while connecting."""
        if response.status_code >= 400 and self._state == "starting":
            self._http_refusal = response

    def _explain(self, exc: BaseException) -> str:
        """Why a connection failed, in a sentence that names the fix where there is one."""
        leaf, starting, where = _leaf(exc), self._state == "starting", self.settings.command or self.settings.url
        refusal = self._http_refusal
        if refusal is not None:
            fix = "HeadersFile" if refusal.status_code in (401, 403) else "Url"
            return (f"{where} answered HTTP {refusal.status_code} {refusal.reason_phrase}: "
                    f"check Tools.McpServers[].{fix}")
        if isinstance(leaf, TimeoutError):
            waited = self._start_seconds if starting else self._timeout
            return f"it did not answer within {waited:g} s (Tools.McpServers[].TimeoutSeconds)"
        if isinstance(leaf, FileNotFoundError) and self.settings.command:
            return (f"the program {where!r} was not found: check Tools.McpServers[].Command "
                    "(a full path, or a program on PATH)")
        if isinstance(leaf, httpx2.TransportError):
            return f"cannot reach {where} ({leaf}): check Tools.McpServers[].Url and that the server runs"
        if isinstance(leaf, MCPError) and leaf.code == types.CONNECTION_CLOSED and starting:
            return (f"{where} closed the connection before it answered (a program that exited: "
                    "its own messages are on Elara's standard error, in the journal)")
        return _reason(exc)


def read_headers(settings: McpServerSettings) -> dict[str, str]:
    """The HTTP headers in the server's HeadersFile (none without one); a file that is missing or
    not a JSON object of strings is a ConfigError naming the setting and the fix."""
    if settings.headers_file is None:
        return {}
    path = Path(settings.headers_file).expanduser()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problem = "does not exist"
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror})"
    except ValueError as exc:
        problem = f"is not JSON ({exc})"
    else:
        if isinstance(data, dict) and all(isinstance(v, str) for v in data.values()):
            return data
        problem = "is not a JSON object of header names to text"
    raise ConfigError(
        f"Tools.McpServers[].HeadersFile of {settings.name} ({path}) {problem}: write it as a JSON "
        'object such as {"Authorization": "Bearer <token>"}, readable only by Elara (chmod 600)')


def _environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The locale and the like from Elara's environment, then the server's Env (the SDK adds
    PATH, HOME, USER, SHELL, TERM and nothing else: no secrets of Elara's own leak)."""
    passed = {key: os.environ[key] for key in _PASSED_ENV if key in os.environ}
    return passed | dict(extra or {})


def _result_text(result: types.CallToolResult) -> str:
    """A tool's result as text: its text blocks joined, anything else named in brackets."""
    parts = [_block_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts) or "(the tool returned nothing)"


def _block_text(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.EmbeddedResource):
        if isinstance(block.resource, types.TextResourceContents):
            return block.resource.text
        return f"[resource {block.resource.uri}]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri}]"
    return f"[{getattr(block, 'type', 'content')}]"


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    leaf = _leaf(exc)
    if isinstance(leaf, MCPError):
        return leaf.message
    return str(leaf) or type(leaf).__name__

