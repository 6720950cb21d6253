"""The shapes a tool call passes through (pure): a tool as offered to the model, a call the model
made, what came of it, and the check of its arguments against the tool's JSON schema."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

#: The source name of the tools built into Elara (`Tools.Allow: ["elara/set_timer"]`).
BUILTIN = "elara"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class ToolSpec:
    """One tool as a source offers it: its source ("elara", or an MCP server's Name), its own
    name there, what it does, the JSON schema of its arguments, and whether it only reads."""

    source: str
    tool: str
    description: str
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    read_only: bool = False

    @property
    def key(self) -> str:
        """How the config names it: "source/tool"."""
        return f"{self.source}/{self.tool}"

    @property
    def offered_name(self) -> str:
        """The function name the model sees: the tool's own name, after its source's for any
        tool not built in, so two servers' tools of one name stay apart."""
        name = self.tool if self.source == BUILTIN else f"{self.source}_{self.tool}"
        return _UNSAFE.sub("_", name)[:64]

    def function(self) -> dict[str, Any]:
        """The tool in the function-calling shape Ollama (and OpenAI-style APIs) take."""
        return {"type": "function", "function": {
            "name": self.offered_name, "description": self.description,
            "parameters": dict(self.schema) or {"type": "object", "properties": {}}}}


@dataclass(frozen=True)
class ToolCall:
    """A call the model made: the offered name and its arguments."""

    name: str
    arguments: Mapping[str, Any]

    def describe(self) -> str:
        """The call as one line: `set_timer({"seconds": 600})`."""
        return f"{self.name}({json.dumps(dict(self.arguments), ensure_ascii=False, sort_keys=True)})"


@dataclass(frozen=True)
class ToolOutcome:
    """What a call gave back: text for the model, and whether it failed (the model is told)."""

    text: str
    failed: bool = False

    @classmethod
    def error(cls, text: str) -> ToolOutcome:
        """A failed call's outcome: the model reads the reason and can answer with it."""
        return cls(f"Error: {text}", failed=True)


def argument_problem(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """What is wrong with `arguments` for a tool of this JSON schema (None when they fit)."""
    try:
        validator = jsonschema.validators.validator_for(schema)
        validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"the tool's own schema is invalid ({exc.message})"
    error = jsonschema.exceptions.best_match(validator(schema).iter_errors(dict(arguments)))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message
