"""The embedded provider with the real built-in model (SmolLM2-135M-Instruct in llama.cpp)."""

import argparse
import asyncio
import contextlib
import os
import shutil
import threading

import pytest

from elara.brain.embedded import (
    BUILTIN_FILE,
    MODEL_KEY,
    builtin_model_path,
    default_threads,
    load_embedded,
    load_model,
    resolve_embedded_model,
    sampling_arguments,
)
from elara.brain.orchestrator import Orchestrator
from elara.config import load_settings
from elara.conversation.context import LastNContextProvider
from elara.conversation.messages import ChatRole, PromptReady
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.render import ChatRequest, GenerateRequest, OllamaChatRenderer
from elara.conversation.store import ConversationStore
from elara.errors import ConfigError, LanguageModelError
from elara.memory.facts import FACTS_SCHEMA, FactExtractor

SYSTEM = "You are a helpful assistant. Answer in one short sentence."
FRANCE = ChatRequest(messages=(
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "What is the capital of France?"},
))
COUNT = ChatRequest(messages=(
    {"role": "user", "content": "Count from 1 to 500, separated by commas."},
))


async def collect(model, request):
    return [piece async for piece in model.stream(request)]


def valid_facts(reply):
    """True when `reply` matches FACTS_SCHEMA: an object with a list of strings under "facts"."""
    return (isinstance(reply, dict) and isinstance(reply.get("facts"), list)
            and all(isinstance(fact, str) for fact in reply["facts"]))


# -- answers ----------------------------------------------------------------------------------


def test_it_answers_the_capital_of_france_streamed_in_pieces(embedded_model):
    pieces = asyncio.run(collect(embedded_model, FRANCE))
    assert len(pieces) > 3  # token by token, not one block at the end
    assert "paris" in "".join(pieces).lower()
    assert embedded_model.loaded.last_finish in ("stop", "length")


def test_a_generate_request_is_answered_through_the_chat_template(embedded_model):
    request = GenerateRequest(prompt="User: What is the capital of France?\nAssistant:",
                              system=SYSTEM)
    reply = "".join(asyncio.run(collect(embedded_model, request)))
    assert "paris" in reply.lower()


def test_complete_returns_the_whole_reply(embedded_model):
    reply = asyncio.run(embedded_model.complete(list(FRANCE.messages)))
    assert "paris" in reply.lower()


@pytest.mark.parametrize("user, assistant", [
    ("My name is Anna and I am vegetarian.", "Nice to meet you, Anna!"),
    ("What's the weather like?", "I can't see outside, sorry."),
    ("My sister Maria's birthday is on 3 May and I work as a nurse in Leeds.", "Noted!"),
])
def test_complete_json_is_schema_valid_for_the_facts_schema(embedded_model, user, assistant):
    messages = [{"role": "system", "content": "Answer with JSON: {\"facts\": [...]}"},
                {"role": "user", "content": f"The user said: {user}"}]
    assert valid_facts(asyncio.run(embedded_model.complete_json(messages, FACTS_SCHEMA)))
    # The memory's own extractor, prompt and validation included, accepts what it gets.
    facts = asyncio.run(FactExtractor(embedded_model).extract(user, assistant, []))
    assert isinstance(facts, list) and all(isinstance(f, str) for f in facts)


def test_check_reports_the_gguf_metadata(embedded_model):
    info = asyncio.run(embedded_model.check())
    assert info.name == "SmolLM2-135M-Instruct.Q4_1"
    assert info.family == "llama" and info.quantization == "Q4_1"
    status = embedded_model.status()
    assert status["provider"] == "embedded" and status["model"] == info.name
    assert status["path"].endswith(BUILTIN_FILE)
    assert status["threads"] == 2 and status["context_size"] == 2048
    assert status["generating"] is False and status["closed"] is False


def test_embeddings_need_ollama(embedded_model):
    with pytest.raises(LanguageModelError) as info:
        asyncio.run(embedded_model.embed(["hello"], "nomic-embed-text"))
    assert info.value.code == "embeddings_unavailable"
    assert "Memory.Retrieval" in info.value.message and "ollama pull nomic-embed-text" in info.value.message


def test_the_daemon_sets_the_spin_count_before_it_starts(monkeypatch):
    # set in the C environment while the daemon is one thread, not later in the worker thread
    # that loads the model while the microphone's thread runs
    import elara.service.daemon
    from elara.cli import voice

    seen = {}

    class Daemon:
        def __init__(self, *args):
            seen["at start"] = os.environ.get("GOMP_SPINCOUNT")

        async def run(self):
            return 0

    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setattr(elara.service.daemon, "Daemon", Daemon)
    args = argparse.Namespace(config=None, config_sources=argparse.Namespace(files=()))
    assert voice._run(args, load_settings(None)) == 0
    assert seen == {"at start": "1000"}


def test_warm_up_runs_one_token(embedded_model):
    asyncio.run(embedded_model.warm_up())
    assert embedded_model.loaded.last_tokens <= 1


# -- stopping, timeouts, one at a time -------------------------------------------------------


def test_cancelling_the_turn_stops_the_generation(embedded_model):
    model = embedded_model.reconfigured(options={"temperature": 0.0, "num_predict": 1000})

    async def scenario():
        got = []
        five = asyncio.Event()

        async def consume():
            async for piece in model.stream(COUNT):
                got.append(piece)
                if len(got) == 5:
                    five.set()

        task = asyncio.create_task(consume())
        await five.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # By the time the cancelled task is done, the worker thread has let go of llama.cpp.
        assert model.status()["generating"] is False
        return got

    got = asyncio.run(scenario())
    assert len(got) >= 5
    assert model.loaded.last_finish == "stopped"
    assert model.loaded.last_tokens < 40  # of the 1000 it was allowed
    # and the model is free for the next question at once
    assert "paris" in "".join(asyncio.run(collect(embedded_model, FRANCE))).lower()


def test_closing_the_stream_early_stops_the_generation(embedded_model):
    model = embedded_model.reconfigured(options={"temperature": 0.0, "num_predict": 1000})

    async def first_piece():
        async with contextlib.aclosing(model.stream(COUNT)) as pieces:
            async for piece in pieces:
                return piece

    assert asyncio.run(first_piece())
    assert model.loaded.last_finish == "stopped" and model.loaded.last_tokens < 40
    assert model.status()["generating"] is False


def test_a_model_that_sends_nothing_in_time_is_a_timeout(embedded_model):
    # No piece arrives within a microsecond: the same path as a stuck or overloaded machine.
    model = embedded_model.reconfigured(options={"num_predict": 1000}, timeout_seconds=1e-6)
    with pytest.raises(LanguageModelError) as info:
        asyncio.run(collect(model, COUNT))
    assert info.value.code == "timeout" and "LanguageModel.TimeoutSeconds" in info.value.message
    assert model.status()["generating"] is False
    # It may have timed out before the model's thread picked it up; once that has had its turn,
    # the request ended stopped, whichever it was.
    model.loaded.executor.submit(lambda: None).result()
    assert model.loaded.last_finish == "stopped" and model.status()["generating"] is False


def test_a_request_given_up_before_the_model_is_free_never_starts(embedded_model):
    # The model's thread is busy until the consumer has timed out; the consumer hears of it then,
    # not when the thread is free, and the request must not run afterwards (nor leave the
    # previous request's ending as its own).
    model = embedded_model.reconfigured(options={"num_predict": 1000}, timeout_seconds=0.05)
    asyncio.run(collect(embedded_model, FRANCE))
    assert model.loaded.last_finish == "stop"
    release = threading.Event()
    busy = model.loaded.executor.submit(release.wait, 30)
    try:
        with pytest.raises(LanguageModelError) as info:
            asyncio.run(collect_then_release(model, COUNT, release))
    finally:
        release.set()
    assert busy.result() is True  # released by the timed-out consumer, not by the wait's own end
    assert info.value.code == "timeout"
    model.loaded.executor.submit(lambda: None).result()  # the given-up request has had its turn
    assert model.loaded.last_finish == "stopped" and model.loaded.last_tokens == 0
    assert model.status()["generating"] is False


async def collect_then_release(model, request, release):
    """Collect `request`, letting the model's thread go only once the wait has timed out."""
    try:
        return await collect(model, request)
    finally:
        release.set()


def test_a_memory_job_waits_while_a_turn_is_generating(embedded_model):
    async def scenario():
        order = []
        first = asyncio.Event()

        async def turn():
            async for _ in embedded_model.stream(FRANCE):
                first.set()
            order.append("turn")

        async def job():
            messages = [{"role": "user", "content": "I am vegetarian."}]
            reply = await embedded_model.complete_json(messages, FACTS_SCHEMA)
            order.append("job")
            return reply

        turn_task = asyncio.create_task(turn())
        await first.wait()
        job_task = asyncio.create_task(job())
        reply = await job_task
        await turn_task
        return order, reply

    order, reply = asyncio.run(scenario())
    assert order == ["turn", "job"]
    assert valid_facts(reply)


def conversation(turns: int) -> ChatRequest:
    """A chat of `turns` exchanges and a new question, each request starting with the last one."""
    messages = [{"role": "system", "content": SYSTEM}]
    for i in range(turns):
        messages += [{"role": "user", "content": f"Tell me fact number {i} about owls."},
                     {"role": "assistant", "content": f"Owls have fact {i}: they hunt at night."}]
    return ChatRequest(messages=(*messages, {"role": "user", "content": "And about cats?"}))


def test_the_conversation_stays_evaluated_across_a_memory_job(embedded_model):
    async def scenario():
        await collect(embedded_model, conversation(2))
        first = embedded_model.last_prompt
        # A memory job reads another prompt, in its own context.
        reply = await embedded_model.complete_json(
            [{"role": "user", "content": "I live in Leeds and work as a nurse. " * 20}], FACTS_SCHEMA)
        await collect(embedded_model, conversation(3))
        return first, reply, embedded_model.last_prompt

    first, reply, second = asyncio.run(scenario())
    assert valid_facts(reply)
    assert first.evaluated + first.reused > 80
    # The second request reads only what follows the first one's messages: the last question
    # (the first's was "And about cats?"), its reply and the new question.
    assert second.reused >= first.evaluated - 12
    assert second.evaluated < 60 and second.evaluated + second.reused > first.evaluated + 30


def test_a_memory_job_stops_between_steps_and_resumes_where_it_stopped(embedded_model):
    long = [{"role": "user", "content": "I live in Leeds and work as a nurse at the hospital. " * 60}]

    async def scenario():
        job = asyncio.create_task(embedded_model.complete(long))
        while not embedded_model.loaded.generating:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.2)
        job.cancel()  # a wake word: the turn needs the model
        with contextlib.suppress(asyncio.CancelledError):
            await job
        background = embedded_model.loaded.background()
        read = background.n_tokens
        stopped = embedded_model.loaded.last_finish
        await embedded_model.complete(long)
        return read, stopped, background.prompt_reused, background.prompt_evaluated

    read, stopped, reused, evaluated = asyncio.run(scenario())
    assert stopped == "stopped"
    assert 0 < read < 600  # stopped part-way through its prompt of about 700 tokens
    assert reused == read and evaluated > 0  # asked again, it goes on from there


def test_a_prefilled_prompt_leaves_only_the_question_to_read(embedded_model):
    question = conversation(2)
    ahead = ChatRequest(messages=(*question.messages[:-1], {"role": "user", "content": "[now]"}))

    async def scenario():
        await embedded_model.prefill(ahead)
        await collect(embedded_model, ChatRequest(messages=(
            *question.messages[:-1], {"role": "user", "content": "[now] And about cats?"})))
        return embedded_model.last_prompt

    read = asyncio.run(scenario())
    assert read.reused > 60 and read.evaluated < 15


# -- the orchestrator ------------------------------------------------------------------------


def test_the_orchestrator_runs_a_turn_and_stores_both_messages(tmp_path, embedded_model):
    class ListSink:
        def __init__(self):
            self.sentences = []

        async def say(self, sentence):
            self.sentences.append(sentence)

    store = ConversationStore(tmp_path, "k")
    sink = ListSink()
    builder = PromptBuilder(ConfigSystemPrompt(SYSTEM),
                            [LastNContextProvider(store)])
    orchestrator = Orchestrator(store=store, builder=builder, renderer=OllamaChatRenderer(),
                                llm=embedded_model, sink=sink, context_size=6)

    result = asyncio.run(orchestrator.on_prompt_ready(PromptReady("What is the capital of France?")))
    assert result.ok and result.user_stored and result.assistant_stored
    assert "paris" in result.reply.lower()
    assert sink.sentences and "paris" in " ".join(sink.sentences).lower()
    stored = store.read_tail(10)
    assert [(m.role, m.content) for m in stored] == [
        (ChatRole.USER, "What is the capital of France?"), (ChatRole.ASSISTANT, result.reply)]
    assert stored[1].metadata == {"model": "SmolLM2-135M-Instruct.Q4_1"}


# -- finding the file, and bad files ---------------------------------------------------------


def test_null_is_the_built_in_model():
    path = resolve_embedded_model(None)
    assert path == builtin_model_path() and path.name == BUILTIN_FILE


def test_a_name_is_looked_up_in_the_models_dirs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    models = tmp_path / "models"
    models.mkdir()
    (models / "smol.gguf").symlink_to(builtin_model_path())
    assert resolve_embedded_model("smol", [models]) == builtin_model_path().resolve()
    assert resolve_embedded_model("smol.gguf", [models]) == builtin_model_path().resolve()


def expect_config_error(value, *, models_dirs=(), says):
    with pytest.raises(ConfigError) as info:
        resolve_embedded_model(value, list(models_dirs))
    assert MODEL_KEY in info.value.message and says in info.value.message
    assert info.value.exit_status == 78
    return info.value


def test_a_missing_file_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error = expect_config_error("models/nope.gguf", models_dirs=[tmp_path / "models"],
                                says="no GGUF model 'models/nope.gguf'")
    assert "null for the built-in SmolLM2-135M-Instruct" in error.message


def test_a_file_that_is_not_gguf_is_a_config_error(tmp_path):
    onnx = tmp_path / "model.onnx.gguf"
    onnx.write_bytes(b"\x08\x07\x12\x04onnx" + bytes(2 << 20))
    expect_config_error(str(onnx), says="is not a GGUF model")
    (tmp_path / "empty.gguf").write_bytes(b"")
    expect_config_error(str(tmp_path / "empty.gguf"), says="is not a GGUF model")


@pytest.mark.parametrize("keep", [10, 4096, 30_000_000, -1000])
def test_a_truncated_file_is_a_config_error(tmp_path, keep):
    data = builtin_model_path().read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:keep])
    expect_config_error(str(cut), says="is truncated or damaged")


def test_a_file_llama_cpp_cannot_load_is_a_config_error(tmp_path):
    # A whole GGUF of an architecture llama.cpp does not know: it refuses it at load.
    data = bytearray(builtin_model_path().read_bytes())
    key = b"general.architecture"
    at = data.index(key) + len(key) + 4 + 8  # the key, the value's type, the string's length
    assert data[at:at + 5] == b"llama"
    data[at:at + 5] = b"xxxxx"
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(bytes(data))
    with pytest.raises(ConfigError) as info:
        load_model(resolve_embedded_model(str(broken)), threads=1, options={}, timeout_seconds=5)
    assert MODEL_KEY in info.value.message and "could not load" in info.value.message
    assert info.value.exit_status == 78


def test_a_model_bigger_than_free_memory_is_a_config_error():
    with pytest.raises(ConfigError) as info:
        load_model(builtin_model_path(), threads=1, options={}, timeout_seconds=5,
                   memory=lambda: 10 * 2**20)
    assert MODEL_KEY in info.value.message and "only 10 MiB is free" in info.value.message


def test_load_embedded_from_settings():
    settings = load_settings(env={"ELARA__LanguageModel__Provider": "embedded",
                                  "ELARA__LanguageModel__Options__num_ctx": "1024"})
    model = load_embedded(settings)
    try:
        assert model.threads == default_threads() == min(4, os.cpu_count() or 1)
        assert model.context_size == 1024 and model.host == "embedded"
        assert model.status()["load_seconds"] is not None
        # The built-in model samples cooler than the personality says for larger models.
        assert model.options["temperature"] == 0.2 and model.options["num_predict"] == 200
    finally:
        asyncio.run(model.aclose())
    assert model.status()["closed"] is True
    with pytest.raises(LanguageModelError, match="was closed"):
        asyncio.run(collect(model, FRANCE))


def test_ollama_options_become_llama_cpp_arguments():
    assert sampling_arguments({"temperature": 0.2, "num_predict": 64, "num_ctx": 4096, "top_k": 20,
                               "top_p": 0.9, "repeat_penalty": 1.1, "seed": 3, "stop": ("\n\n",),
                               "mirostat": 2, "num_gpu": 0}) == {
        "temperature": 0.2, "max_tokens": 64, "top_k": 20, "top_p": 0.9, "repeat_penalty": 1.1,
        "seed": 3, "stop": ["\n\n"], "mirostat_mode": 2}
    # Ollama's "no limit" (-1) and "fill the context" (-2) leave the length to the model.
    assert sampling_arguments({"num_predict": -1}) == {}
    assert sampling_arguments({"num_predict": -2}) == {}


def test_a_gguf_copy_in_models_resolves_and_the_copy_is_checked(tmp_path):
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(builtin_model_path(), copy)
    assert resolve_embedded_model(str(copy)) == copy.resolve()


def test_memory_asks_the_built_in_model_for_facts_only_on_request(tmp_path, embedded_model):
    from elara.conversation.messages import ChatMessage
    from elara.memory.manager import Memory
    from tests.test_prompting import T0

    assert embedded_model.learns_facts is False
    settings = load_settings(env={"ELARA__Memory__Summaries": "false"})
    memory = Memory(settings, ConversationStore(tmp_path / "store", "k"), embedded_model)

    def jobs(said):
        user = ChatMessage(ChatRole.USER, said, T0)
        reply = ChatMessage(ChatRole.ASSISTANT, "Noted.", T0)
        return [name for name, _, _ in memory._jobs_after_turn(user, reply)]

    assert jobs("What is a good name for a cat?") == []  # it would invent "the user likes cats"
    assert jobs("Remember that my sister is called Maria.") == ["explicit memory request"]
