"""The fake Ollama server speaks Ollama's tools protocol to the real ollama.AsyncClient."""

import asyncio
import json

import httpx
import ollama
import pytest

from tests.rig.ollama_server import (
    FakeOllamaServer,
    ToolCalls,
    last_user_text,
    pending_tool_results,
    qualified_model,
)

TOOLS_MODEL = "tool-model"
SET_TIMER = {
    "type": "function",
    "function": {
        "name": "set_timer",
        "description": "Start a timer",
        "parameters": {"type": "object", "required": ["seconds"],
                       "properties": {"seconds": {"type": "integer", "description": "How long"}}},
    },
}
ASK = [{"role": "user", "content": "give me a nudge in ten minutes"}]


def run(coro):
    """Run one coroutine with a bound, so a hung stream fails instead of stalling the suite."""
    return asyncio.run(asyncio.wait_for(coro, 10))


def timer_responder(endpoint: str, body: dict) -> str | ToolCalls:
    """Call set_timer for the person's request; answer from its result once it comes back."""
    results = pending_tool_results(body)
    if results:
        return f"Done: {results[-1]['tool_name']} said {results[-1]['content']}."
    return ToolCalls([("set_timer", {"seconds": 600})])


@pytest.fixture
def server():
    """A server with a tools model beside the default one, answering with timer_responder."""
    with FakeOllamaServer(models=["test-model", TOOLS_MODEL], responder=timer_responder) as fake:
        fake.model_capabilities = {TOOLS_MODEL: ["completion", "tools"]}
        yield fake


async def stream(url: str, **request) -> list[ollama.ChatResponse]:
    """Every chunk of a streamed chat, parsed by the client."""
    client = ollama.AsyncClient(host=url)
    return [chunk async for chunk in await client.chat(stream=True, **request)]


def test_show_lists_tools_only_for_the_model_that_has_it(server):
    async def capabilities(model: str) -> list[str] | None:
        return (await ollama.AsyncClient(host=server.url).show(model)).capabilities

    assert run(capabilities(TOOLS_MODEL)) == ["completion", "tools"]
    assert run(capabilities("test-model")) == ["completion"]


def test_a_streamed_tool_call_reaches_the_client_as_message_tool_calls(server):
    chunks = run(stream(server.url, model=TOOLS_MODEL, messages=ASK, tools=[SET_TIMER]))

    *parts, done = chunks
    calls = [call for chunk in parts for call in chunk.message.tool_calls or []]
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [
        ("set_timer", {"seconds": 600})]
    assert all(chunk.done is False for chunk in parts)
    assert done.done is True and done.done_reason == "stop"
    assert not done.message.tool_calls
    assert "".join(chunk.message.content or "" for chunk in chunks) == ""
    assert server.turns()[-1]["tools"][0]["function"]["name"] == "set_timer"


def test_the_tool_call_chunk_has_ollamas_shape_on_the_wire(server):
    body = {"model": TOOLS_MODEL, "messages": ASK, "tools": [SET_TIMER]}
    with httpx.stream("POST", server.url + "/api/chat", json=body, timeout=5) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line]

    call_lines = [line for line in lines if line["message"].get("tool_calls")]
    assert len(call_lines) == 1 and call_lines[0]["done"] is False
    message = call_lines[0]["message"]
    assert message["role"] == "assistant" and message["content"] == ""
    (call,) = message["tool_calls"]
    assert call["id"].startswith("call_") and len(call["id"]) == len("call_") + 8
    assert call["function"] == {"index": 0, "name": "set_timer", "arguments": {"seconds": 600}}
    assert lines[-1]["done"] is True and lines[-1]["done_reason"] == "stop"


def test_text_before_the_calls_streams_first_and_several_calls_share_a_chunk(server):
    server.responder = lambda endpoint, body: ToolCalls(
        [("set_timer", {"seconds": 60}), ("set_timer", {"seconds": 120})], text="One moment.")
    chunks = run(stream(server.url, model=TOOLS_MODEL, messages=ASK, tools=[SET_TIMER]))

    with_calls = [i for i, chunk in enumerate(chunks) if chunk.message.tool_calls]
    assert len(with_calls) == 1
    first = with_calls[0]
    assert "".join(c.message.content or "" for c in chunks[:first]) == "One moment."
    assert [dict(c.function.arguments) for c in chunks[first].message.tool_calls] == [
        {"seconds": 60}, {"seconds": 120}]


def test_the_tool_result_goes_back_in_the_next_request_with_the_tool_role(server):
    async def round_trip() -> str:
        client = ollama.AsyncClient(host=server.url)
        messages: list = list(ASK)
        called = await client.chat(model=TOOLS_MODEL, messages=messages, tools=[SET_TIMER])
        messages.append(called.message)
        for call in called.message.tool_calls or []:
            messages.append({"role": "tool", "tool_name": call.function.name,
                             "content": "timer set for 10 minutes"})
        chunks = [c async for c in await client.chat(model=TOOLS_MODEL, messages=messages,
                                                      tools=[SET_TIMER], stream=True)]
        return "".join(c.message.content or "" for c in chunks)

    assert run(round_trip()) == "Done: set_timer said timer set for 10 minutes."
    called, answered = server.bodies("/api/chat")
    assert called["stream"] is False and called["tools"] == [SET_TIMER]
    assert server.turns() == [answered]  # the unstreamed call is not a turn; the answer is
    assert answered["tools"] == [SET_TIMER]
    assistant, result = answered["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"][0]["function"] == {"name": "set_timer",
                                                      "arguments": {"seconds": 600}}
    assert result == {"role": "tool", "tool_name": "set_timer",
                      "content": "timer set for 10 minutes"}


def test_pending_results_are_only_those_after_the_last_user_message():
    body = {"messages": [
        {"role": "user", "content": "a"}, {"role": "tool", "content": "old", "tool_name": "t"},
        {"role": "assistant", "content": "ok"}, {"role": "user", "content": "b"},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "content": "new", "tool_name": "t"}]}
    assert [m["content"] for m in pending_tool_results(body)] == ["new"]
    assert pending_tool_results({"messages": [{"role": "user", "content": "b"}]}) == []
    assert last_user_text("chat", body) == "b"


def test_tools_to_a_model_without_the_capability_is_ollamas_400(server):
    with pytest.raises(ollama.ResponseError) as raised:
        run(stream(server.url, model="test-model", messages=ASK, tools=[SET_TIMER]))

    assert raised.value.status_code == 400
    assert raised.value.error == "registry.ollama.ai/library/test-model:latest does not support tools"


def test_the_same_model_without_tools_in_the_request_answers(server):
    server.responder = lambda endpoint, body: "Plain words."
    chunks = run(stream(server.url, model="test-model", messages=ASK))
    assert "".join(c.message.content or "" for c in chunks) == "Plain words."


def test_the_full_name_in_the_error_follows_ollamas_name_parsing():
    assert qualified_model("llama3.2") == "registry.ollama.ai/library/llama3.2:latest"
    assert qualified_model("qwen3:4b") == "registry.ollama.ai/library/qwen3:4b"
    assert qualified_model("me/mine:q4") == "registry.ollama.ai/me/mine:q4"
    assert qualified_model("example.com/me/mine") == "example.com/me/mine:latest"


def test_a_responder_calling_tools_nobody_offered_is_a_loud_500(server):
    with pytest.raises(ollama.ResponseError) as raised:
        run(stream(server.url, model=TOOLS_MODEL, messages=ASK))

    assert raised.value.status_code == 500
    assert "offered no tools" in raised.value.error


def test_a_thinking_tools_model_streams_its_reasoning_then_the_call(server):
    server.model_capabilities = {TOOLS_MODEL: ["completion", "tools", "thinking"]}
    server.responder = lambda endpoint, body: ToolCalls(
        [("set_timer", {"seconds": 600})], text="<think>Ten minutes is 600 s.</think>")
    chunks = run(stream(server.url, model=TOOLS_MODEL, messages=ASK, tools=[SET_TIMER]))

    assert "".join(c.message.thinking or "" for c in chunks) == "Ten minutes is 600 s."
    assert "".join(c.message.content or "" for c in chunks) == ""
    assert sum(len(c.message.tool_calls or []) for c in chunks) == 1
