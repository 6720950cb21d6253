"""Memory work between turns: remembering and forgetting on request, extracting facts, embedding
turns, summarizing. Nothing here delays a reply: work that needs the model waits until no turn is
running, a turn that starts cancels the job in flight, and a failed job is retried later. A job the
store refused (a full disk, its folder gone) is not the job's fault: it is kept, and all work waits,
backing off, until the store takes a write again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from elara.conversation.messages import ChatMessage
from elara.errors import ElaraError, StoreError
from elara.service.backoff import Backoff

log = logging.getLogger(__name__)

#: The longest wait between tries while the store refuses writes.
STORE_RETRY_CAP = 600.0

Job = Callable[[], Coroutine[Any, Any, None]]


@dataclass
class _Queued:
    name: str
    run: Job
    attempts: int = 0
    uses_model: bool = True


@dataclass
class WorkerCounters:
    """How the background work went (for `elara status`)."""

    done: int = 0
    failed: int = 0
    interrupted: int = 0
    errors: dict[str, int] = field(default_factory=dict)


class MemoryWorker:
    """A TurnObserver that queues memory jobs after each turn and runs them in the gaps."""

    def __init__(self, jobs_after_turn: Callable[[ChatMessage, ChatMessage | None], list[tuple[str, Job, bool]]],
                 *, max_attempts: int = 3, retry_seconds: float = 30.0) -> None:
        self._jobs_after_turn = jobs_after_turn
        self.max_attempts = max_attempts
        self.retry_seconds = retry_seconds
        #: the longest wait between tries while the store refuses writes
        self.store_retry_cap = STORE_RETRY_CAP
        self._store_backoff: Backoff | None = None  # while the store refuses writes
        self.counters = WorkerCounters()
        self._queue: list[_Queued] = []
        # Jobs run only while no turn is in the orchestrator and nobody (the voice loop, while
        # the user speaks or Elara answers) has paused the worker.
        self._turn_active = False
        self._paused = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._wakeup = asyncio.Event()
        self._current: asyncio.Task | None = None
        self._current_job: _Queued | None = None
        self._runner: asyncio.Task | None = None
        #: called when the queue has run empty, by role ("prompt": what the jobs changed is in
        #: the next prompt, which may now be read ahead; "heap": what they freed may go back)
        self.on_idle: dict[str, Callable[[], None]] = {}

    # -- TurnObserver --------------------------------------------------------------------------

    def turn_started(self) -> None:
        """A turn needs the model now: stop the job that is using it; it runs again later."""
        self._turn_active = True
        self._update()

    def turn_finished(self, user: ChatMessage, reply: ChatMessage | None) -> None:
        """Queue this turn's memory work; it starts once the gap between turns has begun."""
        for name, run, uses_model in self._jobs_after_turn(user, reply):
            # One pending job of a name is enough (two summaries in a row would do the same work).
            if name.startswith("summar") and any(q.name == name for q in self._queue):
                continue
            self._queue.append(_Queued(name, run, uses_model=uses_model))
        self._turn_active = False
        self._update()
        self._wakeup.set()

    def turn_abandoned(self) -> None:
        """A turn was cut off or dropped unconfirmed: nothing to remember, and the model is free."""
        self._turn_active = False
        self._update()
        self._wakeup.set()

    def pause(self) -> None:
        """Hold model work (the user is speaking, or Elara is): CPU goes to the conversation."""
        self._paused = True
        self._update()

    def resume(self) -> None:
        """Let held work run again."""
        self._paused = False
        self._update()

    def _update(self) -> None:
        if self._turn_active or self._paused:
            self._idle.clear()
            if self._current is not None and self._current_job is not None and self._current_job.uses_model:
                self._current.cancel()
        else:
            self._idle.set()

    # -- running -------------------------------------------------------------------------------

    def start(self) -> None:
        """Run the worker as a task of the current event loop."""
        if self._runner is None:
            self._runner = asyncio.create_task(self._run(), name="memory")

    async def stop(self) -> None:
        """Stop the worker; pending jobs are dropped (they are re-derived from the store later)."""
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None

    @property
    def pending(self) -> int:
        """Jobs waiting or running."""
        return len(self._queue) + (1 if self._current is not None else 0)

    async def drain(self, timeout: float) -> bool:
        """Wait until every queued job has run (a one-shot command before it exits)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.pending and loop.time() < deadline:
            await asyncio.sleep(0.02)
        return not self.pending

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            await self._idle.wait()  # never compete with a turn for the model
            wait = self._store_backoff.remaining() if self._store_backoff is not None else None
            if wait:
                await asyncio.sleep(wait)
                continue
            job = self._queue.pop(0)
            self._current_job = job
            self._current = asyncio.create_task(job.run(), name=f"memory-{job.name}")
            try:
                await self._current
                self.counters.done += 1
                if self._store_backoff is not None:
                    log.info("memory work goes on: the store takes writes again")
                    self._store_backoff = None
            except asyncio.CancelledError:
                if self._runner is not None and self._runner.cancelling():
                    raise
                self.counters.interrupted += 1
                self._queue.insert(0, job)  # a turn took the model: do it again afterwards
            except StoreError as exc:
                self._store_refused(job, exc)
            except ElaraError as exc:
                self._failed(job, exc.code, str(exc))
            except Exception as exc:  # a broken summary or fact must not end the worker
                log.exception("memory job %s failed", job.name)
                self._failed(job, type(exc).__name__, str(exc))
            finally:
                self._current = self._current_job = None
            if not self._queue:
                for hook in self.on_idle.values():
                    hook()

    def _failed(self, job: _Queued, code: str, message: str) -> None:
        self.counters.failed += 1
        self.counters.errors[code] = self.counters.errors.get(code, 0) + 1
        job.attempts += 1
        if job.attempts < self.max_attempts:
            log.warning("memory job %s failed (%s), retrying in %.0f s: %s", job.name, code,
                        self.retry_seconds, message)
            asyncio.get_running_loop().call_later(self.retry_seconds, self._requeue, job)
        else:
            log.warning("memory job %s failed %d times, giving up until the next turn: %s",
                        job.name, job.attempts, message)

    def _store_refused(self, job: _Queued, exc: StoreError) -> None:
        """Kept first in line, its attempts not counted: it runs once the store takes writes."""
        self.counters.failed += 1
        self.counters.errors[exc.code] = self.counters.errors.get(exc.code, 0) + 1
        if self._store_backoff is None:
            self._store_backoff = Backoff(self.retry_seconds, max(self.retry_seconds, self.store_retry_cap),
                                          clock=asyncio.get_running_loop().time)
        delay = self._store_backoff.failed()
        log.warning("memory job %s could not be stored, all memory work waits %.0f s and tries "
                    "again: %s", job.name, delay, exc)
        self._queue.insert(0, job)

    def _requeue(self, job: _Queued) -> None:
        self._queue.append(job)
        self._wakeup.set()
