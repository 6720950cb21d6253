"""Every tool source behind one door: which tools the model is offered, and running one of its
calls — unknown tools, bad arguments and failing sources all come back as outcomes the model reads."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from elara.tools.calls import ToolCall, ToolOutcome, ToolSpec, argument_problem
from elara.tools.policy import ToolPolicy
from elara.tools.sources import ToolSource

log = logging.getLogger(__name__)


@dataclass
class ToolCounts:
    """Calls and failures per source, shared by the toolboxes of one Elara (its rooms')."""

    calls: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)


class Toolbox:
    """The sources' tools under the policy: only allowed tools are offered or run. The sources
    are started and stopped by whoever made them (MCP servers outlive a reload)."""

    def __init__(self, sources: list[ToolSource], policy: ToolPolicy,
                 counts: ToolCounts | None = None) -> None:
        self.sources = {source.name: source for source in sources}
        self.policy = policy
        self.counts = counts or ToolCounts()

    def offered(self) -> list[ToolSpec]:
        """The allowed tools of the sources that are up, each under a name no other has."""
        chosen: dict[str, ToolSpec] = {}
        for source in self.sources.values():
            for spec in source.specs():
                if not self.policy.allowed(spec):
                    continue
                if spec.offered_name in chosen:
                    log.warning("two tools are offered as %s (%s and %s): only the first is",
                                spec.offered_name, chosen[spec.offered_name].key, spec.key)
                    continue
                chosen[spec.offered_name] = spec
        return list(chosen.values())

    def find(self, name: str) -> ToolSpec | None:
        """The offered tool the model calls `name`."""
        return next((spec for spec in self.offered() if spec.offered_name == name), None)

    async def run(self, spec: ToolSpec, call: ToolCall) -> ToolOutcome:
        """Run an offered tool's call whose arguments fit its schema (`check` first)."""
        self.counts.calls[spec.source] += 1
        try:
            outcome = await self.sources[spec.source].call(spec.tool, call.arguments)
        except Exception as exc:  # a source must not take the turn down with it
            log.exception("the tool %s failed", spec.key)
            outcome = ToolOutcome.error(f"{spec.key} failed: {type(exc).__name__}: {exc}")
        if outcome.failed:
            self.counts.failures[spec.source] += 1
            log.warning("tool %s failed", spec.key)
            log.debug("tool %s: %s", spec.key, outcome.text)
        return outcome

    def check(self, call: ToolCall) -> tuple[ToolSpec | None, ToolOutcome | None]:
        """The tool a call names, or the error outcome the model gets for an unknown tool or
        arguments its schema rejects."""
        spec = self.find(call.name)
        if spec is None:
            names = ", ".join(s.offered_name for s in self.offered()) or "none"
            log.warning("the model called %s, which is not offered", call.name)
            return None, ToolOutcome.error(f"there is no tool {call.name}; the tools are: {names}")
        problem = argument_problem(spec.schema, call.arguments)
        if problem is not None:
            self.counts.calls[spec.source] += 1
            self.counts.failures[spec.source] += 1
            log.warning("the model called %s with arguments its schema rejects: %s", spec.key, problem)
            return spec, ToolOutcome.error(f"the arguments do not fit {call.name}: {problem}")
        return spec, None

    def status(self) -> dict[str, Any]:
        """Each source's state and tools, its calls and failures, and the totals."""
        calls, failures = self.counts.calls, self.counts.failures
        sources = {name: {**source.status(), "calls": calls[name], "failures": failures[name],
                          "offered": [s.offered_name for s in self.offered() if s.source == name]}
                   for name, source in self.sources.items()}
        return {"calls": sum(calls.values()), "failures": sum(failures.values()), "sources": sources}
