"""A small MCP server built with the official SDK, for the tests of Elara's MCP tool source: it
adds, sleeps, turns lights off, fails, dies mid-call, dies soon after answering, and grows a tool.

    python tests/rig/mcp_tools_server.py stdio
    python tests/rig/mcp_tools_server.py http FD [TOKEN]

Over HTTP it serves on the listening socket it inherits as file descriptor FD (the test binds
it on 127.0.0.1, so the port is known and taken before the server starts, with nothing to wait
for); with TOKEN, a request without `Authorization: Bearer TOKEN` is refused with 401.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server: MCPServer = MCPServer("rig", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep this long, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds} s"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ToolError("the rig's tool failed on purpose")


@server.tool()
def turn_off(room: str) -> str:
    """Turn off the lights in a room."""
    return f"The {room} lights are off."


@server.tool()
def crash() -> str:
    """Ends the server's process in the middle of the call."""
    os._exit(3)


@server.tool()
def exit_soon() -> str:
    """Answers, then ends the server's process a moment later (a server dying while idle)."""
    threading.Timer(0.1, os._exit, (4,)).start()
    return "bye"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `extra` and tells the client its list of tools changed."""
    server.add_tool(lambda: "extra", name="extra", description="A tool added while serving.")
    await ctx.request_context.session.send_tool_list_changed()
    return "grown"


def _guarded(app: Any, token: str) -> Any:
    """The ASGI app behind a check of the Authorization header."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"wrong or missing token"})
            return
        await app(scope, receive, send)
    return guarded


def _serve_http(fd: int, token: str | None) -> None:
    import uvicorn

    app: Any = server.streamable_http_app()
    if token:
        app = _guarded(app, token)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=fd)])


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        _serve_http(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
