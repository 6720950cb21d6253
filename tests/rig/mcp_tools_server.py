"""A small MCP server built with the official SDK, for the tests and benches of tool calling.

    python -m tests.rig.mcp_tools_server stdio
    python -m tests.rig.mcp_tools_server http --port N [--token T]

Tools: `add(a, b)`; `slow(seconds)` (answers after sleeping); `crash()` (the process exits
mid-call); `fail()` (an error result); `turn_off(room)` (says it did). Over HTTP with `--token`,
a request without `Authorization: Bearer T` is refused with 401.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def make_server() -> MCPServer:
    """The server and its tools."""
    server = MCPServer("elara-test-tools")

    def add(a: int, b: int) -> str:
        """Add two whole numbers."""
        return str(a + b)

    async def slow(seconds: float) -> str:
        """Answer after `seconds`."""
        await asyncio.sleep(seconds)
        return f"slept {seconds:g} s"

    def crash() -> str:
        """Exit the process in the middle of the call."""
        sys.stdout.flush()
        os._exit(3)

    def fail() -> str:
        """Always fail."""
        raise ToolError("the lights are not answering")

    def turn_off(room: str) -> str:
        """Turn off the lights in a room."""
        return f"The {room} lights are off."

    for tool in (add, slow, crash, fail, turn_off):
        server.add_tool(tool)
    return server


def free_port() -> int:
    """A TCP port on loopback nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_listening(port: int, timeout: float = 20.0) -> None:
    """Return once something accepts connections on the port; TimeoutError after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s")


def _serve_http(port: int, token: str | None) -> None:
    import uvicorn

    app = make_server().streamable_http_app()

    async def guarded(scope, receive, send):
        if token is not None and scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


def main() -> None:
    """Serve over stdio or streamable HTTP."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transport", choices=("stdio", "http"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token")
    args = parser.parse_args()
    if args.transport == "stdio":
        make_server().run("stdio")
    else:
        _serve_http(args.port, args.token)


if __name__ == "__main__":
    main()
