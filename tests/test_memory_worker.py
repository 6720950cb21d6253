"""The memory worker: jobs run in the gaps between turns, never alongside one."""

import asyncio

from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.prompts import utc_now
from elara.errors import LanguageModelError
from elara.memory.worker import MemoryWorker

USER = ChatMessage(ChatRole.USER, "hello", utc_now())
REPLY = ChatMessage(ChatRole.ASSISTANT, "hi", utc_now())


class Recorder:
    """Jobs that record when they start and finish, and can be held open or made to fail."""

    def __init__(self):
        self.events = []
        self.gate = asyncio.Event()
        self.failures = 0

    def jobs(self, user, reply):
        async def model_job():
            self.events.append("model started")
            await self.gate.wait()
            if self.failures:
                self.failures -= 1
                raise LanguageModelError("down", code="unreachable")
            self.events.append("model done")

        async def quick_job():
            self.events.append("explicit done")

        return [("explicit", quick_job, False), ("facts", model_job, True)]


def run(coro):
    return asyncio.run(coro)


async def settle():
    for _ in range(20):
        await asyncio.sleep(0)


def test_each_idle_hook_runs_once_the_queue_is_empty_and_a_role_is_replaced_not_added():
    async def scenario():
        recorder = Recorder()
        recorder.gate.set()
        worker = MemoryWorker(recorder.jobs)
        calls = []
        worker.on_idle["prompt"] = lambda: calls.append("old prompt")
        worker.on_idle["prompt"] = lambda: calls.append(("prompt", list(recorder.events)))  # a reload
        worker.on_idle["heap"] = lambda: calls.append("heap")
        worker.start()
        worker.turn_finished(USER, REPLY)
        assert await worker.drain(2)
        await settle()
        assert calls == [("prompt", ["explicit done", "model started", "model done"]), "heap"]
        await worker.stop()
    run(scenario())


def test_jobs_run_after_a_turn_and_a_new_turn_interrupts_them():
    async def scenario():
        recorder = Recorder()
        worker = MemoryWorker(recorder.jobs)
        worker.start()
        worker.turn_started()
        worker.turn_finished(USER, REPLY)
        await settle()
        assert recorder.events == ["explicit done", "model started"]
        worker.turn_started()  # the next question: the model job must give way
        await settle()
        assert worker.counters.interrupted == 1 and worker.pending == 1
        recorder.gate.set()
        await settle()
        assert "model done" not in recorder.events  # not while the turn runs
        worker.turn_finished(USER, REPLY)
        assert await worker.drain(2)
        assert recorder.events.count("model done") == 2  # the interrupted one and the new one
        await worker.stop()
    run(scenario())


def test_pause_holds_work_until_resume_even_across_turn_finished():
    async def scenario():
        recorder = Recorder()
        recorder.gate.set()
        worker = MemoryWorker(recorder.jobs)
        worker.start()
        worker.pause()  # the user said the wake word
        worker.turn_started()
        worker.turn_finished(USER, REPLY)  # the reply is written but still being spoken
        await settle()
        assert recorder.events == []
        worker.resume()  # speech is over
        assert await worker.drain(2)
        assert recorder.events == ["explicit done", "model started", "model done"]
        await worker.stop()
    run(scenario())


def test_a_failed_job_is_retried_and_then_given_up():
    async def scenario():
        recorder = Recorder()
        recorder.gate.set()
        recorder.failures = 5
        worker = MemoryWorker(recorder.jobs, max_attempts=2, retry_seconds=0.01)
        worker.start()
        worker.turn_finished(USER, REPLY)
        await asyncio.sleep(0.2)
        assert worker.counters.failed == 2 and worker.counters.errors == {"unreachable": 2}
        assert "model done" not in recorder.events and worker.pending == 0
        await worker.stop()
    run(scenario())
