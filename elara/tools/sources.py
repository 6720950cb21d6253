"""Where tools come from: the built-in tools, or one MCP server each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from elara.tools.calls import ToolOutcome, ToolSpec


class ToolSource(Protocol):
    """A set of tools under one name ("elara", or an MCP server's Name)."""

    @property
    def name(self) -> str:
        """The source's name: the `source` of each of its specs."""

    def specs(self) -> list[ToolSpec]:
        """The tools it offers now (none while it is down)."""

    async def start(self) -> None:
        """Connect and list its tools; a source that cannot start logs why, offers nothing and
        keeps trying in the background. Never raises for the source being down."""

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run one of its tools (arguments already checked against its schema); a failure, a
        timeout or a source that is down is a failed outcome, never an exception."""

    def status(self) -> dict[str, Any]:
        """How it stands, for `elara status` and `elara doctor`: at least "state" and "tools"."""

    async def aclose(self) -> None:
        """Stop it and release what it holds (an MCP server's process, its connection)."""
