"""The Ollama adapter, driven through the real ollama.AsyncClient against the fake Ollama server."""

import asyncio
import logging

import pytest

from elara.brain.ollama import ModelInfo, OllamaLanguageModel, make_client
from elara.conversation.render import ChatRequest, GenerateRequest
from elara.errors import LanguageModelError
from tests.rig.ollama_server import closed_port, default_responder

OPTIONS = {"temperature": 0.6, "num_ctx": 4096}
CHAT = ChatRequest(messages=(
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "what time is it"},
))
GENERATE = GenerateRequest(prompt="User: hello there\nAssistant:", system="Be brief.")


def run(coro):
    """Run a coroutine with an upper bound, so a bug cannot hang the suite."""
    return asyncio.run(asyncio.wait_for(coro, 10))


def language_model(url: str, *, model: str = "test-model", timeout: float = 5.0,
                   keep_alive="30m") -> OllamaLanguageModel:
    """The adapter as the wiring builds it, against `url`."""
    return OllamaLanguageModel(make_client(url, timeout), model=model, host=url,
                               keep_alive=keep_alive, options=OPTIONS, timeout_seconds=timeout)


async def collect(llm: OllamaLanguageModel, request) -> list[str]:
    """All fragments of one reply; closes the adapter after."""
    try:
        return [fragment async for fragment in llm.stream(request)]
    finally:
        await llm.aclose()


async def stream_failure(llm: OllamaLanguageModel, request) -> tuple[LanguageModelError, list]:
    """The error a stream ends with, and the fragments that came before it."""
    received: list[str] = []
    try:
        async for fragment in llm.stream(request):
            received.append(fragment)
    except LanguageModelError as exc:
        return exc, received
    finally:
        await llm.aclose()
    raise AssertionError(f"the stream succeeded: {received!r}")


async def call_failure(llm: OllamaLanguageModel, operation: str) -> LanguageModelError:
    """The error check() or warm_up() raises."""
    try:
        await getattr(llm, operation)()
    except LanguageModelError as exc:
        return exc
    finally:
        await llm.aclose()
    raise AssertionError(f"{operation}() succeeded")


async def failure(llm: OllamaLanguageModel, operation: str) -> LanguageModelError:
    """The error of one operation: a chat or generate stream, check() or warm_up()."""
    if operation in ("chat", "generate"):
        exc, _ = await stream_failure(llm, CHAT if operation == "chat" else GENERATE)
        return exc
    return await call_failure(llm, operation)


# --- success -----------------------------------------------------------------------------------


def test_chat_stream_assembles_the_reply_and_sends_the_whole_request(ollama_server):
    fragments = run(collect(language_model(ollama_server.url), CHAT))

    assert len(fragments) > 3
    assert "".join(fragments) == "You said: what time is it. That is all. Have a nice day!"
    [body] = ollama_server.bodies("/api/chat")
    assert body["model"] == "test-model"
    assert body["messages"] == [dict(m) for m in CHAT.messages]
    assert body["stream"] is True
    assert body["keep_alive"] == "30m"
    assert body["options"] == OPTIONS


def test_generate_stream_sends_prompt_and_system(ollama_server):
    fragments = run(collect(language_model(ollama_server.url), GENERATE))

    assert "".join(fragments) == "You said: hello there. That is all. Have a nice day!"
    [body] = ollama_server.bodies("/api/generate")
    assert body["prompt"] == GENERATE.prompt
    assert body["system"] == "Be brief."
    assert body["stream"] is True
    assert body["keep_alive"] == "30m"
    assert body["options"] == OPTIONS
    assert ollama_server.bodies("/api/chat") == []


def test_the_responder_decides_the_reply(ollama_server):
    seen = []

    def responder(endpoint, body):
        seen.append(endpoint)
        return "First sentence. Second one!"

    ollama_server.responder = responder
    assert "".join(run(collect(language_model(ollama_server.url), CHAT))) == responder("", {})
    assert seen[0] == "chat"


def test_numeric_keep_alive_is_passed_on(ollama_server):
    run(collect(language_model(ollama_server.url, keep_alive=300), CHAT))
    assert ollama_server.bodies("/api/chat")[0]["keep_alive"] == 300


def test_check_reports_what_ollama_knows_about_the_model(ollama_server, caplog):
    caplog.set_level(logging.INFO, logger="elara.brain.ollama")

    async def scenario():
        llm = language_model(ollama_server.url)
        try:
            return await llm.check()
        finally:
            await llm.aclose()

    info = run(scenario())
    assert info == ModelInfo(name="test-model", family="llama", parameter_size="3.2B",
                             quantization="Q4_K_M")
    assert ollama_server.bodies("/api/show") == [{"model": "test-model"}]
    assert any("test-model" in r.getMessage() and r.levelno == logging.INFO
               for r in caplog.records)


def test_checking_again_logs_at_info_only_what_changed(ollama_server, caplog):
    # The provider checks Ollama every half minute: the same answer is no news for the journal.
    caplog.set_level(logging.DEBUG, logger="elara.brain.ollama")

    async def scenario():
        llm = language_model(ollama_server.url)
        try:
            await llm.check()
            await llm.check()
            ollama_server.model_capabilities = {"test-model": ["completion", "tools"]}
            await llm.check()
        finally:
            await llm.aclose()

    run(scenario())
    levels = [r.levelno for r in caplog.records if "has test-model" in r.getMessage()]
    assert levels == [logging.INFO, logging.DEBUG, logging.INFO]


def test_check_accepts_the_explicit_latest_tag(ollama_server):
    async def scenario():
        llm = language_model(ollama_server.url, model="test-model:latest")
        try:
            return await llm.check()
        finally:
            await llm.aclose()

    assert run(scenario()).name == "test-model:latest"


def test_warm_up_loads_the_model_with_keep_alive_and_options(ollama_server):
    async def scenario():
        llm = language_model(ollama_server.url)
        try:
            await llm.warm_up()
        finally:
            await llm.aclose()

    run(scenario())
    [body] = ollama_server.bodies("/api/generate")
    assert body["model"] == "test-model"
    assert body["prompt"] == ""
    assert body["keep_alive"] == "30m"
    assert body["options"] == OPTIONS


def test_slow_but_steady_stream_succeeds(ollama_server):
    # Each fragment arrives well within the timeout, the whole reply takes longer than it.
    ollama_server.responder = lambda endpoint, body: "One two three four five six."
    ollama_server.fault = "slow"
    ollama_server.slow_delay = 0.15

    fragments = run(collect(language_model(ollama_server.url, timeout=0.5), CHAT))
    assert "".join(fragments) == "One two three four five six."


def test_stopping_early_closes_the_connection(ollama_server):
    # A barge-in stops reading; the adapter must close the response so Ollama stops generating.
    ollama_server.responder = lambda endpoint, body: " ".join(["word"] * 200)
    ollama_server.fault = "slow"
    ollama_server.slow_delay = 0.01

    async def scenario():
        llm = language_model(ollama_server.url)
        stream = llm.stream(CHAT)
        first = await stream.__anext__()
        await stream.aclose()
        for _ in range(500):  # bounded: at most 5 s
            if ollama_server.aborted_streams:
                break
            await asyncio.sleep(0.01)
        await llm.aclose()
        return first

    assert run(scenario()) == "word"
    assert ollama_server.aborted_streams == 1


def test_conversation_text_is_not_logged_above_debug(ollama_server, caplog):
    caplog.set_level(logging.DEBUG)
    secret = "my bank pin is 4321"
    request = ChatRequest(messages=({"role": "user", "content": secret},))

    async def scenario():
        llm = language_model(ollama_server.url)
        await llm.check()
        await llm.warm_up()
        return await collect(llm, request)

    run(scenario())
    assert any(secret in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG and (
        secret in r.getMessage() or "bank pin" in r.getMessage())]


# --- failures ----------------------------------------------------------------------------------

OPERATIONS = ["chat", "generate", "check", "warm_up"]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_unreachable(operation):
    url = f"http://127.0.0.1:{closed_port()}"
    exc = run(failure(language_model(url), operation))
    assert exc.code == "unreachable"
    assert url in exc.message
    assert "ollama serve" in exc.message and "LanguageModel.Host" in exc.message
    assert exc.apology == "I can't reach the language model right now."


@pytest.mark.parametrize("operation", OPERATIONS)
def test_model_not_pulled(ollama_server, operation):
    exc = run(failure(language_model(ollama_server.url, model="absent:7b"), operation))
    assert exc.code == "model_missing"
    assert "`ollama pull absent:7b`" in exc.message
    assert ollama_server.url in exc.message


def test_error_line_mid_stream_carries_ollamas_words(ollama_server):
    ollama_server.fault = "error_mid_stream"
    ollama_server.error_message = "CUDA error: out of memory"

    exc, received = run(stream_failure(language_model(ollama_server.url), CHAT))
    assert exc.code == "model_error"
    assert "CUDA error: out of memory" in exc.message
    assert received == ["You", " said:", " what"]  # the fragments before the error arrived


@pytest.mark.parametrize("operation", OPERATIONS)
def test_hanging_server_times_out(ollama_server, operation):
    ollama_server.fault = "hang"
    exc = run(failure(language_model(ollama_server.url, timeout=0.5), operation))
    assert exc.code == "timeout"
    assert "LanguageModel.TimeoutSeconds" in exc.message


def test_stream_that_stalls_midway_times_out(ollama_server):
    ollama_server.fault = "stall"
    exc, received = run(stream_failure(language_model(ollama_server.url, timeout=0.5), GENERATE))
    assert exc.code == "timeout"
    assert len(received) == ollama_server.fault_after


@pytest.mark.parametrize("request_", [CHAT, GENERATE], ids=["chat", "generate"])
@pytest.mark.parametrize("fault", ["drop", "truncated", "no_done"])
def test_connection_lost_mid_stream(ollama_server, fault, request_):
    ollama_server.fault = fault
    exc, received = run(stream_failure(language_model(ollama_server.url), request_))
    assert exc.code == "connection_lost"
    assert ollama_server.url in exc.message
    assert len(received) == ollama_server.fault_after


@pytest.mark.parametrize("operation", OPERATIONS)
def test_http_500(ollama_server, operation):
    ollama_server.fault = "http_500"
    exc = run(failure(language_model(ollama_server.url), operation))
    assert exc.code == "model_error"
    assert "HTTP 500" in exc.message
    assert ollama_server.error_message in exc.message


def test_each_failure_is_one_language_model_error_with_its_cause(ollama_server):
    ollama_server.fault = "drop"
    exc, _ = run(stream_failure(language_model(ollama_server.url), CHAT))
    assert type(exc) is LanguageModelError
    assert exc.__cause__ is not None and not isinstance(exc.__cause__, LanguageModelError)


def test_default_responder_is_what_the_tests_expect():
    body = {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}
    assert default_responder("chat", body) == "You said: b. That is all. Have a nice day!"


# --- thinking models ---------------------------------------------------------------------------

THOUGHTFUL = "<think>The user wants the time.\nI have no clock.</think>\n\nI can't tell the time."
THINKING = ["completion", "thinking"]


async def collect_open(llm: OllamaLanguageModel, request) -> str:
    """One whole reply; the adapter stays open."""
    return "".join([fragment async for fragment in llm.stream(request)])


async def checked_then(llm: OllamaLanguageModel, *requests) -> tuple[ModelInfo, list[str]]:
    """check(), then each request streamed in turn: (info, each reply joined)."""
    try:
        info = await llm.check()
        replies = [await collect_open(llm, request) for request in requests]
        return info, replies
    finally:
        await llm.aclose()


def test_a_thinking_model_is_asked_not_to_think(ollama_server, caplog):
    caplog.set_level(logging.INFO, logger="elara.brain.ollama")
    ollama_server.model_capabilities = {"test-model": THINKING}
    ollama_server.responder = lambda endpoint, body: THOUGHTFUL

    info, replies = run(checked_then(language_model(ollama_server.url), CHAT, GENERATE))
    assert info.thinking
    assert replies == ["I can't tell the time."] * 2
    assert ollama_server.bodies("/api/chat")[-1]["think"] is False
    assert ollama_server.bodies("/api/generate")[-1]["think"] is False
    assert any("thinking model" in r.getMessage() for r in caplog.records
               if r.levelno == logging.INFO)


def test_think_is_never_sent_to_a_model_without_the_capability(ollama_server):
    async def scenario():
        llm = language_model(ollama_server.url)
        try:
            info = await llm.check()
            await collect_open(llm, CHAT)
            await collect_open(llm, GENERATE)
            await llm.complete(CHAT.messages)
            return info
        finally:
            await llm.aclose()

    assert not run(scenario()).thinking
    bodies = ollama_server.bodies("/api/chat") + ollama_server.bodies("/api/generate")
    assert len(bodies) == 3 and all("think" not in body for body in bodies)


def test_reasoning_ollama_parsed_out_is_never_part_of_the_reply(ollama_server, caplog):
    # Without check() nothing is known, so `think` is not sent and Ollama lets the model think:
    # its reasoning arrives in `message.thinking`, logged at DEBUG only, never yielded.
    caplog.set_level(logging.DEBUG, logger="elara.brain.ollama")
    ollama_server.model_capabilities = {"test-model": THINKING}
    ollama_server.responder = lambda endpoint, body: THOUGHTFUL

    for request in (CHAT, GENERATE):
        assert "".join(run(collect(language_model(ollama_server.url), request))) == (
            "I can't tell the time.")
    assert all("think" not in body for _, body in ollama_server.requests)
    thoughts = [r for r in caplog.records if "I have no clock" in r.getMessage()]
    assert thoughts and all(r.levelno == logging.DEBUG for r in thoughts)


def test_complete_returns_the_reply_without_its_thinking(ollama_server):
    ollama_server.responder = lambda endpoint, body: (
        '<think>A summary, as JSON.</think>\n{"summary": "time"}' if body.get("format")
        else THOUGHTFUL)

    async def scenario(llm):
        try:
            return (await llm.complete(CHAT.messages),
                    await llm.complete_json(CHAT.messages, {"type": "object"}))
        finally:
            await llm.aclose()

    # A model without the capability: Ollama passes its tags through, the adapter drops them.
    assert run(scenario(language_model(ollama_server.url))) == (
        "I can't tell the time.", {"summary": "time"})

    ollama_server.model_capabilities = {"test-model": THINKING}

    async def thinking_model():
        llm = language_model(ollama_server.url)
        await llm.check()
        return await scenario(llm)

    assert run(thinking_model()) == ("I can't tell the time.", {"summary": "time"})
    assert [b.get("think") for b in ollama_server.bodies("/api/chat")] == [None, None, False, False]
