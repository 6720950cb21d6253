"""The heap trimmer: what worker threads freed goes back to the system once the work is over."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import subprocess
import sys
import threading

from elara.service.heap import HeapTrimmer, malloc_trim

BLOCK = 64 * 1024  # under glibc's mmap threshold: taken from the thread's arena
BLOCKS = 1600  # 100 MiB


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def freed_in_a_worker_thread() -> None:
    """100 MiB taken and written in a thread of its own, then freed but for the last block (so
    nothing can be trimmed from the arena's top as it is freed)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(BLOCK) for _ in range(BLOCKS)]
    for block in blocks:
        ctypes.memset(block, 1, BLOCK)
    for block in blocks[:-1]:
        libc.free(block)


def test_once_the_work_is_over_the_memory_worker_threads_freed_goes_back_to_the_system():
    assert malloc_trim() is not None  # glibc, as on Debian
    worker = threading.Thread(target=freed_in_a_worker_thread)
    worker.start()
    worker.join()
    held = rss_mib()
    trimmer = HeapTrimmer()

    async def turn_over() -> None:
        trimmer.soon()
        assert trimmer.pending is not None
        await trimmer.pending

    asyncio.run(turn_over())
    assert rss_mib() < held - 50


def test_one_trim_at_a_time():
    calls: list[int] = []
    release = threading.Event()

    def trim(pad: int) -> int:
        calls.append(pad)
        release.wait(5)
        return 1

    trimmer = HeapTrimmer(trim)

    async def two_turns() -> None:
        trimmer.soon()
        trimmer.soon()  # while the first trim runs
        release.set()
        assert trimmer.pending is not None
        await trimmer.pending

    asyncio.run(two_turns())
    assert calls == [0]


ARENAS_USED = """
import ctypes, ctypes.util, sys, threading
from elara.service.heap import limit_arenas
print(limit_arenas(int(sys.argv[1])) if sys.argv[1] != "-" else None)
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
together = threading.Barrier(8)
def allocate():
    together.wait()
    for _ in range(2000):
        libc.malloc(1024)  # a thread's first takes an arena of its own, up to the limit
    together.wait()
threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc.malloc_stats()  # one "Arena N:" block per arena, on stderr
"""


def arenas_used(limit: str, **env: str) -> tuple[str, int]:
    ran = subprocess.run([sys.executable, "-c", ARENAS_USED, limit], capture_output=True, text=True,
                         timeout=60, env={**os.environ, **env}, check=True)
    return ran.stdout.strip(), ran.stderr.count("Arena ")


def test_the_daemons_threads_share_two_heap_arenas():
    assert arenas_used("2") == ("True", 2)
    assert arenas_used("-")[1] > 2  # glibc's own limit: 8 per core
    # the environment's word stands
    assert arenas_used("2", MALLOC_ARENA_MAX="3") == ("False", 3)
