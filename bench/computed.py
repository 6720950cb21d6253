#!/usr/bin/env python3
"""Computed answers: every question of tests/test_computed.py's tables through the local commands
(a fixed clock: Monday, November 23rd, 2026), each with Elara's answer or "→ model", the counts
right, and the matcher's time per question. `--libraries` measures the start-up cost of the number
and unit libraries weighed for it (text2num, adopted; pint, if installed) in fresh interpreters.

    .venv/bin/python -m bench.computed [--libraries]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from bench.common import percentile
from tests.test_computed import COMPUTED, LOOK_ALIKES, commands

#: each library's import, and what it needs before its first answer, timed in a fresh interpreter
#: with numpy already loaded (the daemon has it); the added resident memory in MiB
_LIBRARIES = {
    "text2num 3.1.0": ("from text_to_num import alpha2digit", "alpha2digit('seventeen times three', 'en')"),
    "pint": ("import pint", "pint.UnitRegistry().Quantity(5, 'mile').to('kilometer')"),
}
_PROBE = """
import time, numpy
def rss():
    return next(int(l.split()[1]) / 1024 for l in open('/proc/self/status') if l.startswith('VmRSS'))
before, t0 = rss(), time.perf_counter()
{imports}
t1 = time.perf_counter()
{first}
t2 = time.perf_counter()
print(t1 - t0, t2 - t1, rss() - before)
"""


def table() -> tuple[int, int]:
    """Print each question and its answer; (computed right, look-alikes sent to the model)."""
    local = commands()
    right = 0
    print("| question | Elara says | intent | right |\n| --- | --- | --- | --- |")
    for question, intent, expected in COMPUTED:
        reply = local.answer(question)
        said = "→ model" if reply is None else reply.text
        ok = reply is not None and (reply.intent, reply.text) == (intent, expected)
        right += ok
        print(f"| {question} | {said} | {reply.intent if reply else ''} | {'yes' if ok else 'NO'} |")
    to_model = 0
    print("\n| look-alike | goes to |\n| --- | --- |")
    for question in LOOK_ALIKES:
        reply = local.answer(question)
        to_model += reply is None
        print(f"| {question} | {'the model' if reply is None else 'Elara: ' + reply.text} |")
    return right, to_model


def timing(runs: int = 200) -> list[float]:
    """Microseconds per answer (match + compute) over every question of both tables."""
    local = commands()
    questions = [q for q, _, _ in COMPUTED] + LOOK_ALIKES
    times = []
    for _ in range(runs):
        for question in questions:
            t0 = time.perf_counter()
            local.answer(question)
            times.append((time.perf_counter() - t0) * 1e6)
    return times


def libraries(runs: int = 3) -> None:
    """Import and first-use seconds and added memory of each library, median of `runs` fresh interpreters."""
    print("\n| library | import | first use | added memory |\n| --- | ---: | ---: | ---: |")
    for name, (imports, first) in _LIBRARIES.items():
        rows = []
        for _ in range(runs):
            done = subprocess.run([sys.executable, "-c", _PROBE.format(imports=imports, first=first)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                break
            rows.append([float(v) for v in done.stdout.split()])
        if not rows:
            print(f"| {name} | not installed | | |")
            continue
        imported, used, memory = (statistics.median(column) for column in zip(*rows, strict=True))
        print(f"| {name} | {imported * 1000:.0f} ms | {used * 1000:.1f} ms | {memory:.1f} MiB |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--libraries", action="store_true", help="also time text2num and pint start-up")
    args = parser.parse_args()
    right, to_model = table()
    times = timing()
    print(f"\ncomputed questions answered right, none sent to the model: {right}/{len(COMPUTED)}")
    print(f"look-alikes sent to the model: {to_model}/{len(LOOK_ALIKES)}")
    print(f"time per question (match and answer): median {statistics.median(times):.0f} µs, "
          f"p99 {percentile(times, 99):.0f} µs")
    if args.libraries:
        libraries()
    return 0 if right == len(COMPUTED) and to_model == len(LOOK_ALIKES) else 1


if __name__ == "__main__":
    sys.exit(main())
