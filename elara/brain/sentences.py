"""Cuts a streamed reply into sentences, so each can be spoken as soon as it is complete. Pure."""

from __future__ import annotations

import re

# Words whose trailing period does not end a sentence.
ABBREVIATIONS = frozenset(
    ["mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "a.m", "p.m", "no", "approx", "dept", "est", "fig", "inc", "ltd", "mt"]
)
_TERMINATORS = ".!?…"
_CLOSERS = "\"'”’)]}"
_CLAUSE_BREAK = re.compile(r"[,;:—–]\s")


class SentenceSplitter:
    """Feed text fragments in; complete sentences come out, the rest waits for more text."""

    def __init__(self, max_chars: int = 240) -> None:
        self.max_chars = max_chars
        self._buffer = ""

    def feed(self, fragment: str) -> list[str]:
        """Add a fragment; return the sentences it completed."""
        self._buffer += fragment
        out: list[str] = []
        while True:
            cut = self._find_boundary(self._buffer)
            if cut is None:
                break
            sentence, self._buffer = self._buffer[:cut].strip(), self._buffer[cut:].lstrip()
            if sentence:
                out.append(sentence)
        return out

    def flush(self) -> list[str]:
        """The text left at the end of the reply, if any, as a last sentence."""
        rest, self._buffer = self._buffer.strip(), ""
        return [rest] if rest else []

    def _find_boundary(self, text: str) -> int | None:
        for i, ch in enumerate(text):
            if ch == "\n":
                return i + 1
            if ch not in _TERMINATORS:
                continue
            end = i + 1
            while end < len(text) and (text[end] in _TERMINATORS or text[end] in _CLOSERS):
                end += 1
            if end >= len(text):
                return None  # the next fragment decides: "3." may become "3.5"
            if text[end].isspace() and not _is_abbreviation(text, i):
                return end
        if len(text) > self.max_chars:
            # A very long sentence would delay speech: break it at the last clause boundary.
            breaks = [m.end() for m in _CLAUSE_BREAK.finditer(text, 0, self.max_chars)]
            if breaks:
                return breaks[-1]
            space = text.rfind(" ", 0, self.max_chars)
            return space + 1 if space > 0 else self.max_chars
        return None


def _is_abbreviation(text: str, dot: int) -> bool:
    if text[dot] != ".":
        return False
    start = dot
    while start > 0 and (text[start - 1].isalpha() or text[start - 1] == "."):
        start -= 1
    word = text[start:dot].lower()
    if word in ABBREVIATIONS:
        return True
    # A single capital letter is an initial ("J. R. R. Tolkien").
    return len(word) == 1 and text[dot - 1].isupper()
