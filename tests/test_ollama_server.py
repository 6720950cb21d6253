"""The fake Ollama server speaks Ollama's wire protocol (checked with httpx and the sync client)."""

import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import ollama
import pytest

from tests.rig.ollama_server import FakeOllamaServer, fragments, pieces_of, split_thinking

COUNTERS = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration",
            "eval_count", "eval_duration")
USER = [{"role": "user", "content": "hello"}]


def stream_lines(url: str, path: str, body: dict) -> tuple[httpx.Response, list[dict]]:
    """POST `body` and parse each line of the streamed answer."""
    with httpx.stream("POST", url + path, json=body, timeout=5) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line]
    return response, lines


def test_chat_stream_is_chunked_ndjson_with_ollamas_fields(ollama_server):
    response, lines = stream_lines(ollama_server.url, "/api/chat",
                                   {"model": "test-model", "messages": USER})

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.headers["transfer-encoding"] == "chunked"
    *parts, last = lines
    assert len(parts) > 3
    for part in parts:
        assert part["model"] == "test-model"
        assert part["created_at"].endswith("Z")
        assert part["message"]["role"] == "assistant"
        assert part["done"] is False
    reply = "".join(p["message"]["content"] for p in parts)
    assert reply == "You said: hello. That is all. Have a nice day!"
    assert last["done"] is True and last["done_reason"] == "stop"
    assert last["message"] == {"role": "assistant", "content": ""}
    assert all(isinstance(last[c], int) for c in COUNTERS)
    assert last["eval_count"] == len(parts)


def test_generate_stream_uses_response(ollama_server):
    body = {"model": "test-model", "prompt": "User: hi\nAssistant:", "system": "s"}
    _, lines = stream_lines(ollama_server.url, "/api/generate", body)
    *parts, last = lines
    assert all("message" not in p and p["done"] is False for p in parts)
    assert "".join(p["response"] for p in parts) == "You said: hi. That is all. Have a nice day!"
    assert last["done"] is True and last["done_reason"] == "stop"
    assert all(isinstance(last[c], int) for c in COUNTERS)


def test_sync_client_streams_and_gets_whole_replies(ollama_server):
    client = ollama.Client(host=ollama_server.url, timeout=5)
    streamed = "".join(p.message.content for p in client.chat("test-model", USER, stream=True))
    whole = client.chat("test-model", USER, stream=False)
    generated = client.generate("test-model", "User: hello", stream=False)

    assert streamed == whole.message.content == generated.response
    assert whole.done and whole.done_reason == "stop" and whole.eval_count
    assert [p for p, _ in ollama_server.requests] == ["/api/chat"] * 2 + ["/api/generate"]
    assert ollama_server.bodies("/api/chat")[1]["stream"] is False


def test_empty_prompt_only_loads_the_model(ollama_server):
    client = ollama.Client(host=ollama_server.url, timeout=5)
    loaded = client.generate("test-model", "", keep_alive="10m")
    unloaded = client.generate("test-model", "", keep_alive=0)
    chat_loaded = client.chat("test-model", [], stream=True)

    assert loaded.done and loaded.done_reason == "load" and loaded.response == ""
    assert unloaded.done_reason == "unload"
    assert [p.done_reason for p in chat_loaded] == ["load"]


@pytest.mark.parametrize("call, wording", [
    (lambda c: c.chat("nope", USER), 'model "nope" not found, try pulling it first'),
    (lambda c: list(c.chat("nope", USER, stream=True)),
     'model "nope" not found, try pulling it first'),
    (lambda c: c.generate("nope", "hi"), "model 'nope' not found"),
    (lambda c: c.show("nope"), "model 'nope' not found"),
], ids=["chat", "chat-stream", "generate", "show"])
def test_unknown_model_is_a_404_in_ollamas_words(ollama_server, call, wording):
    with pytest.raises(ollama.ResponseError) as info:
        call(ollama.Client(host=ollama_server.url, timeout=5))
    assert info.value.status_code == 404
    assert info.value.error == wording


def test_models_accept_the_latest_tag_both_ways(ollama_server):
    ollama_server.models = {"llama3.2:latest", "qwen2.5:0.5b"}
    client = ollama.Client(host=ollama_server.url, timeout=5)
    assert client.show("llama3.2").details.family == "llama"
    assert client.show("qwen2.5:0.5b").modelinfo
    with pytest.raises(ollama.ResponseError):
        client.show("qwen2.5")


def test_tags_version_and_root(ollama_server):
    ollama_server.models = {"b-model", "a-model:7b"}
    client = ollama.Client(host=ollama_server.url, timeout=5)
    assert [m.model for m in client.list().models] == ["a-model:7b", "b-model"]
    assert httpx.get(ollama_server.url + "/api/version").json()["version"]
    root = httpx.get(ollama_server.url + "/")
    assert root.status_code == 200 and root.text == "Ollama is running"
    assert httpx.get(ollama_server.url + "/nowhere").status_code == 404
    assert ("/api/tags", {}) in ollama_server.requests


def test_error_mid_stream_is_an_error_line_in_a_200_stream(ollama_server):
    ollama_server.fault = "error_mid_stream"
    response, lines = stream_lines(ollama_server.url, "/api/chat",
                                   {"model": "test-model", "messages": USER})
    assert response.status_code == 200
    assert len(lines) == ollama_server.fault_after + 1
    assert lines[-1] == {"error": ollama_server.error_message}


def test_drop_cuts_the_chunked_body(ollama_server):
    ollama_server.fault = "drop"
    with pytest.raises(httpx.RemoteProtocolError):
        stream_lines(ollama_server.url, "/api/chat", {"model": "test-model", "messages": USER})


def test_http_500(ollama_server):
    ollama_server.fault = "http_500"
    response = httpx.post(ollama_server.url + "/api/chat",
                          json={"model": "test-model", "messages": USER})
    assert response.status_code == 500
    assert response.json() == {"error": ollama_server.error_message}


def test_hang_sends_nothing_and_stop_does_not_wait_for_it():
    server = FakeOllamaServer().start()
    server.fault = "hang"
    outcome = []

    def client():
        try:
            httpx.post(server.url + "/api/chat", json={"model": "test-model", "messages": USER},
                       timeout=httpx.Timeout(5, read=None))
            outcome.append("answered")
        except httpx.HTTPError as exc:
            outcome.append(type(exc).__name__)

    thread = threading.Thread(target=client)
    thread.start()
    try:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(server.url + "/api/generate", json={"model": "test-model", "prompt": "x"},
                       timeout=0.3)
    finally:
        server.stop()  # a handler is still hanging in the other thread
    thread.join(5)
    assert not thread.is_alive()
    assert outcome and outcome[0] != "answered"


def test_stop_ends_idle_keep_alive_connections():
    with FakeOllamaServer() as server:
        client = httpx.Client(base_url=server.url, timeout=5)
        assert client.get("/").status_code == 200  # the connection stays open in the pool
    with pytest.raises(httpx.TransportError):
        client.get("/")
    client.close()


def test_fragments_are_words_that_join_back():
    text = "  Hello there,  world!\n"
    assert fragments(text) == ["  Hello", " there,", "  world!", "\n"]
    assert "".join(fragments(text)) == text


def test_runs_standalone_until_sigterm():
    proc = subprocess.Popen([sys.executable, "-m", "tests.rig.ollama_server", "--port", "0", "--model", "m1",
                             "--tools-model", "t1", "--thinking-model", "t1"],
                            cwd=Path(__file__).parents[1], stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready, "the server printed no URL"
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        client = ollama.Client(host=url, timeout=5)
        assert [m.model for m in client.list().models] == ["m1", "t1"]
        assert client.show("t1").capabilities == ["completion", "thinking", "tools"]
        assert client.show("m1").capabilities == ["completion"]
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()


# --- thinking models (see the module docstring) -------------------------------------------------

THOUGHTFUL = "<think>The user greets me.\nI should greet back.</think>\n\nHello to you too."


def test_show_lists_each_models_capabilities(ollama_server):
    ollama_server.models = {"llama3.2", "qwen3:0.6b"}
    ollama_server.model_capabilities = {"qwen3:0.6b": ["completion", "tools", "thinking"]}
    client = ollama.Client(host=ollama_server.url, timeout=5)
    assert client.show("llama3.2").capabilities == ["completion"]
    assert client.show("qwen3:0.6b").capabilities == ["completion", "tools", "thinking"]
    assert ollama_server.thinks("qwen3:0.6b") and not ollama_server.thinks("llama3.2:latest")


@pytest.mark.parametrize("call", [
    lambda c: c.chat("test-model", USER, think=True),
    lambda c: list(c.chat("test-model", USER, stream=True, think=True)),
    lambda c: c.generate("test-model", "hi", think=True),
], ids=["chat", "chat-stream", "generate"])
def test_asking_a_model_without_the_capability_to_think_is_a_400_in_ollamas_words(
        ollama_server, call):
    with pytest.raises(ollama.ResponseError) as info:
        call(ollama.Client(host=ollama_server.url, timeout=5))
    assert info.value.status_code == 400
    assert info.value.error == '"test-model" does not support thinking'
    assert ollama_server.requests[-1][1]["think"] is True  # recorded all the same


def test_think_false_to_a_model_without_the_capability_is_accepted_and_recorded(ollama_server):
    ollama_server.responder = lambda endpoint, body: THOUGHTFUL
    client = ollama.Client(host=ollama_server.url, timeout=5)
    reply = client.chat("test-model", USER, think=False)
    # Nothing parses this model's tags: they reach the client in the text, as from real Ollama.
    assert reply.message.content == THOUGHTFUL and reply.message.thinking is None
    assert ollama_server.bodies("/api/chat")[-1]["think"] is False
    client.chat("test-model", USER)
    assert "think" not in ollama_server.bodies("/api/chat")[-1]


def test_a_thinking_model_streams_its_reasoning_apart_unless_told_not_to_think(ollama_server):
    ollama_server.model_capabilities = {"test-model": ["completion", "thinking"]}
    ollama_server.responder = lambda endpoint, body: THOUGHTFUL
    client = ollama.Client(host=ollama_server.url, timeout=5)

    for think in (None, True):  # Ollama lets a thinking model think when `think` is absent
        parts = list(client.chat("test-model", USER, stream=True, think=think))
        assert "".join(p.message.thinking or "" for p in parts) == (
            "The user greets me.\nI should greet back.")
        assert "".join(p.message.content or "" for p in parts) == "Hello to you too."
        first_answer = next(i for i, p in enumerate(parts) if p.message.content)
        assert all(not p.message.thinking for p in parts[first_answer:])

    parts = list(client.chat("test-model", USER, stream=True, think=False))
    assert all(not p.message.thinking for p in parts)
    assert "".join(p.message.content or "" for p in parts) == "Hello to you too."
    assert [b.get("think") for b in ollama_server.bodies("/api/chat")] == [None, True, False]

    generated = list(client.generate("test-model", "User: hi", stream=True))
    assert "".join(p.thinking or "" for p in generated).startswith("The user greets me.")
    assert "".join(p.response or "" for p in generated) == "Hello to you too."
    whole = client.chat("test-model", USER, think=True)
    assert whole.message.thinking and whole.message.content == "Hello to you too."
    assert client.generate("test-model", "User: hi", think=False).thinking is None


def test_chunk_chars_splits_think_tags_across_chunks(ollama_server):
    ollama_server.responder = lambda endpoint, body: THOUGHTFUL
    ollama_server.chunk_chars = 3
    _, lines = stream_lines(ollama_server.url, "/api/chat", {"model": "test-model", "messages": USER})
    contents = [line["message"]["content"] for line in lines[:-1]]
    assert contents[:3] == ["<th", "ink", ">Th"]
    assert "".join(contents) == THOUGHTFUL
    assert lines[-1]["eval_count"] == len(contents)


def test_split_thinking_and_pieces():
    assert split_thinking(THOUGHTFUL) == ("The user greets me.\nI should greet back.",
                                          "Hello to you too.")
    assert split_thinking("<think>cut off mid-thought") == ("cut off mid-thought", "")
    assert split_thinking("No reasoning. <think>not at the start</think>") == (
        "", "No reasoning. <think>not at the start</think>")
    assert pieces_of("abcdefg", 3) == ["abc", "def", "g"]
    assert pieces_of("two words", None) == ["two", " words"]
