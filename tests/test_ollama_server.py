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
from ollama_server import FakeOllamaServer, fragments

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
    script = Path(__file__).with_name("ollama_server.py")
    proc = subprocess.Popen([sys.executable, str(script), "--port", "0", "--model", "m1"],
                            stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready, "the server printed no URL"
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        assert [m.model for m in ollama.Client(host=url, timeout=5).list().models] == ["m1"]
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()
