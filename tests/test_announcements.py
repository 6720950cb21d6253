"""The announcer's bookkeeping on plain numbers, the chime, the record, and the model watch
against the real Ollama client and the protocol server."""

import asyncio
from datetime import UTC, datetime

import numpy as np

from elara.brain.ollama import OllamaLanguageModel, make_client
from elara.conversation.messages import ChatMessage, ChatRole
from elara.skills.announcements import (
    MODEL_BACK,
    Announcement,
    Announcer,
    ModelWatch,
    announcement_record,
    chime,
)

NOW = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)


def recorded() -> tuple[Announcer, list[tuple[str, str]]]:
    events: list[tuple[str, str]] = []
    announcer = Announcer(on_heard=lambda a: events.append(("heard", a.text)),
                          on_over=lambda a, why: events.append((why, a.text)), ring_gap=3, retry_after=5)
    return announcer, events


def test_announcements_come_in_order_and_a_plain_one_is_said_once():
    announcer, events = recorded()
    first, second = Announcement("One.", "startup"), Announcement("Two.", "model_back")
    announcer.post(first)
    announcer.post(second)
    assert announcer.next(0) is first
    announcer.played(first, 1, ring_seconds=60)
    assert announcer.next(1) is second
    announcer.played(second, 2, ring_seconds=60)
    assert announcer.next(2) is None and not announcer.pending
    assert events == [("heard", "One."), ("said", "One."), ("heard", "Two."), ("said", "Two.")]


def test_a_ring_repeats_after_the_gap_and_ends_after_ring_seconds():
    announcer, events = recorded()
    ring = Announcement("Your tea timer is done.", "timer", rings=True, timer_id="t1")
    announcer.post(ring)
    played_at = []
    now = 0.0
    while announcer.pending and now < 100:
        if announcer.next(now) is ring:
            played_at.append(now)
            announcer.played(ring, now + 2, ring_seconds=10)  # each ring lasts 2 s
        now += 0.5
    assert played_at == [0.0, 5.0, 10.0]  # heard at 2, 7, 12: none starts 10 s after the first
    assert events == [("heard", ring.text), ("rang out", ring.text)]
    assert announcer.status()["rang_out"] == 1


def test_stopping_one_timer_leaves_the_others_ringing():
    announcer, events = recorded()
    tea = Announcement("Tea.", "timer", rings=True, timer_id="tea")
    eggs = Announcement("Eggs.", "timer", rings=True, timer_id="eggs")
    announcer.post(tea)
    announcer.post(eggs)
    assert announcer.stop("tea") == [tea]
    assert announcer.ringing == [eggs]
    assert announcer.stop() == [eggs] and announcer.ringing == []
    assert events == [("stopped", "Tea."), ("stopped", "Eggs.")]


def test_a_failed_announcement_waits_and_is_not_counted_as_heard():
    announcer, events = recorded()
    ring = Announcement("Eggs.", "timer", rings=True, timer_id="e")
    announcer.post(ring)
    announcer.failed(ring, 0, OSError("no speaker"))
    assert announcer.next(4.9) is None and announcer.next(5.0) is ring
    assert events == [] and announcer.status()["playback_failures"] == 1


def test_dropping_announcements_of_cancelled_timers():
    announcer, events = recorded()
    announcer.post(Announcement("Tea.", "timer", rings=True, timer_id="tea"))
    announcer.post(Announcement("I'm ready.", "startup"))
    announcer.drop(lambda a: a.timer_id is None)
    assert [a.text for a in [announcer.next(0)]] == ["I'm ready."]
    assert events == [("dropped", "Tea.")]


def test_the_chime_is_short_quiet_enough_and_starts_without_a_click():
    clip = chime(22_050)
    assert clip.sample_rate == 22_050 and 0.5 < clip.duration < 1.0
    peak = np.abs(clip.samples).max()
    assert 0.3 * 32767 < peak <= 0.36 * 32767
    assert abs(int(clip.samples[0])) < 100
    spectrum = np.abs(np.fft.rfft(clip.samples.astype(float)))
    strongest = np.fft.rfftfreq(len(clip.samples), 1 / 22_050)[spectrum.argmax()]
    assert 1200 < strongest < 1900


def test_the_record_says_what_when_and_why():
    record = announcement_record(Announcement("Your tea timer is done.", "timer", timer_id="t1"), NOW)
    assert record.role is ChatRole.SYSTEM and record.content == "Your tea timer is done."
    assert dict(record.metadata) == {"kind": "announcement", "why": "timer", "timer": "t1"}
    assert record.timestamp_utc == NOW


def test_the_model_watch_announces_the_model_back_after_a_failed_turn(ollama_server):
    ollama_server.models = set()  # "model not found" until it is pulled
    announcer = Announcer()

    async def scenario():
        llm = OllamaLanguageModel(make_client(ollama_server.url, 2.0), model="test-model",
                                  host=ollama_server.url, keep_alive="5m", options={}, timeout_seconds=2.0)
        watch = ModelWatch(announcer, llm.check, interval=0.02)
        task = asyncio.create_task(watch.run())
        user = ChatMessage(ChatRole.USER, "hello", NOW)
        try:
            watch.turn_finished(user, None)  # the model failed a turn
            await asyncio.sleep(0.2)
            assert watch.down and not announcer.pending  # still down: nothing said
            ollama_server.models = {"test-model"}
            for _ in range(100):
                if announcer.pending:
                    break
                await asyncio.sleep(0.02)
            assert not watch.down
            # a failed turn, then a good one: back without a word
            watch.turn_finished(user, None)
            watch.turn_finished(user, ChatMessage(ChatRole.ASSISTANT, "hi", NOW))
            await asyncio.sleep(0.1)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await llm.aclose()

    asyncio.run(scenario())
    said = announcer.next(0)
    assert said is not None and said.why == MODEL_BACK and said.text == "I can reach my language model again."
    announcer.played(said, 0, 60)
    assert not announcer.pending
