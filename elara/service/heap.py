"""The heap memory the daemon's work freed, given back to the system whenever it falls quiet.

glibc keeps what a worker thread frees in that thread's arena for the thread's next allocation,
and the engines run in a pool of worker threads that each allocate and free tens of megabytes a
turn (Whisper's buffers, Piper's arena given back after a long sentence). Measured in the soak's
daemon after 52 minutes: RSS 877 MiB, 779 MiB after one `malloc_trim(0)`; without it the RSS rose
in steps of 20–40 MiB as the arenas held more. Rings, local commands and memory jobs free memory
too: trimming after a model's turn alone, one soak sample in three held 17–62 MiB more than a trim
left (the trimmed RSS rose 8 MiB in 38 minutes). So the daemon trims whenever its voice loop falls
idle and whenever the memory jobs are done.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


#: glibc's `mallopt` parameter for the most heap arenas its threads may use
M_ARENA_MAX = -8
#: … for the daemon: its twenty-odd threads made 18 arenas on a 2-core machine, which held
#: 306 MiB after an hour and 399 MiB after two, each keeping what its threads had freed
ARENA_MAX = 2


def limit_arenas(count: int = ARENA_MAX) -> bool:
    """Have the process's threads share at most `count` heap arenas, unless MALLOC_ARENA_MAX
    already says how many; True if glibc took it. Called while this is the only thread."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, count))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none (musl)."""
    try:
        trim = _libc().malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class HeapTrimmer:
    """Gives the heap memory freed back to the system, in a worker thread, when told the work
    that freed it is over (one trim at a time)."""

    def __init__(self, trim: Callable[[int], int] | None = None) -> None:
        self._trim = trim if trim is not None else malloc_trim()
        #: the trim under way, if any
        self.pending: asyncio.Future[None] | None = None

    def soon(self) -> None:
        """The work is over: trim the heap in a worker thread, unless a trim is under way."""
        if self._trim is None or (self.pending is not None and not self.pending.done()):
            return
        self.pending = asyncio.get_running_loop().run_in_executor(None, self._give_back)

    def _give_back(self) -> None:
        assert self._trim is not None
        started = time.perf_counter()
        self._trim(0)
        log.debug("gave the heap's free memory back in %.0f ms", (time.perf_counter() - started) * 1000)
