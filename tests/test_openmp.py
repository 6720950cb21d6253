"""The models' OpenMP threads sleep soon at a barrier unless the person says otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: Each library that loads a libgomp of its own, loaded as Elara loads it.
LOADS = {
    "llama.cpp": """
from elara.brain.embedded import builtin_model_path, load_model
load_model(builtin_model_path(), threads=2, options={}, timeout_seconds=60.0).close()
""",
    "CTranslate2": """
from elara.voice.models import resolve_whisper
from elara.voice.stt import Transcriber
Transcriber(resolve_whisper("tiny.en").path)
""",
}


@pytest.mark.parametrize("library", LOADS)
@pytest.mark.parametrize("environment, seen", [(None, "1000"), ("50000", "50000")])
def test_the_threads_sleep_soon_at_a_barrier_unless_told_otherwise(library, environment, seen):
    # libgomp reads GOMP_SPINCOUNT once, as the library loads, and shows what it read
    # (OMP_DISPLAY_ENV): a few spins unless the person set their own. At libgomp's default a test
    # worker's Whisper threads starved the other worker's model (95 s for a 4 s test).
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    if environment is not None:
        env["GOMP_SPINCOUNT"] = environment
    out = subprocess.run([sys.executable, "-c", LOADS[library]], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"GOMP_SPINCOUNT = '{seen}'" in out.stderr, out.stderr
