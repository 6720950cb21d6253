"""Logging set-up: plain lines on a terminal, priority-prefixed lines without timestamps for journald."""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

# syslog priorities journald reads from a `<N>` prefix
_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}


class JournalFormatter(logging.Formatter):
    """`<priority>logger: message` — journald adds the timestamp and reads the level from the prefix."""

    def format(self, record: logging.LogRecord) -> str:
        """Format one record as a single journald line."""
        priority = _PRIORITY.get(record.levelno, 6)
        text = super().format(record).replace("\n", " | ")
        return f"<{priority}>{text}"


def stream_is_journal(stream: TextIO, env: dict[str, str] | None = None) -> bool:
    """True when `stream` is the journald stream systemd connected us to (`$JOURNAL_STREAM`)."""
    value = (os.environ if env is None else env).get("JOURNAL_STREAM", "")
    try:
        device, inode = (int(x) for x in value.split(":"))
        st = os.fstat(stream.fileno())
    except (ValueError, OSError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (device, inode)


def configure(level: str | int, stream: TextIO | None = None) -> None:
    """Send Elara's log records to `stream` (stderr) at `level`, replacing earlier set-up."""
    stream = stream or sys.stderr
    handler = logging.StreamHandler(stream)
    if stream_is_journal(stream):
        handler.setFormatter(JournalFormatter("%(name)s: %(message)s"))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # httpx (and the MCP SDK's httpx2) logs every request, the SDK its sessions, and transitions
    # every state change at INFO: noise in a journal.
    for noisy in ("httpx", "httpcore", "httpx2", "httpcore2", "mcp", "transitions"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
