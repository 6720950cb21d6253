"""How the OpenMP thread pools of the models' native libraries wait, set before they load."""

from __future__ import annotations

import os

#: How long OpenMP threads spin at a barrier before they sleep (libgomp's GOMP_SPINCOUNT, unless
#: the environment sets it). llama.cpp and Whisper's CTranslate2 each load a libgomp, which reads
#: it once, as it loads. libgomp's default, 300 000 spins (≈3 ms), is for a machine of its own:
#: where another thread pool keeps the cores busy (Piper's onnxruntime, while she speaks), a thread
#: waits at each of a token's hundreds of barriers for one that lost its core. A 128-token reply
#: took 6.5 s, not 1.4 s, and at worst minutes (bench/embedded.py --beside-piper); a test
#: of the embedded model took 95 s, not 4 s, beside another worker's Whisper.
OPENMP_SPIN_COUNT = "1000"


def prepare_openmp() -> None:
    """Have OpenMP threads sleep soon at a barrier (`OPENMP_SPIN_COUNT`) unless the environment
    already says how long. The daemon calls this before it starts a thread: setting the C
    environment while another thread reads it is unsafe, and the models load in worker threads
    with the microphone running. The loaders call it too, just before the library loads (a no-op
    by then in the daemon; what sets it for the other commands, the benches and the tests)."""
    os.environ.setdefault("GOMP_SPINCOUNT", OPENMP_SPIN_COUNT)
