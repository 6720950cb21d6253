"""Drops a thinking model's reasoning (<think>…</think>) from its reply, streamed or whole. Pure."""

from __future__ import annotations

import re

# Models that reason before answering (qwen3, deepseek-r1, …) wrap it in <think>; a few use <thinking>.
_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_OPEN_TAGS = ("<think>", "<thinking>")
_CLOSE_TAGS = ("</think>", "</thinking>")


def _partial_tag_start(text: str, tags: tuple[str, ...]) -> int | None:
    """Where a suffix of text that could still grow into one of tags begins, if there is one."""
    # A tag has a single "<", so only the suffix from the last "<" can be the start of one.
    start = text.rfind("<")
    if start < 0:
        return None
    tail = text[start:].lower()
    return start if any(tag.startswith(tail) and tag != tail for tag in tags) else None


class ThinkFilter:
    """Feed a streamed reply in; its visible text comes out, with every think block dropped."""

    def __init__(self) -> None:
        self._buffer = ""  # text not yet decided on: a possible partial tag, or nothing
        self._inside = False
        self._started = False  # visible text other than whitespace has come out
        self._dropped_leading = False  # a think block came before any visible text
        self._leading_ws = ""  # whitespace held back until we know whether a think block follows
        self.thought = False
        """True once any think block (closed or not) was seen in this stream."""

    def feed(self, fragment: str) -> str:
        """Add a fragment; return the visible text it completed (possibly "")."""
        self._buffer += fragment
        out: list[str] = []
        while self._buffer:
            if self._inside:
                close = _CLOSE.search(self._buffer)
                if close is None:
                    # Reasoning is dropped as it comes; keep only what may be the start of "</think>".
                    cut = _partial_tag_start(self._buffer, _CLOSE_TAGS)
                    self._buffer = "" if cut is None else self._buffer[cut:]
                    break
                self._buffer = self._buffer[close.end() :]
                self._inside = False
                continue
            opening = _OPEN.search(self._buffer)
            if opening is not None:
                out.append(self._visible(self._buffer[: opening.start()]))
                self._buffer = self._buffer[opening.end() :]
                self._inside = True
                self.thought = True
                if not self._started:
                    self._dropped_leading = True
                    self._leading_ws = ""
                continue
            cut = _partial_tag_start(self._buffer, _OPEN_TAGS)
            if cut is None:
                out.append(self._visible(self._buffer))
                self._buffer = ""
            else:
                out.append(self._visible(self._buffer[:cut]))
                self._buffer = self._buffer[cut:]
            break
        return "".join(out)

    def flush(self) -> str:
        """The visible text left at the end of the stream; an unclosed think block is dropped."""
        rest, self._buffer = self._buffer, ""
        # A dangling "<thin" that never became a tag is ordinary text; inside a block it is reasoning.
        out = "" if self._inside else self._visible(rest)
        if not self._started and not self._dropped_leading:
            out = self._leading_ws + out
        self._leading_ws = ""
        return out

    def _visible(self, text: str) -> str:
        if self._started or not text:
            return text
        stripped = text.lstrip()
        if not stripped:
            self._leading_ws += text
            return ""
        self._started = True
        if self._dropped_leading:
            # "<think>…</think>\n\nParis." — the blank lines after the reasoning are not part of the answer.
            return stripped
        leading, self._leading_ws = self._leading_ws, ""
        return leading + text


def strip_thinking(text: str) -> str:
    """A whole reply without its think blocks (an unclosed one runs to the end and is dropped)."""
    think = ThinkFilter()
    return think.feed(text) + think.flush()
