#!/usr/bin/env python3
"""Benchmark ConversationStore: read_tail(6) at growing history sizes, cold open, and fsync'd appends.

    .venv/bin/python -m bench.store [--sizes 100 10000 100000] [--calls 2000] [--cold-runs 5] [--appends 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import log, percentile
from elara.conversation.crypto import derive_key, seal
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore, encode_message

PASSPHRASE = "benchmark passphrase"
START = datetime(2026, 1, 1, tzinfo=UTC)

COLD_OPEN = """
import sys, time
t0 = time.perf_counter()
from pathlib import Path
from elara.conversation.store import ConversationStore
t1 = time.perf_counter()
store = ConversationStore(Path(sys.argv[1]), sys.argv[2])
tail = store.read_tail(6)
t2 = time.perf_counter()
assert len(tail) == 6
print((t2 - t1) * 1000, (t1 - t0) * 1000)
"""


def populate(root: Path, count: int) -> None:
    """Write count sealed messages straight to disk (no fsync), named as the store names them."""
    root.mkdir(mode=0o700)
    key = derive_key(PASSPHRASE)
    for i in range(count):
        at = START + timedelta(seconds=i)
        role = ChatRole.USER if i % 2 == 0 else ChatRole.ASSISTANT
        message = ChatMessage(role, f"message number {i}, a sentence or two of ordinary length.", at)
        name = f"{at:%Y%m%dT%H%M%S}{at.microsecond // 1000:03d}Z_{i + 1:04d}_{role.slug}.json"
        fd = os.open(root / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, seal(key, encode_message(message)))
        finally:
            os.close(fd)


def percentiles(samples_ms: list[float]) -> tuple[float, float]:
    """Median and 99th percentile."""
    return statistics.median(samples_ms), percentile(samples_ms, 99)


def time_read_tail(store: ConversationStore, calls: int) -> list[float]:
    """Milliseconds per read_tail(6) over many calls."""
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        store.read_tail(6)
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return samples


def time_cold_open(root: Path, runs: int) -> tuple[list[float], list[float]]:
    """Milliseconds for open + first read_tail(6), and for the imports, each in a fresh interpreter."""
    opens, imports = [], []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", COLD_OPEN, str(root), PASSPHRASE],
            check=True, capture_output=True, text=True,
        ).stdout.split()
        opens.append(float(out[0]))
        imports.append(float(out[1]))
    return opens, imports


def time_appends(store: ConversationStore, count: int) -> list[float]:
    """Milliseconds per fsync'd append."""
    samples = []
    for i in range(count):
        message = ChatMessage(ChatRole.USER, f"appended {i}", datetime.now(UTC))
        t0 = time.perf_counter_ns()
        store.append(message)
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return samples


def main() -> int:
    """Run the benchmark and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000, 100_000])
    parser.add_argument("--calls", type=int, default=2000, help="read_tail(6) calls per size")
    parser.add_argument("--cold-runs", type=int, default=5, help="fresh processes for the cold open")
    parser.add_argument("--appends", type=int, default=200)
    args = parser.parse_args()

    rows = []
    base = Path(tempfile.mkdtemp(prefix="elara-bench-"))
    try:
        for size in args.sizes:
            root = base / f"n{size}"
            t0 = time.perf_counter()
            populate(root, size)
            log(f"populated {size} messages in {time.perf_counter() - t0:.1f} s")
            store = ConversationStore(root, PASSPHRASE)
            median, p99 = percentiles(time_read_tail(store, args.calls))
            rows.append((f"read_tail(6), {args.calls} calls", size, median, p99, "≤ 2 ms, flat"))
        largest = base / f"n{max(args.sizes)}"
        opens, imports = time_cold_open(largest, args.cold_runs)
        rows.append((f"open + first read_tail(6), fresh process ×{args.cold_runs}", max(args.sizes), *percentiles(opens), "≤ 300 ms"))
        rows.append(("(import of the store module in that process)", max(args.sizes), *percentiles(imports), "—"))
        store = ConversationStore(largest, PASSPHRASE)
        median, p99 = percentiles(time_appends(store, args.appends))
        rows.append((f"append with fsync ×{args.appends}", max(args.sizes), median, p99, "—"))
    finally:
        shutil.rmtree(base, ignore_errors=True)

    print("| measurement | messages | median | p99 | target |")
    print("|---|---:|---:|---:|---|")
    for what, size, median, p99, target in rows:
        count = f"{size:,}".replace(",", " ")
        print(f"| {what} | {count} | {median:.3f} ms | {p99:.3f} ms | {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
