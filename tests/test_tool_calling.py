"""The model calls tools, end to end through the one orchestrator: the real Ollama client against
the protocol server, the real store, timers and facts, the built-in tools under Tools.Allow and
Tools.Confirm."""

import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from elara.config import bind, packaged_defaults
from elara.conversation.messages import ChatMessage, ChatRole, PromptReady
from elara.conversation.records import kind_of
from elara.conversation.store import ConversationStore
from elara.memory.facts import FactBook
from elara.memory.manager import Memory
from elara.service import answering
from elara.service.slices import LanguageModelSlice
from elara.skills.timers import TimerBook
from elara.tools.mcp import McpToolSource
from tests.rig.ollama_server import FakeOllamaServer, ToolCalls, last_user_text, pending_tool_results

TOOLS_MODEL = "tool-model"
MCP_SERVER = Path(__file__).parent / "rig" / "mcp_tools_server.py"


class ListSink:
    """Collects the sentences it is given."""

    def __init__(self):
        self.sentences = []

    async def say(self, sentence):
        self.sentences.append(sentence)


def settings_with(model=TOOLS_MODEL, host="http://127.0.0.1:1", **tools):
    data = packaged_defaults()
    data["LanguageModel"].update({"Provider": "ollama", "Model": model, "Host": host})
    data["Memory"].update({"Summaries": False, "Facts": "explicit"})
    data["Tools"].update(tools)
    return bind(data)


class Elara:
    """An orchestrator over a fresh store with its timers and facts, asking the server."""

    def __init__(self, tmp_path, server, runner, *, model=TOOLS_MODEL, sources=(), **tools):
        self.runner = runner
        self.settings = settings_with(model, server.url, **tools)
        self.store = ConversationStore(tmp_path / "store", "k")
        self.book = TimerBook(self.store)
        self.book.load()
        self.sink = ListSink()
        self.llm = answering.make_ollama(LanguageModelSlice.of(self.settings))
        runner.run(self.llm.check())
        self.memory = Memory(self.settings, self.store, self.llm)
        runner.run(self.memory.load())
        commands = answering.make_commands(self.settings, self.book)
        self.orchestrator = answering.make_orchestrator(self.settings, self.store, self.llm, self.sink,
                                                        self.memory, commands=commands, tools=sources)

    def turn(self, text, commit=None):
        return self.runner.run(self.orchestrator.on_prompt_ready(PromptReady(text), commit=commit))

    def records(self):
        return [(m.role, kind_of(m), m.content) for m in self.store.read_tail(100)]


@pytest.fixture
def runner():
    with asyncio.Runner() as runner:
        yield runner


@pytest.fixture
def server():
    with FakeOllamaServer(models=["test-model", TOOLS_MODEL]) as fake:
        fake.model_capabilities = {TOOLS_MODEL: ["completion", "tools"]}
        yield fake


def calls_then_answers(*calls, answer=lambda results: f"Done: {results[-1]['content']}"):
    """A model that makes `calls` (one round each) and then answers from the last result."""

    def respond(endpoint, body):
        rounds = sum(1 for m in body["messages"] if m.get("tool_calls"))
        since_user = pending_tool_results(body)
        if rounds < len(calls) and (rounds == 0 or since_user) and body.get("tools"):
            return ToolCalls([calls[rounds]])
        return answer(since_user) if since_user else "I can't."

    return respond


def chats(server):
    return [body for path, body in server.requests if path == "/api/chat"]


def test_a_reminder_the_intent_matcher_misses_is_set_by_the_models_call(tmp_path, server, runner):
    server.responder = calls_then_answers(("set_reminder", {"text": "take the pasta off", "in_seconds": 600}))
    elara = Elara(tmp_path, server, runner)

    result = elara.turn("could you give me a nudge in ten minutes to take the pasta off?")

    assert result.ok and result.reply.startswith("Done: Reminder set for")
    [timer] = elara.book.active()
    assert timer.reminder == "take the pasta off" and timer.seconds == 600
    first, second = chats(server)
    offered = [t["function"]["name"] for t in first["tools"]]
    assert {"set_timer", "set_reminder", "current_time", "compute", "remember_fact"} <= set(offered)
    assert second["messages"][-2]["tool_calls"][0]["function"] == {
        "name": "set_reminder", "arguments": {"text": "take the pasta off", "in_seconds": 600}}
    assert second["messages"][-1]["role"] == "tool" and second["messages"][-1]["tool_name"] == "set_reminder"
    assert [(role, kind) for role, kind, _ in elara.records() if kind != "timer"] == [
        (ChatRole.USER, None), (ChatRole.SYSTEM, "tool_call"), (ChatRole.SYSTEM, "tool_result"),
        (ChatRole.ASSISTANT, None)]
    call = next(c for _, kind, c in elara.records() if kind == "tool_call")
    assert call == 'set_reminder({"in_seconds": 600, "text": "take the pasta off"})'

    server.responder = lambda endpoint, body: "Sure."
    elara.turn("thanks")
    roles = [m["role"] for m in chats(server)[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]  # the tool records stay out of Last-N


def test_a_model_without_the_tools_capability_is_offered_none(tmp_path, server, runner):
    elara = Elara(tmp_path, server, runner, model="test-model")
    assert elara.turn("set a reminder to call mum at six please").ok
    assert "tools" not in chats(server)[-1] or not chats(server)[-1]["tools"]


def test_an_unknown_tool_or_arguments_the_schema_rejects_go_back_to_the_model(tmp_path, server, runner):
    server.responder = calls_then_answers(("open_the_pod_bay_doors", {}),
                                          ("set_timer", {"seconds": "ten minutes"}),
                                          answer=lambda results: "Sorry, I could not.")
    elara = Elara(tmp_path, server, runner)

    result = elara.turn("time my tea")

    assert result.ok and result.reply == "Sorry, I could not."
    results = [m["content"] for m in chats(server)[-1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("Error: there is no tool open_the_pod_bay_doors; the tools are:")
    assert results[1] == "Error: the arguments do not fit set_timer: seconds: 'ten minutes' is not of type 'integer'"
    assert elara.book.active() == []
    status = elara.orchestrator.acting.toolbox.status()
    assert status["failures"] == 1 and status["sources"]["elara"]["failures"] == 1


def test_the_rounds_end_at_max_rounds_and_she_answers_without_tools(tmp_path, server, runner):
    def again(endpoint, body):
        return ToolCalls([("current_time", {})]) if body.get("tools") else "It is late."

    server.responder = again
    elara = Elara(tmp_path, server, runner, MaxRounds=2)

    result = elara.turn("what time is it in words, exactly?")

    assert result.reply == "It is late."
    bodies = chats(server)
    assert [bool(b.get("tools")) for b in bodies] == [True, True, False]


def test_a_tool_not_allowed_is_not_offered_and_read_only_built_ins_are(tmp_path, server, runner):
    server.responder = calls_then_answers(("set_timer", {"seconds": 60}))
    elara = Elara(tmp_path, server, runner, Allow=[])

    elara.turn("a minute timer, if you would")

    offered = {t["function"]["name"] for t in chats(server)[0]["tools"]}
    assert offered == {"current_time", "list_timers", "search_history", "compute"}
    assert elara.book.active() == []


def test_a_confirmed_tool_is_asked_about_and_runs_on_yes(tmp_path, server, runner):
    def respond(endpoint, body):
        results = pending_tool_results(body)
        if results and results[-1]["content"].startswith("Not done yet"):
            return "Shall I set a ten minute timer?"
        if results:
            return "Your timer is running."
        return ToolCalls([("set_timer", {"seconds": 600})])

    server.responder = respond
    elara = Elara(tmp_path, server, runner, Confirm=["elara/set_timer"])

    asked = elara.turn("could you time ten minutes for the eggs")
    assert asked.reply == "Shall I set a ten minute timer?" and asked.expects_answer
    assert elara.book.active() == []

    yes = elara.turn("Yes please.")
    assert yes.reply == "Your timer is running."
    assert [t.seconds for t in elara.book.active()] == [600]
    last = chats(server)[-1]["messages"]
    assert last[-1]["role"] == "tool" and last[-1]["content"].startswith("Timer for ten minutes set")
    kinds = [kind for _, kind, _ in elara.records() if kind in ("tool_call", "tool_result")]
    assert kinds == ["tool_call", "tool_result", "tool_result"]


def test_a_confirmed_tool_does_not_run_on_no_or_on_another_question(tmp_path, server, runner):
    def respond(endpoint, body):
        results = pending_tool_results(body)
        if results:
            return "Shall I set a ten minute timer?"
        if last_user_text(endpoint, body).startswith("time"):
            return ToolCalls([("set_timer", {"seconds": 600})])
        return "Paris."

    server.responder = respond
    elara = Elara(tmp_path, server, runner, Confirm=["elara/*"])

    assert elara.turn("time ten minutes for the eggs").expects_answer
    no = elara.turn("No thanks.")
    assert no.reply == "Okay, I won't." and no.ok and elara.book.active() == []
    assert elara.records()[-2][2] == "The person said no: not done."

    assert elara.turn("time ten minutes for the eggs").expects_answer
    assert elara.turn("what is the capital of France?").reply == "Paris."
    assert elara.turn("yes").reply != "Okay, I won't."  # no question waits any more
    assert elara.book.active() == []


def test_a_call_that_changes_something_waits_for_the_turn_to_be_committed(tmp_path, server, runner):
    server.responder = calls_then_answers(("set_timer", {"seconds": 60}))
    elara = Elara(tmp_path, server, runner)
    commit = asyncio.Event()

    async def dropped():
        task = asyncio.ensure_future(elara.orchestrator.on_prompt_ready(PromptReady("could you keep an eye on the tea for me"),
                                                                        commit=commit))
        while len(chats(server)) < 1 or not elara.orchestrator._lock.locked():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    runner.run(dropped())
    assert elara.book.active() == [] and elara.store.read_tail(10) == []


def test_the_history_and_facts_tools_read_and_write_the_store(tmp_path, server, runner):
    elara = Elara(tmp_path, server, runner)
    yesterday = datetime.now(UTC) - timedelta(days=1)
    elara.store.append(ChatMessage(ChatRole.USER, "the boiler is making a clicking noise", yesterday))
    elara.store.append(ChatMessage(ChatRole.ASSISTANT, "Check the pilot light.", yesterday))
    server.responder = calls_then_answers(("search_history", {"query": "boiler", "days_ago": 1}),
                                          ("remember_fact", {"fact": "The user's boiler clicks."}),
                                          answer=lambda results: "Noted.")

    assert elara.turn("what did I ask you yesterday about the boiler?").reply == "Noted."

    found = [m["content"] for m in chats(server)[1]["messages"] if m["role"] == "tool"][0]
    assert "The user said: the boiler is making a clicking noise" in found
    assert "You answered: Check the pilot light." in found
    facts = FactBook(elara.store)
    assert [f.text for f in facts.load()] == ["The user's boiler clicks."]


def test_tool_records_name_the_tool_and_whether_it_failed(tmp_path, server, runner):
    server.responder = calls_then_answers(("compute", {"question": "what is 17 times 23"}))
    elara = Elara(tmp_path, server, runner)
    assert elara.turn("seventeen twenty-threes, how many is that?").reply == "Done: 17 times 23 is 391."
    records = [m for m in elara.store.read_tail(10) if kind_of(m)]
    assert [(m.metadata["kind"], m.metadata["tool"]) for m in records] == [
        ("tool_call", "elara/compute"), ("tool_result", "elara/compute")]
    assert json.loads(records[1].metadata["failed"]) is False


def test_a_slow_mcp_tool_gets_one_filler_and_its_result_reaches_the_model(tmp_path, server, runner):
    home = McpToolSource(bind({**packaged_defaults(), "Tools": {
        **packaged_defaults()["Tools"], "McpServers": [
            {"Name": "home", "Command": sys.executable, "Args": [str(MCP_SERVER), "stdio"]}]}}
    ).tools.mcp_servers[0])
    runner.run(home.start())
    try:
        server.responder = calls_then_answers(("home_slow", {"seconds": 1.5}), ("home_slow", {"seconds": 1.5}),
                                              answer=lambda results: "All done.")
        elara = Elara(tmp_path, server, runner, sources=[home], Allow=["elara/*", "home/*"])

        result = elara.turn("take your time with the lights")

        assert result.reply == "All done."
        assert elara.sink.sentences == ["One moment.", "All done."]  # once, however many slow calls
        results = [m["content"] for m in chats(server)[-1]["messages"] if m["role"] == "tool"]
        assert results == ["slept 1.5 s", "slept 1.5 s"]
        assert elara.orchestrator.acting.toolbox.status()["sources"]["home"]["calls"] == 2
    finally:
        runner.run(home.aclose())


def test_a_yes_in_a_dropped_speculative_turn_leaves_the_question_open(tmp_path, server, runner):
    def respond(endpoint, body):
        results = pending_tool_results(body)
        if results and results[-1]["content"].startswith("Not done yet"):
            return "Shall I set a ten minute timer?"
        return "Set." if results else ToolCalls([("set_timer", {"seconds": 600})])

    server.responder = respond
    elara = Elara(tmp_path, server, runner, Confirm=["elara/set_timer"])
    assert elara.turn("could you time ten minutes for the eggs").expects_answer

    async def dropped():
        task = asyncio.ensure_future(elara.orchestrator.on_prompt_ready(PromptReady("yes"), commit=asyncio.Event()))
        while not elara.orchestrator._lock.locked():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the call waits for the commit that never comes
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    runner.run(dropped())
    assert elara.book.active() == []
    assert elara.turn("yes").reply == "Set."
    assert [t.seconds for t in elara.book.active()] == [600]
