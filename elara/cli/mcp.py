"""`elara mcp`: what Elara remembers, served over MCP on stdio to an LLM client on this machine:
the history (searched and paged), the facts, the summary and the personalities, as tools and as
resources. Read-only unless `--allow-writes` (forget facts, delete old history, switch the
personality). Everything comes from the encrypted store under the
same key rules as the other commands; a wrong key or a damaged record is an MCP error with the
fix, never a traceback."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from elara.brain import personalities
from elara.config import DEFAULT_FILE, load_settings
from elara.conversation.context import read_turns
from elara.conversation.messages import ChatMessage
from elara.conversation.store import ConversationStore
from elara.errors import DaemonNotRunning, ElaraError
from elara.memory.facts import FactBook
from elara.memory.summaries import SummaryBook
from elara.service import answering
from elara.service.files import replace_file
from elara.service.paths import config_home, status_socket
from elara.service.status import query_status
from elara.settings import Settings

#: the most messages one search or page returns
MAX_MESSAGES = 50
T = TypeVar("T")


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register `mcp`."""
    serve = commands.add_parser(
        "mcp", help="serve what Elara remembers (history, facts, summary, personalities) over MCP "
                    "on stdio, for an LLM client on this machine")
    serve.add_argument("--allow-writes", action="store_true",
                       help="also let the client forget facts, delete old history and switch "
                            "the personality (read-only without it)")
    serve.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    memory_server(settings, allow_writes=args.allow_writes, config_path=args.config).run("stdio")
    return 0


class MemoryReader:
    """What the MCP tools read and change, each call opening the store afresh (so a key fixed or
    a record deleted meanwhile counts), every failure an MCP error naming the fix."""

    def __init__(self, settings: Settings, *, allow_writes: bool, config_path: str | None = None) -> None:
        self.settings = settings
        self.allow_writes = allow_writes
        #: the file given with --config, where a switch of personality is written (else the user's)
        self.config_path = config_path

    def search(self, query: str, limit: int) -> list[dict[str, str]]:
        """The newest messages holding every word of `query`, newest first."""
        words = query.lower().split()
        if not words:
            raise _tool_error("give some words to search for")
        found: list[dict[str, str]] = []
        for message in reversed(read_turns(self._store(), 10**9)):
            if all(word in message.content.lower() for word in words):
                found.append(_said(message))
                if len(found) >= _bounded(limit):
                    break
        return found

    def page(self, page: int, per_page: int) -> list[dict[str, str]]:
        """Page `page` (1: the newest) of the conversation, `per_page` messages, oldest first."""
        if page < 1:
            raise _tool_error("pages count from 1 (the newest)")
        size = _bounded(per_page)
        newest = read_turns(self._store(), page * size)
        return [_said(m) for m in newest[:max(0, len(newest) - (page - 1) * size)]]

    def facts(self) -> list[dict[str, str]]:
        """Every fact remembered about the user."""
        return [{"id": f.id, "text": f.text, "source": f.source,
                 "remembered": f.created.astimezone().isoformat(timespec="minutes")}
                for f in self._facts().facts()]

    def summary(self) -> dict[str, Any]:
        """The latest summary of the older conversation, and how much it covers."""
        book = SummaryBook(self._store())
        self._read(book.load)
        latest = book.latest
        if latest is None:
            return {"summary": None, "turns": 0}
        return {"summary": latest.text, "turns": latest.turns, "covers_until": latest.covers_until}

    def personalities(self) -> dict[str, Any]:
        """The personalities she can take, and the active one."""
        known = personalities.available(self.settings.personalities)
        return {"active": self.settings.language_model.personality,
                "personalities": [{"name": p.name, "system_prompt": p.system_prompt}
                                  for p in known.values()]}

    def forget(self, query: str) -> list[dict[str, str]]:
        """Forget the facts with this id (prefix) or holding these words; the daemon reads them again."""
        self._writable("forget facts")
        from elara.cli.memory import reload_daemon_memory

        forgotten = self._read(lambda: self._facts().forget(query))
        if not forgotten:
            raise _tool_error(f"no remembered fact matches {query!r}: list them with list_facts")
        reload_daemon_memory()
        return [{"id": f.id, "text": f.text} for f in forgotten]

    def purge(self, older_than_days: int) -> dict[str, int]:
        """Delete the messages older than this many days and what was derived from them."""
        self._writable("delete history")
        if older_than_days < 0:
            raise _tool_error("older_than_days counts from 0 (everything)")
        from elara.cli.memory import reload_daemon_memory
        from elara.memory.retention import forget_before

        cutoff = datetime.now(UTC) - timedelta(days=older_than_days)
        store = self._store()
        report = self._read(lambda: forget_before(
            store, cutoff, turns_only=False, keep_summaries=self.settings.context.retention_keep_summaries))
        if report.deleted:
            reload_daemon_memory()
        return {"deleted": report.deleted, "turns": report.turns_deleted,
                "summaries": report.summaries_deleted, "facts": report.facts_deleted}

    def switch(self, name: str) -> dict[str, Any]:
        """Make `name` the active personality: written to the config file, the daemon reloaded."""
        self._writable("switch the personality")
        known = personalities.available(self.settings.personalities)
        chosen = next((p for p in known if p.casefold() == name.strip().casefold()), None)
        if chosen is None:
            raise _tool_error(f"there is no personality {name!r}: choose one of {', '.join(known)}")
        path = Path(self.config_path) if self.config_path else config_home() / DEFAULT_FILE
        before = path.read_bytes() if path.exists() else None
        self._write_personality(path, chosen)
        try:
            settings = load_settings(self.config_path)
        except ElaraError as exc:
            settings = None
            problem = str(exc)
        if settings is None or settings.language_model.personality != chosen:
            _restore(path, before)
            raise _tool_error(f"{path} now names {chosen}, but " + (
                problem if settings is None else
                "a later layer (ELARA__LanguageModel__Personality, or an appsettings.<environment>.json) "
                "sets LanguageModel.Personality: change it there") + "; the file is as it was")
        self.settings = settings
        try:
            query_status(status_socket(), request="reload")
        except DaemonNotRunning:
            pass
        return {"active": chosen, "written_to": str(path)}

    @staticmethod
    def _write_personality(path: Path, name: str) -> None:
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        except (OSError, json.JSONDecodeError) as exc:
            raise _tool_error(f"cannot read {path} to change it ({exc}): fix the file first") from None
        if not isinstance(data, dict):
            raise _tool_error(f"{path} is not a JSON object: fix the file first")
        # Keys are matched regardless of case, as the configuration reads them.
        section = next((k for k in data if k.casefold() == "languagemodel"), "LanguageModel")
        model = data.setdefault(section, {})
        if not isinstance(model, dict):
            raise _tool_error(f"{path}: {section} is not an object: fix the file first")
        key = next((k for k in model if k.casefold() == "personality"), "Personality")
        model[key] = name
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode())

    def _writable(self, doing: str) -> None:
        if not self.allow_writes:
            raise _tool_error(f"this server is read-only: start it as `elara mcp --allow-writes` to "
                              f"let the client {doing}")

    def _store(self) -> ConversationStore:
        return self._read(lambda: answering.open_store(self.settings, create_key=False))

    def _facts(self) -> FactBook:
        book = FactBook(self._store(), max_facts=self.settings.memory.max_facts)
        self._read(book.load)
        return book

    @staticmethod
    def _read(read: Callable[[], T]) -> T:
        try:
            return read()
        except ElaraError as exc:  # a wrong key, a damaged record, a missing folder: say the fix
            raise _tool_error(str(exc)) from None


def memory_server(settings: Settings, *, allow_writes: bool = False, config_path: str | None = None) -> Any:
    """The MCP server over the configured store (the official SDK's MCPServer)."""
    from mcp.server.mcpserver import MCPServer

    reader = MemoryReader(settings, allow_writes=allow_writes, config_path=config_path)
    server = MCPServer("elara", instructions=(
        "What Elara, the user's local voice assistant, remembers: the conversation history, facts "
        "about the user, a summary of older turns, and her personalities."
        + ("" if allow_writes else " Read-only.")))

    def search_history(query: str, limit: int = 10) -> list[dict[str, str]]:
        """Messages of the conversation holding every word of `query`, newest first (up to 50)."""
        return reader.search(query, limit)

    def read_history(page: int = 1, per_page: int = 20) -> list[dict[str, str]]:
        """Page through the conversation: page 1 is the newest `per_page` messages (up to 50)."""
        return reader.page(page, per_page)

    def list_facts() -> list[dict[str, str]]:
        """The facts Elara remembers about the user, with their ids."""
        return reader.facts()

    def read_summary() -> dict[str, Any]:
        """The summary of the older conversation, and how many turns it covers."""
        return reader.summary()

    def list_personalities() -> dict[str, Any]:
        """The personalities Elara can take, and the active one."""
        return reader.personalities()

    def forget_fact(query: str) -> list[dict[str, str]]:
        """Forget the facts with this id (or id prefix) or holding these words (needs --allow-writes)."""
        return reader.forget(query)

    def purge_history(older_than_days: int) -> dict[str, int]:
        """Delete the messages older than this many days, and the facts and summaries derived from
        them (needs --allow-writes)."""
        return reader.purge(older_than_days)

    def switch_personality(name: str) -> dict[str, Any]:
        """Make this personality the active one, now and after a restart (needs --allow-writes)."""
        return reader.switch(name)

    for tool in (search_history, read_history, list_facts, read_summary, list_personalities,
                 forget_fact, purge_history, switch_personality):
        server.add_tool(tool)
    for uri, read, about in (("elara://facts", list_facts, "The facts Elara remembers about the user"),
                             ("elara://summary", read_summary, "The summary of the older conversation"),
                             ("elara://personalities", list_personalities,
                              "Elara's personalities and the active one")):
        server.resource(uri, mime_type="application/json", description=about)(_as_resource(read))
    return server


def _as_resource(read: Callable[[], T]) -> Callable[[], T]:
    """A tool's reading as a resource's: its failures are the resource's, with the same fix."""
    def resource() -> T:
        from mcp.server.mcpserver.exceptions import ResourceError, ToolError

        try:
            return read()
        except ToolError as exc:
            raise ResourceError(str(exc)) from None
    resource.__name__ = read.__name__
    return resource


def _restore(path: Path, before: bytes | None) -> None:
    """Put a config file back as it was (gone, if there was none)."""
    if before is None:
        path.unlink(missing_ok=True)
    else:
        replace_file(path, before, mode=0o644)


def _said(message: ChatMessage) -> dict[str, str]:
    return {"role": message.role.slug, "text": message.content,
            "said": message.timestamp_utc.astimezone().isoformat(timespec="minutes")}


def _bounded(count: int) -> int:
    return max(1, min(MAX_MESSAGES, count))


def _tool_error(message: str) -> Exception:
    from mcp.server.mcpserver.exceptions import ToolError

    return ToolError(message)
