"""The orchestrator end to end over the real store, the real Ollama client and the protocol server."""

import asyncio
import logging
import shutil

import pytest

from elara.brain.ollama import OllamaLanguageModel, make_client
from elara.brain.orchestrator import Orchestrator
from elara.conversation.context import LastNContextProvider, read_turns
from elara.conversation.messages import ChatRole, PromptReady
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.render import OllamaChatRenderer, TranscriptRenderer
from elara.conversation.store import ConversationStore
from tests.rig.ollama_server import FakeOllamaServer, closed_port

_runner: asyncio.Runner | None = None  # the current test's loop (see the `loop` fixture)


class ListSink:
    """Collects the sentences it is given."""

    def __init__(self):
        self.sentences = []

    async def say(self, sentence):
        self.sentences.append(sentence)


def make(store, url, sink, *, model="test-model", timeout=5.0, renderer=None, n=6, budget=None):
    llm = OllamaLanguageModel(make_client(url, timeout), model=model, host=url, keep_alive="5m",
                              options={"temperature": 0.0}, timeout_seconds=timeout)
    context = LastNContextProvider(store, budget)
    builder = PromptBuilder(ConfigSystemPrompt("You are a test."), [context])
    return Orchestrator(store=store, builder=builder, renderer=renderer or OllamaChatRenderer(),
                        llm=llm, sink=sink, context_size=n), llm


@pytest.fixture(autouse=True)
def loop():
    """One event loop per test, as in the daemon: the HTTP client belongs to the loop it ran on."""
    global _runner
    with asyncio.Runner() as runner:
        _runner = runner
        yield runner


def turn(orchestrator, text):
    return _runner.run(orchestrator.on_prompt_ready(PromptReady(text)))


def chat_bodies(server):
    return [body for path, body in server.requests if path == "/api/chat"]


def test_a_turn_streams_sentences_and_stores_both_sides(tmp_path, ollama_server):
    ollama_server.responder = lambda endpoint, body: "Paris is the capital. It is in France. Enjoy!"
    store = ConversationStore(tmp_path, "k")
    sink = ListSink()
    orchestrator, _ = make(store, ollama_server.url, sink)

    result = turn(orchestrator, "What is the capital of France?")
    assert result.ok and result.user_stored and result.assistant_stored
    assert sink.sentences == ["Paris is the capital.", "It is in France.", "Enjoy!"]
    assert result.reply == "Paris is the capital. It is in France. Enjoy!"
    assert result.timings.first_token is not None and result.timings.first_sentence is not None

    stored = store.read_tail(10)
    assert [(m.role, m.content) for m in stored] == [
        (ChatRole.USER, "What is the capital of France?"),
        (ChatRole.ASSISTANT, "Paris is the capital. It is in France. Enjoy!")]
    assert stored[0].metadata == {"source": "text"}
    assert stored[1].metadata == {"model": "test-model"}

    body = chat_bodies(ollama_server)[-1]
    assert body["model"] == "test-model" and body["stream"] is True
    assert body["keep_alive"] == "5m" and body["options"]["temperature"] == 0.0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"].startswith("You are a test.")
    assert "date and time it was said" in body["messages"][0]["content"]
    assert body["messages"][1]["content"].endswith("UTC] What is the capital of France?")


def test_the_next_turn_carries_the_last_n_messages(tmp_path, ollama_server):
    store = ConversationStore(tmp_path, "k")
    orchestrator, _ = make(store, ollama_server.url, ListSink(), n=2)
    for question in ["one?", "two?", "three?"]:
        assert turn(orchestrator, question).ok
    messages = chat_bodies(ollama_server)[-1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1]["content"].endswith("] two?") and messages[-1]["content"].endswith("] three?")
    orchestrator.context_size = 0  # changed at run time, as a reload would
    turn(orchestrator, "four?")
    assert [m["role"] for m in chat_bodies(ollama_server)[-1]["messages"]] == ["system", "user"]


def test_the_budget_keeps_the_prompt_small(tmp_path, ollama_server):
    ollama_server.responder = lambda endpoint, body: "A fairly long answer. " * 20
    store = ConversationStore(tmp_path, "k")
    orchestrator, _ = make(store, ollama_server.url, ListSink(), n=50, budget=150)
    for i in range(6):
        turn(orchestrator, f"question {i}?")
    messages = chat_bodies(ollama_server)[-1]["messages"]
    history = messages[1:-1]
    assert 0 < len(history) < 10
    assert history[0]["role"] == "user"  # whole exchanges only
    assert sum(len(m["content"]) for m in history) / 4 <= 150


def test_generate_renderer_uses_the_generate_endpoint(tmp_path, ollama_server):
    store = ConversationStore(tmp_path, "k")
    orchestrator, _ = make(store, ollama_server.url, ListSink(), renderer=TranscriptRenderer())
    assert turn(orchestrator, "hi there").ok
    path, body = ollama_server.requests[-1]
    assert path == "/api/generate"
    assert body["prompt"].endswith(" UTC] hi there\nAssistant:")
    assert body["system"].startswith("You are a test.")


def test_model_unreachable_then_back(tmp_path):
    port = closed_port()
    url = f"http://127.0.0.1:{port}"
    store = ConversationStore(tmp_path, "k")
    sink = ListSink()
    orchestrator, _ = make(store, url, sink)

    failed = turn(orchestrator, "are you there?")
    assert failed.error.code == "unreachable"
    assert failed.user_stored and not failed.assistant_stored
    assert sink.sentences == ["I can't reach the language model right now."]
    assert [m.role for m in store.read_tail(10)] == [ChatRole.USER]

    with FakeOllamaServer(port=port) as server:
        back = turn(orchestrator, "and now?")
    assert back.ok
    assert [m.role for m in store.read_tail(10)] == [ChatRole.USER, ChatRole.USER, ChatRole.ASSISTANT]
    assert chat_bodies(server)[-1]["messages"][-1]["content"].endswith("UTC] and now?")


def test_model_not_pulled(tmp_path, ollama_server):
    store = ConversationStore(tmp_path, "k")
    sink = ListSink()
    orchestrator, _ = make(store, ollama_server.url, sink, model="not-pulled")
    result = turn(orchestrator, "hello")
    assert result.error.code == "model_missing"
    assert "ollama pull not-pulled" in result.error.message
    assert sink.sentences == ["The language model isn't installed yet."]


@pytest.mark.parametrize("fault", ["error_mid_stream", "drop"])
def test_a_stream_cut_mid_reply_keeps_what_was_said_marked_interrupted(tmp_path, ollama_server, fault):
    """The person hears the first sentence, then a short apology; the history keeps that sentence,
    marked cut short as a barged reply is, never the unsaid rest; the next turn answers."""
    ollama_server.responder = lambda endpoint, body: "First sentence here. Second one is long " * 3
    ollama_server.fault = fault
    ollama_server.fault_after = 5  # "First sentence here." and two words of the next one
    store = ConversationStore(tmp_path, "k")
    sink = ListSink()
    orchestrator, _ = make(store, ollama_server.url, sink)
    result = turn(orchestrator, "tell me")
    assert result.error.code == ("model_error" if fault == "error_mid_stream" else "connection_lost")
    assert result.reply == "" and result.assistant_stored
    assert sink.sentences == ["First sentence here.", result.error.apology]
    stored = store.read_tail(10)
    assert [(m.role, m.content, m.metadata) for m in stored] == [
        (ChatRole.USER, "tell me", {"source": "text"}),
        (ChatRole.ASSISTANT, "First sentence here.", {"model": "test-model", "interrupted": "true"})]

    ollama_server.fault = "none"
    assert turn(orchestrator, "again").ok
    # The model reads the cut reply as said, in its place.
    assert [m["role"] for m in chat_bodies(ollama_server)[-1]["messages"]] == [
        "system", "user", "assistant", "user"]


def test_a_stream_cut_before_a_sentence_stores_no_reply(tmp_path, ollama_server):
    """Nothing was said before the cut: only the apology is heard, and only the question kept."""
    ollama_server.responder = lambda endpoint, body: "First sentence here. Second one is long " * 3
    ollama_server.fault = "error_mid_stream"
    store = ConversationStore(tmp_path, "k")
    sink = ListSink()
    orchestrator, _ = make(store, ollama_server.url, sink)
    result = turn(orchestrator, "tell me")
    assert result.error.code == "model_error" and not result.assistant_stored
    assert sink.sentences == ["The language model ran into a problem."]
    assert [m.role for m in store.read_tail(10)] == [ChatRole.USER]


def test_a_dropped_connection_and_a_hang(tmp_path, ollama_server):
    store = ConversationStore(tmp_path, "k")
    sink = ListSink()
    orchestrator, _ = make(store, ollama_server.url, sink, timeout=0.5)
    ollama_server.fault = "drop"
    assert turn(orchestrator, "one").error.code == "connection_lost"
    ollama_server.fault = "hang"
    assert turn(orchestrator, "two").error.code == "timeout"
    assert sink.sentences[-1] == "The language model took too long to answer."
    assert all(m.role is ChatRole.USER for m in store.read_tail(10))


def test_store_failure_never_takes_the_conversation_down(tmp_path, ollama_server, caplog):
    root = tmp_path / "store"
    store = ConversationStore(root, "k")
    orchestrator, _ = make(store, ollama_server.url, ListSink())
    assert turn(orchestrator, "first").ok
    # The directory vanishes and a file takes its place: every read and write now fails.
    shutil.rmtree(root)
    root.write_text("not a directory")
    with caplog.at_level(logging.WARNING):
        result = turn(orchestrator, "second")
    assert result.ok and result.reply
    assert not result.user_stored and not result.assistant_stored
    assert "could not store the user turn" in caplog.text
    assert "answering without history" in caplog.text


def test_a_megabyte_of_user_text(tmp_path, ollama_server):
    text = "word " * 200_000
    # A short answer: the point is the megabyte stored and sent, not 200 000 tokens streamed back.
    ollama_server.responder = lambda endpoint, body: "That is a lot of words."
    store = ConversationStore(tmp_path, "k")
    orchestrator, _ = make(store, ollama_server.url, ListSink())
    assert turn(orchestrator, text.strip()).ok
    assert store.read_tail(2)[0].content == text.strip()
    assert chat_bodies(ollama_server)[-1]["messages"][-1]["content"].endswith("UTC] " + text.strip())


def test_turns_are_taken_one_at_a_time(tmp_path, ollama_server):
    store = ConversationStore(tmp_path, "k")
    orchestrator, _ = make(store, ollama_server.url, ListSink())

    async def both():
        return await asyncio.gather(orchestrator.on_prompt_ready(PromptReady("a")),
                                    orchestrator.on_prompt_ready(PromptReady("b")))
    results = _runner.run(both())
    assert all(r.ok for r in results)
    roles = [m.role for m in store.read_tail(10)]
    assert roles == [ChatRole.USER, ChatRole.ASSISTANT] * 2


def test_conversation_text_is_logged_only_at_debug(tmp_path, ollama_server, caplog):
    ollama_server.responder = lambda endpoint, body: "A secret reply."
    store = ConversationStore(tmp_path, "k")
    orchestrator, _ = make(store, ollama_server.url, ListSink())
    with caplog.at_level(logging.INFO):
        turn(orchestrator, "my private question")
    assert "turn done" in caplog.text
    assert "private question" not in caplog.text and "secret reply" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        turn(orchestrator, "my private question")
    assert "private question" in caplog.text and "secret reply" in caplog.text


# --- thinking models: reasoning is never spoken or stored --------------------------------------

THOUGHTFUL = ("<think>The user asks about France. Its capital is Paris.\nKeep it short.</think>\n\n"
              "Paris is the capital. It is in France.")
ANSWER = ["Paris is the capital.", "It is in France."]


def spoken_and_stored(tmp_path, server, text="What is the capital of France?"):
    """One turn: (result, sentences spoken, assistant messages stored)."""
    store = ConversationStore(tmp_path, "k")
    sink = ListSink()
    orchestrator, _ = make(store, server.url, sink)
    result = turn(orchestrator, text)
    return result, sink.sentences, [m.content for m in store.read_tail(10)
                                    if m.role is ChatRole.ASSISTANT]


@pytest.mark.parametrize("chunk_chars", [None, 1, 2, 3, 5, 8], ids=lambda n: f"chunks-{n}")
def test_a_thinking_reply_is_spoken_and_stored_without_its_reasoning(tmp_path, ollama_server,
                                                                    chunk_chars):
    # A model Ollama can't parse the tags of: <think> arrives in the text, split across chunks
    # ("<th" + "ink>", "</thi" + "nk>") when chunk_chars is small.
    ollama_server.responder = lambda endpoint, body: THOUGHTFUL
    ollama_server.chunk_chars = chunk_chars
    result, spoken, stored = spoken_and_stored(tmp_path, ollama_server)
    assert result.ok and result.assistant_stored
    assert spoken == ANSWER
    assert stored == [result.reply] == ["Paris is the capital. It is in France."]


def test_think_tags_split_across_chunks_in_both_endpoints(tmp_path, ollama_server):
    ollama_server.responder = lambda endpoint, body: (
        "<THINKING>Several\nlines of\nreasoning.</THINKING>Yes. <think>again</think>No.")
    ollama_server.chunk_chars = 4
    store = ConversationStore(tmp_path, "k")
    for renderer in (OllamaChatRenderer(), TranscriptRenderer()):
        sink = ListSink()
        orchestrator, _ = make(store, ollama_server.url, sink, renderer=renderer)
        result = turn(orchestrator, "yes or no?")
        assert sink.sentences == ["Yes.", "No."] and result.reply == "Yes. No."
    assert len(ollama_server.bodies("/api/chat")) == len(ollama_server.bodies("/api/generate")) == 1


def test_a_stream_that_ends_inside_a_think_block_speaks_only_what_came_before(
        tmp_path, ollama_server):
    ollama_server.responder = lambda endpoint, body: (
        "Paris is the capital. <think>But wait, should I add that it has")
    ollama_server.chunk_chars = 3
    result, spoken, stored = spoken_and_stored(tmp_path, ollama_server)
    assert result.ok and spoken == ["Paris is the capital."]
    assert stored == ["Paris is the capital."]


@pytest.mark.parametrize("reply", ["<think>I never get to the answer", "<think>Done.</think>\n\n"],
                         ids=["unclosed", "closed"])
def test_a_reply_that_is_only_thinking_is_an_empty_reply(tmp_path, ollama_server, reply):
    ollama_server.responder = lambda endpoint, body: reply
    result, spoken, stored = spoken_and_stored(tmp_path, ollama_server)
    assert result.error.code == "model_error" and "gave an empty reply" in result.error.message
    assert spoken == ["The language model ran into a problem."]
    assert stored == [] and result.reply == "" and result.timings.first_token is None


def test_a_thinking_model_is_asked_not_to_think_and_others_are_not(tmp_path, ollama_server):
    ollama_server.models = {"qwen3:0.6b", "llama3.2"}
    ollama_server.model_capabilities = {"qwen3:0.6b": ["completion", "thinking"]}
    ollama_server.responder = lambda endpoint, body: THOUGHTFUL
    for name in ("qwen3:0.6b", "llama3.2"):
        store = ConversationStore(tmp_path / name, "k")
        sink = ListSink()
        orchestrator, llm = make(store, ollama_server.url, sink, model=name)
        assert _runner.run(llm.check()).thinking is (name == "qwen3:0.6b")
        assert turn(orchestrator, "What is the capital of France?").ok
        assert sink.sentences == ANSWER
    thinking, plain = chat_bodies(ollama_server)
    assert thinking["model"] == "qwen3:0.6b" and thinking["think"] is False
    assert plain["model"] == "llama3.2" and "think" not in plain


class ScriptedModel:
    """A provider whose fragments arrive one tick of a fake monotonic clock apart."""

    model = "scripted"

    def __init__(self, fragments):
        self.fragments = fragments
        self.now = 0.0

    def monotonic(self):
        return self.now

    async def stream(self, request):
        for fragment in self.fragments:
            self.now += 1.0
            yield fragment


def test_first_token_times_the_first_visible_text(tmp_path):
    llm = ScriptedModel(["<th", "ink>Let me", " think.", "</think>", "\n\n", "Paris", "."])
    store = ConversationStore(tmp_path, "k")
    builder = PromptBuilder(ConfigSystemPrompt("You are a test."), [LastNContextProvider(store)])
    sink = ListSink()
    orchestrator = Orchestrator(store=store, builder=builder, renderer=OllamaChatRenderer(),
                                llm=llm, sink=sink, context_size=6, monotonic=llm.monotonic)
    result = turn(orchestrator, "capital of France?")
    assert result.ok and sink.sentences == ["Paris."]
    assert result.timings.first_token == 6.0  # "Paris", the sixth fragment, not "<th"
    assert result.timings.first_sentence == 7.0


# -- a speculative turn: the reply worked out before the turn is confirmed ---------------------


class Observer:
    """Records what the orchestrator tells turn observers."""

    def __init__(self):
        self.events = []

    def turn_started(self):
        self.events.append("started")

    def turn_finished(self, user, reply):
        self.events.append(("finished", user.content, reply and reply.content))

    def turn_abandoned(self):
        self.events.append("abandoned")


def test_a_speculative_turn_stores_nothing_until_committed_then_user_before_reply(tmp_path, ollama_server):
    ollama_server.responder = lambda endpoint, body: "Berlin is the capital. It is big."
    store = ConversationStore(tmp_path, "k")
    sink, observer = ListSink(), Observer()
    orchestrator, _ = make(store, ollama_server.url, sink)
    orchestrator.observers.append(observer)

    async def scenario():
        commit = asyncio.Event()
        task = asyncio.create_task(orchestrator.on_prompt_ready(
            PromptReady("What is the capital of Germany?"), commit=commit))
        for _ in range(200):  # the reply streams to its end while the turn is unconfirmed
            if len(sink.sentences) == 2:
                break
            await asyncio.sleep(0.01)
        assert sink.sentences == ["Berlin is the capital.", "It is big."]
        assert store.read_tail(5) == [] and not task.done()
        commit.set()
        return await task

    result = _runner.run(scenario())
    assert result.ok and result.user_stored and result.assistant_stored
    assert [(m.role, m.content) for m in store.read_tail(5)] == [
        (ChatRole.USER, "What is the capital of Germany?"),
        (ChatRole.ASSISTANT, "Berlin is the capital. It is big.")]
    assert observer.events == ["started", ("finished", "What is the capital of Germany?",
                                           "Berlin is the capital. It is big.")]


def test_a_speculative_turn_cancelled_before_commit_leaves_nothing(tmp_path, ollama_server):
    ollama_server.responder = lambda endpoint, body: "A long answer. " * 20
    ollama_server.fault, ollama_server.slow_delay = "slow", 0.05
    store = ConversationStore(tmp_path, "k")
    sink, observer = ListSink(), Observer()
    orchestrator, _ = make(store, ollama_server.url, sink)
    orchestrator.observers.append(observer)

    async def scenario():
        task = asyncio.create_task(orchestrator.on_prompt_ready(
            PromptReady("What is the capital of"), commit=asyncio.Event()))
        for _ in range(200):
            if sink.sentences:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert store.read_tail(5) == []
        # the next turn is not blocked by the dropped one
        ollama_server.fault = "none"
        return await orchestrator.on_prompt_ready(PromptReady("Thanks"))

    result = _runner.run(scenario())
    assert result.user_stored
    assert [m.content for m in store.read_tail(5) if m.role is ChatRole.USER] == ["Thanks"]
    assert observer.events[:2] == ["started", "abandoned"]
    assert store.read_tail(5)[0].content == "Thanks"


def test_the_words_are_stored_when_the_turn_ends_and_the_whole_question_supersedes_them(tmp_path, ollama_server):
    """The person went on after the pause taken for the end: the words before it were stored at
    once, the reply begun is dropped, and the whole question marks them superseded."""
    ollama_server.responder = lambda endpoint, body: "A long answer. " * 20
    ollama_server.fault, ollama_server.slow_delay = "slow", 0.05
    store = ConversationStore(tmp_path, "k")
    sink = ListSink()
    orchestrator, _ = make(store, ollama_server.url, sink)

    async def scenario():
        ended, commit = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(orchestrator.on_prompt_ready(
            PromptReady("How far is it from Paris?", source="voice"), commit=commit, ended=ended))
        await asyncio.sleep(0.05)
        assert store.read_tail(5) == []  # before the end of the turn: nothing
        ended.set()
        for _ in range(200):
            if store.read_tail(5) and sink.sentences:
                break
            await asyncio.sleep(0.01)
        assert [m.content for m in store.read_tail(5)] == ["How far is it from Paris?"]
        task.cancel()  # the person went on
        await asyncio.gather(task, return_exceptions=True)
        ollama_server.fault = "none"
        return await orchestrator.on_prompt_ready(
            PromptReady("How far is it from Paris to Berlin?", source="voice", continues=True))

    result = _runner.run(scenario())
    assert result.ok and result.user_stored
    kept = store.read_tail(5)
    assert [(m.role, m.content, m.metadata.get("superseded")) for m in kept] == [
        (ChatRole.USER, "How far is it from Paris?", "true"),
        (ChatRole.USER, "How far is it from Paris to Berlin?", None),
        (ChatRole.ASSISTANT, "A long answer. " * 19 + "A long answer.", None)]
    # the model was asked the whole question, and never saw the part it superseded
    asked = [m["content"] for m in ollama_server.requests[-1][1]["messages"] if m["role"] == "user"]
    assert len(asked) == 1 and asked[0].endswith("] How far is it from Paris to Berlin?")
    assert [m.content for m in read_turns(store, 10)] == ["How far is it from Paris to Berlin?",
                                                           "A long answer. " * 19 + "A long answer."]


def test_a_question_not_gone_on_with_is_never_superseded(tmp_path, ollama_server):
    ollama_server.responder = lambda endpoint, body: "Sure."
    store = ConversationStore(tmp_path, "k")
    orchestrator, _ = make(store, ollama_server.url, ListSink())

    async def scenario():
        await orchestrator.on_prompt_ready(PromptReady("First question?", source="voice"))
        # a continuing question with nothing gone on with before it supersedes nothing
        await orchestrator.on_prompt_ready(PromptReady("Second question?", source="voice", continues=True))

    _runner.run(scenario())
    assert [m.metadata.get("superseded") for m in store.read_tail(10)] == [None] * 4
