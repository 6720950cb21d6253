"""llama.cpp's model evaluating a prompt in steps, so that it can be stopped between them and tells
how much of the prompt it read anew. Imported only when a model loads (it imports llama_cpp)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import llama_cpp

from elara.errors import EvaluationStopped


class SteppedLlama(llama_cpp.Llama):
    """A `llama_cpp.Llama` that reads a prompt `step` tokens at a time and stops between steps once
    `stop` is set. llama-cpp-python keeps the tokens it evaluated, so a stopped prompt asked again
    resumes where it stopped."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step = 32
        self.stop: threading.Event | None = None
        #: tokens of the latest prompt read anew, and kept from before (None until one is read)
        self.prompt_evaluated: int | None = None
        self.prompt_reused = 0
        #: prompt tokens evaluated in this context since it opened
        self.prompt_evaluated_total = 0

    def begin(self, stop: threading.Event, step: int) -> None:
        """Before a request: how it is stopped, and how many tokens a step reads."""
        self.stop, self.step = stop, step
        self.prompt_evaluated = None

    def eval(self, tokens: Sequence[int]) -> None:
        """Evaluate `tokens` a step at a time; EvaluationStopped when asked to stop between steps."""
        if self.prompt_evaluated is None:
            # The first call of a request reads the prompt (what its cache did not already hold);
            # the calls after it read one generated token each.
            self.prompt_evaluated, self.prompt_reused = len(tokens), self.n_tokens
            self.prompt_evaluated_total += len(tokens)
        tokens = list(tokens)
        for start in range(0, max(len(tokens), 1), self.step):
            if self.stop is not None and self.stop.is_set():
                raise EvaluationStopped
            super().eval(tokens[start:start + self.step])
