"""Local commands through the real orchestrator, store and Ollama protocol server: answered
without a model request, stored like any turn, done only once the turn is committed."""

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest

from elara.brain.ollama import OllamaLanguageModel, make_client
from elara.brain.orchestrator import Orchestrator
from elara.conversation.context import LastNContextProvider
from elara.conversation.messages import ChatRole, PromptReady
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.render import OllamaChatRenderer
from elara.conversation.store import ConversationStore
from elara.skills.announcements import Announcement, Announcer
from elara.skills.commands import ASK_BACK_SECONDS, LocalCommands, done_text, missed_text
from elara.skills.timers import CANCELLED, PENDING, TimerBook

T0 = datetime(2026, 11, 23, 14, 5, 0, tzinfo=UTC)
ZONE = timezone(timedelta(hours=1))  # 15:05 local


class Clock:
    def __init__(self):
        self.now, self.mono = T0, 100.0

    def __call__(self):
        return self.now

    def monotonic(self):
        return self.mono

    def advance(self, seconds):
        self.now += timedelta(seconds=seconds)
        self.mono += seconds


class ListSink:
    def __init__(self):
        self.sentences = []

    async def say(self, sentence):
        self.sentences.append(sentence)


class Rig:
    """An orchestrator with local commands over a real store and the Ollama protocol server."""

    def __init__(self, tmp_path, server, *, max_hours=24):
        self.clock = Clock()
        self.store = ConversationStore(tmp_path / "store", "commands key")
        self.book = TimerBook(self.store, clock=self.clock)
        self.announcer = Announcer()
        self.commands = LocalCommands(self.book, max_seconds=max_hours * 3600, announcer=self.announcer,
                                      clock=self.clock, local_zone=ZONE, monotonic=self.clock.monotonic)
        self.sink = ListSink()
        self.server = server
        self.runner = asyncio.Runner()  # the HTTP client belongs to the loop it first ran on
        llm = OllamaLanguageModel(make_client(server.url, 5.0), model="test-model", host=server.url,
                                  keep_alive="5m", options={}, timeout_seconds=5.0)
        builder = PromptBuilder(ConfigSystemPrompt("You are a test."), [LastNContextProvider(self.store)],
                                clock=self.clock, local_zone=ZONE)
        self.orchestrator = Orchestrator(store=self.store, builder=builder, renderer=OllamaChatRenderer(),
                                         llm=llm, sink=self.sink, context_size=6, clock=self.clock,
                                         commands=self.commands)

    def say(self, text):
        self.sink.sentences.clear()
        result = self.runner.run(self.orchestrator.on_prompt_ready(PromptReady(text, source="voice")))
        return result, " ".join(self.sink.sentences)

    @property
    def model_requests(self):
        return [path for path, _ in self.server.requests if path in ("/api/chat", "/api/generate")]


@pytest.fixture
def rig(tmp_path, ollama_server):
    ollama_server.responder = lambda endpoint, body: "The model answered."
    rig = Rig(tmp_path, ollama_server)
    with rig.runner:
        yield rig


def test_a_timer_is_set_without_the_model_and_the_turn_is_stored(rig):
    result, said = rig.say("Set a pasta timer for 8 minutes.")
    assert said == "Pasta timer set for eight minutes."
    assert rig.model_requests == []
    assert result.ok and result.intent == "set_timer" and result.user_stored and result.assistant_stored
    turns = rig.store.read_tail(5, roles=(ChatRole.USER, ChatRole.ASSISTANT))
    assert [(m.role, m.content, m.metadata.get("intent")) for m in turns] == [
        (ChatRole.USER, "Set a pasta timer for 8 minutes.", "set_timer"),
        (ChatRole.ASSISTANT, "Pasta timer set for eight minutes.", "set_timer")]
    [timer] = rig.book.active()
    assert (timer.name, timer.seconds, timer.state) == ("pasta", 480, PENDING)


def test_anything_else_still_goes_to_the_model(rig):
    for text in ("Tell me about the history of timers.", "What time do the shops close?"):
        result, said = rig.say(text)
        assert said == "The model answered." and result.intent is None
    assert len(rig.model_requests) == 2
    assert rig.book.active() == []


def test_the_time_and_the_date_in_the_local_zone(rig):
    assert rig.say("What time is it?")[1] == "It's three oh five in the afternoon."
    assert rig.say("What's the date today?")[1] == "Today is Monday, November twenty-third, twenty twenty-six."
    assert rig.say("What day is it?")[1] == "It's Monday, November twenty-third."
    assert rig.model_requests == []


def test_computed_answers_are_stored_turns_without_a_model_request(rig):
    for question, intent, said in (
            ("What's seventeen times three?", "calculate", "17 times 3 is 51."),
            ("How many minutes are in three hours?", "convert", "There are 180 minutes in 3 hours."),
            ("How many days until Christmas?", "days_until", "Christmas is in thirty-two days.")):
        result, spoken = rig.say(question)
        assert spoken == said and result.intent == intent and result.user_stored and result.assistant_stored
    assert rig.model_requests == []
    turns = rig.store.read_tail(6, roles=(ChatRole.USER, ChatRole.ASSISTANT))
    assert [(m.role, m.metadata.get("intent")) for m in turns[-2:]] == [
        (ChatRole.USER, "days_until"), (ChatRole.ASSISTANT, "days_until")]
    assert turns[1].content == "17 times 3 is 51." and turns[0].content == "What's seventeen times three?"


def test_time_left_listing_and_cancelling_by_name(rig):
    rig.say("Set a pasta timer for 8 minutes.")
    rig.say("Set a timer for ten minutes.")
    rig.clock.advance(180)
    assert rig.say("How much time is left on the pasta timer?")[1] == "Your pasta timer has five minutes left."
    assert rig.say("What timers do I have?")[1] == (
        "You have two timers. Your pasta timer has five minutes left. Your timer for ten "
        "minutes has seven minutes left.")
    assert rig.say("Cancel the pasta timer.")[1] == "Pasta timer cancelled."
    assert [t.name for t in rig.book.active()] == [None]
    assert rig.say("How long is left on the tea timer?")[1] == "You have no tea timer."
    assert rig.say("Cancel all timers.")[1] == "Your timer is cancelled."
    assert rig.book.active() == [] and rig.model_requests == []


def test_with_several_timers_cancel_asks_which_one_and_takes_the_answer(rig):
    rig.say("Set a pasta timer for 8 minutes.")
    rig.say("Set a timer for ten minutes.")
    result, said = rig.say("Cancel the timer.")
    assert said == "You have two timers: pasta and ten minutes. Which one?"
    assert result.expects_answer and len(rig.book.active()) == 2
    result, said = rig.say("The ten minute one.")
    assert said == "Timer for ten minutes cancelled." and result.intent == "cancel_timer"
    assert [t.name for t in rig.book.active()] == ["pasta"]
    assert rig.model_requests == []


def test_an_ask_back_answer_comes_in_time_or_goes_to_the_model(rig):
    rig.say("Set a pasta timer for 8 minutes.")
    rig.say("Set a tea timer for 3 minutes.")
    rig.say("Cancel the timer.")
    rig.clock.advance(ASK_BACK_SECONDS + 1)
    assert rig.say("Pasta.")[1] == "The model answered."
    assert len(rig.book.active()) == 2


@pytest.mark.parametrize("text, refusal", [
    ("Set a timer for zero minutes.", "A timer needs at least one second. How long should it run?"),
    ("Set a timer for a thousand hours.", "I can set timers for up to twenty-four hours."),
])
def test_impossible_timers_are_refused_aloud(rig, text, refusal):
    result, said = rig.say(text)
    assert said == refusal and result.intent == "set_timer"
    assert rig.book.active() == [] and rig.model_requests == []


def test_stop_ends_a_ringing_timer_and_leaves_no_turn(rig):
    rig.say("Set a timer for three seconds.")
    [timer] = rig.book.active()
    rig.announcer.post(Announcement(done_text(timer), "timer", rings=True, timer_id=timer.id))
    stored = len(list(rig.store.iter_messages()))
    result, said = rig.say("Stop.")
    assert said == "" and result.intent == "stop" and not result.user_stored
    assert rig.announcer.ringing == [] and rig.model_requests == []
    assert len(list(rig.store.iter_messages())) == stored


def test_stop_the_timer_while_one_rings_cancels_that_one(rig):
    rig.say("Set a tea timer for 1 minute.")
    rig.say("Set a pasta timer for 8 minutes.")
    rig.clock.advance(61)
    tea = next(t for t in rig.book.active() if t.name == "tea")
    rig.announcer.post(Announcement(done_text(tea), "timer", rings=True, timer_id=tea.id))
    assert rig.say("Stop the timer.")[1] == ""
    assert rig.book.get(tea.id).state == CANCELLED and rig.announcer.ringing == []
    assert [t.name for t in rig.book.active()] == ["pasta"]


def test_a_speculative_timer_is_set_only_once_the_turn_is_committed(rig):
    async def scenario(commit_it):
        commit = asyncio.Event()
        task = asyncio.create_task(rig.orchestrator.on_prompt_ready(
            PromptReady("Set a timer for 5 minutes.", source="voice"), commit=commit))
        for _ in range(100):
            if rig.sink.sentences:
                break
            await asyncio.sleep(0.01)
        assert rig.sink.sentences == ["Timer set for five minutes."]  # said (held) ahead
        assert rig.book.active() == [] and rig.store.read_tail(5) == []
        if commit_it:
            commit.set()
            return await task
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return None

    rig.runner.run(scenario(commit_it=False))
    assert rig.book.active() == [] and rig.store.read_tail(5) == []
    rig.sink.sentences.clear()
    result = rig.runner.run(scenario(commit_it=True))
    assert result.user_stored and result.assistant_stored and len(rig.book.active()) == 1


def test_a_timer_that_cannot_be_stored_is_apologised_for(rig, monkeypatch):
    from elara.errors import StoreError

    def broken(*args, **kwargs):
        raise StoreError("disk full")

    monkeypatch.setattr(rig.book, "start", broken)
    result, said = rig.say("Set a timer for 5 minutes.")
    assert said == "Sorry, I couldn't do that: I can't write to my storage."
    assert result.error is not None and result.error.code == "command"
    assert not result.assistant_stored


def test_intents_can_be_turned_off(tmp_path, ollama_server):
    ollama_server.responder = lambda endpoint, body: "The model answered."
    rig = Rig(tmp_path, ollama_server)
    rig.orchestrator.commands = None
    with rig.runner:
        assert rig.say("What time is it?")[1] == "The model answered."


def test_what_a_timer_says_when_done_or_missed():
    from elara.skills.timers import Timer
    pasta = Timer("abcd1234", "pasta", 480, T0, T0 - timedelta(seconds=480))
    plain = Timer("abcd1235", None, 600, T0, T0 - timedelta(seconds=600))
    assert done_text(pasta) == "Your pasta timer is done."
    assert done_text(plain) == "Your timer for ten minutes is done."
    assert missed_text(pasta, T0 + timedelta(minutes=12)) == \
        "Your pasta timer went off twelve minutes ago while I was offline."


def test_an_answer_worked_out_ahead_and_dropped_can_be_given_again(rig):
    rig.say("Set a pasta timer for 8 minutes.")
    rig.say("Set a tea timer for 3 minutes.")
    rig.say("Cancel the timer.")
    assert rig.commands.answer("The pasta") is not None  # a speculative transcript, then dropped
    reply = rig.commands.answer("The pasta one.")
    assert reply is not None and reply.text == "Pasta timer cancelled."
    rig.say("What time is it?")  # another command: the question is over
    assert rig.commands.answer("Tea.") is None
