"""Which tools may run, and which are asked about first (pure): `Tools.Allow` and `Tools.Confirm`."""

from __future__ import annotations

from collections.abc import Iterable

from elara.tools.calls import BUILTIN, ToolSpec


def _matches(spec: ToolSpec, patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        source, _, tool = pattern.partition("/")
        if source.casefold() == spec.source.casefold() and tool in ("*", spec.tool):
            return True
    return False


class ToolPolicy:
    """The built-in read-only tools always run; any other tool only when `allow` names it
    (`source/tool` or `source/*`); of those, the ones `confirm` names need a yes first."""

    def __init__(self, allow: Iterable[str] = (), confirm: Iterable[str] = ()) -> None:
        self.allow = tuple(allow)
        self.confirm = tuple(confirm)

    def allowed(self, spec: ToolSpec) -> bool:
        """True when the tool may run."""
        return (spec.read_only and spec.source == BUILTIN) or _matches(spec, self.allow)

    def confirms(self, spec: ToolSpec) -> bool:
        """True when the tool runs only after the person says yes."""
        return _matches(spec, self.confirm)
