"""A fake Ollama server that speaks Ollama's real HTTP wire protocol, for tests.

In-process: `with FakeOllamaServer() as server: ... server.url ...`, or the `ollama_server`
fixture. Standalone (for subprocess tests): `python -m tests.rig.ollama_server --port 0` prints the
URL on one line and serves until SIGTERM or SIGINT.

Thinking models, as Ollama (server/routes.go) treats them. A model's capabilities in /api/show
come from `model_capabilities` (default ["completion"]; add "thinking" for a thinking model). The
responder's reply may start with the model's reasoning in <think>…</think> (unclosed: reasoning to
the end). For a model with "thinking":
  - `think` true, or absent (Ollama then defaults it to true): the reasoning is parsed out and
    streamed in `message.thinking` (chat) / `thinking` (generate), the answer in `content`;
  - `think` false: the model does not reason; only the answer is sent (the reasoning is omitted).
For a model without "thinking": a true `think` is refused with HTTP 400 `"<model>" does not support
thinking` (Ollama's words); false or absent is accepted and the reply goes out verbatim in
`content`, <think> tags and all, as from a model whose template Ollama cannot parse. `chunk_chars`
streams replies in pieces of that many characters instead of words, so tags split across chunks
("<th" + "ink>").

Tools, as Ollama (server/routes.go, server/images.go) treats them. A model calls tools when its
capabilities include "tools". A chat request with a non-empty `tools` list to a model without it is
refused with HTTP 400 `<full name> does not support tools` (the name in full, e.g.
`registry.ollama.ai/library/test-model:latest`), after the thinking check. The responder scripts a
call by returning `ToolCalls([("set_timer", {"seconds": 600})])`: any `text` in it streams first
(reasoning and all, as above), then one chunk whose `message` has `content` "" and `tool_calls`
`[{"id": "call_…", "function": {"index": 0, "name": …, "arguments": {…}}}]`, then the done chunk
(`done_reason` "stop", as Ollama's native API says after a call); unstreamed, the calls are in the
one reply's `message.tool_calls`. The next request brings them back as the assistant message's
`tool_calls` and the results as `{"role": "tool", "content": …, "tool_name": …}` messages, which
the responder sees in the body (`pending_tool_results`). A responder that calls tools the request
did not offer is a mistake in the test: HTTP 500 naming it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import signal
import socket
import string
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ToolCalls:
    """A reply in which the model calls tools: (name, arguments) pairs, after optional `text`."""

    calls: Sequence[tuple[str, Mapping[str, Any]]]
    text: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "calls", tuple((name, dict(arguments))
                                                for name, arguments in self.calls))


#: callable(endpoint, body) -> reply text or ToolCalls; endpoint is "chat" or "generate".
Responder = Callable[[str, dict], str | ToolCalls]

#: Values `FakeOllamaServer.fault` accepts.
FAULTS = ("none", "error_mid_stream", "hang", "slow", "drop", "stall", "http_500",
          "no_done", "truncated")

DEFAULT_MODEL = "test-model"
DEFAULT_ERROR = "llama runner process has terminated: signal: killed"
OLLAMA_VERSION = "0.6.5"


def last_user_text(endpoint: str, body: dict) -> str:
    """The user's last words: the last user message (chat) or last `User:` line (generate),
    without the time Elara puts before them ("[Saturday 28 November 2026, 07:55 UTC] …")."""
    if endpoint == "chat":
        users = [m.get("content") or "" for m in body.get("messages") or []
                 if m.get("role") == "user"]
        return _unstamped(users[-1].strip().splitlines()[-1]) if users and users[-1].strip() else ""
    prompt = body.get("prompt") or ""
    stamped = re.findall(r"^(?:User:[ \t]*)?(\[[^\]\n]*\].*)$", prompt, flags=re.MULTILINE)
    if stamped:
        return _unstamped(stamped[-1])
    lines = re.findall(r"^User:[ \t]*(.*)$", prompt, flags=re.MULTILINE)
    return lines[-1].strip() if lines else prompt.strip()


def pending_tool_results(body: dict) -> list[dict]:
    """The `tool` role messages after the last user message: the results the model answers now."""
    pending: list[dict] = []
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            pending = []
        elif message.get("role") == "tool":
            pending.append(message)
    return pending


def _unstamped(line: str) -> str:
    return re.sub(r"^\[[^\]]*\]\s*", "", line.strip())


def default_responder(endpoint: str, body: dict) -> str:
    """A deterministic reply of three sentences that echoes the user's last words (and, when a
    JSON `format` is asked for, an empty JSON object)."""
    if body.get("format") is not None:
        return json.dumps(minimal_json(body["format"]))
    return f"You said: {last_user_text(endpoint, body)}. That is all. Have a nice day!"


def minimal_json(schema: Any) -> Any:
    """The smallest value a JSON schema accepts: its required properties, empty (what a model
    constrained by `format` says when it has nothing to add). `"json"` asks for any object."""
    if not isinstance(schema, dict):
        return {}
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {name: minimal_json(properties.get(name, {})) for name in schema.get("required", [])}
    return {"array": [], "string": "", "integer": 0, "number": 0, "boolean": False}.get(kind)


def fragments(text: str) -> list[str]:
    """Word-sized pieces, each with its leading whitespace, that join back to `text`."""
    return re.findall(r"\s*\S+|\s+", text)


def pieces_of(text: str, chunk_chars: int | None) -> list[str]:
    """`text` cut into `chunk_chars`-character pieces, or into words when that is None."""
    if chunk_chars is None:
        return fragments(text)
    return [text[i:i + chunk_chars] for i in range(0, len(text), chunk_chars)]


_THINK = re.compile(r"\s*<think(?:ing)?>(.*?)(?:</think(?:ing)?>\s*|\Z)", re.DOTALL | re.IGNORECASE)


def split_thinking(text: str) -> tuple[str, str]:
    """(reasoning, answer) of a reply that starts with <think>…</think>, as Ollama's parser for a
    thinking model separates them; an unclosed block is reasoning to the end; ("", text) if none."""
    match = _THINK.match(text)
    if match is None:
        return "", text
    return match.group(1).strip(), text[match.end():]


def canonical_model(name: str) -> str:
    """`name` with Ollama's implicit `:latest` tag made explicit."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def qualified_model(name: str) -> str:
    """`name` in full as Ollama's errors spell it (model.ParseName(name).String()): host,
    namespace and tag filled in, e.g. `registry.ollama.ai/library/test-model:latest`."""
    path, tag = (name.rsplit(":", 1) if ":" in name.rsplit("/", 1)[-1] else (name, "latest"))
    parts = path.split("/")
    parts = ["registry.ollama.ai", "library"][: max(0, 3 - len(parts))] + parts
    return f"{'/'.join(parts)}:{tag}"


def wire_tool_calls(calls: ToolCalls) -> list[dict]:
    """`calls` as Ollama streams them in `message.tool_calls`: a `call_` id (8 random lowercase
    letters and digits, as routes.go's toolCallId) and the call's index in the reply."""
    alphabet = string.ascii_lowercase + string.digits
    return [{"id": "call_" + "".join(random.choices(alphabet, k=8)),
             "function": {"index": index, "name": name, "arguments": dict(arguments)}}
            for index, (name, arguments) in enumerate(calls.calls)]


class ToolsNotOffered(ValueError):
    """The responder called tools in reply to a request that offered none."""


EMBED_DIMENSIONS = 64


def embed_text(text: str) -> list[float]:
    """A deterministic stand-in for an embedding model: hashed bag of words, L2-normalised, so
    texts sharing words are close and unrelated texts are not."""
    vector = [0.0] * EMBED_DIMENSIONS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
        vector[digest % EMBED_DIMENSIONS] += 1.0
    norm = sum(v * v for v in vector) ** 0.5 or 1.0
    return [v / norm for v in vector]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then given back): an Ollama that is down."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _now() -> str:
    """A timestamp shaped like Ollama's `created_at` (RFC 3339, UTC, fractional seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _say(line: dict[str, Any], endpoint: str, text: str, thinking: str | None) -> None:
    """Put the reply's `text` (and its `thinking`) where `endpoint`'s lines carry them."""
    where = line["message"] if endpoint == "chat" else line
    where["content" if endpoint == "chat" else "response"] = text
    if thinking:
        where["thinking"] = thinking

class FakeOllamaServer:
    """An HTTP/1.1 Ollama look-alike on 127.0.0.1 in a background thread, with injectable faults.

    Public controls, safe to change while it runs:
    `models` installed names (with or without `:latest`), `responder`, `fault` (one of FAULTS),
    `fault_after` (fragments sent before a mid-stream fault), `slow_delay` (seconds
    before each fragment when slow), `hang_seconds` (upper bound of a hang), `error_message`,
    `model_details` (for /api/show and /api/tags), `model_capabilities` (name -> /api/show
    capabilities; unlisted models have ["completion"]; add "tools" for a model that calls tools),
    `chunk_chars` (None: stream words).
    Observations: `requests` (path, JSON body, including any `think` and `tools`) and `aborted_streams`
    (streams whose client went away before the end).

    Faults: none; error_mid_stream (fragments, then an `{"error": ...}` line); hang (nothing at
    all, not even headers); stall (fragments, then nothing); slow (`slow_delay` before each
    fragment); drop (fragments, then the socket closes inside the chunked body); http_500;
    no_done (fragments, then a clean end without the `done: true` line); truncated (fragments,
    then half a JSON line and a clean end). Unanswered streams fault like Ollama: one JSON object.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0,
                 models: Iterable[str] | None = None, responder: Responder | None = None) -> None:
        self.host = host
        self.port = port
        self.models: set[str] = set(models) if models is not None else {DEFAULT_MODEL}
        self.responder: Responder = responder or default_responder
        self.fault = "none"
        self.fault_after = 3
        self.slow_delay = 0.05
        self.hang_seconds = 30.0
        self.error_message = DEFAULT_ERROR
        self.model_details: dict[str, Any] = {
            "parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
            "parameter_size": "3.2B", "quantization_level": "Q4_K_M",
        }
        self.model_capabilities: dict[str, list[str]] = {}
        self.chunk_chars: int | None = None
        self.requests: list[tuple[str, dict]] = []
        self.aborted_streams = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()

    # --- life cycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL, http://127.0.0.1:PORT (the server must be started)."""
        if self._httpd is None:
            raise RuntimeError("FakeOllamaServer is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeOllamaServer:
        """Bind (port 0 picks a free port) and serve in a background thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = ThreadingHTTPServer((self.host, self.port), _Handler)
        httpd.daemon_threads = True
        httpd.owner = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-ollama", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving; ends hanging handlers and open connections; every wait is bounded."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # wakes hanging and slow handlers
        httpd.shutdown()  # returns within one poll interval: requests run in their own threads
        with self._lock:
            connections, handlers = list(self._connections), list(self._handlers)
        for conn in connections:  # idle keep-alive connections would otherwise linger
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout)
        for thread in handlers:
            thread.join(timeout)

    def __enter__(self) -> FakeOllamaServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- helpers for tests --------------------------------------------------------------------

    def bodies(self, path: str) -> list[dict]:
        """The JSON bodies received on `path`, oldest first."""
        with self._lock:
            return [body for p, body in self.requests if p == path]

    def turns(self) -> list[dict]:
        """The streamed /api/chat bodies: the conversation's turns, not background memory work."""
        return [body for body in self.bodies("/api/chat") if body.get("stream", True) is not False]

    def has_model(self, name: str) -> bool:
        """True when `name` is installed (the `:latest` tag is implied, as in Ollama)."""
        return canonical_model(name) in {canonical_model(m) for m in set(self.models)}

    def capabilities(self, name: str) -> list[str]:
        """What /api/show lists for `name` (`:latest` implied)."""
        wanted = canonical_model(name)
        for model, capabilities in dict(self.model_capabilities).items():
            if canonical_model(model) == wanted:
                return list(capabilities)
        return ["completion"]

    def thinks(self, name: str) -> bool:
        """True when `name` is a thinking model."""
        return "thinking" in self.capabilities(name)

    def calls_tools(self, name: str) -> bool:
        """True when `name` has the tools capability."""
        return "tools" in self.capabilities(name)

    def _record(self, path: str, body: dict) -> None:
        with self._lock:
            self.requests.append((path, body))

    def _track(self, conn: socket.socket, thread: threading.Thread, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
                self._handlers.add(thread)
            else:
                self._connections.discard(conn)
                self._handlers.discard(thread)

    def _note_aborted(self) -> None:
        with self._lock:
            self.aborted_streams += 1

    def _wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when the server is stopping."""
        return self._stopping.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    """One connection; routes Ollama's endpoints."""

    protocol_version = "HTTP/1.1"
    server_version = "FakeOllama"
    timeout = 60  # an idle keep-alive connection ends on its own, whatever the client does

    @property
    def owner(self) -> FakeOllamaServer:
        """The FakeOllamaServer this handler serves."""
        return self.server.owner  # type: ignore[attr-defined]

    def setup(self) -> None:
        """Register the connection so stop() can end it."""
        super().setup()
        self.owner._track(self.connection, threading.current_thread(), True)

    def finish(self) -> None:
        """Unregister the connection; a socket the client already closed is fine."""
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.owner._track(self.connection, threading.current_thread(), False)

    def log_message(self, format: str, *args: Any) -> None:
        """Say nothing: keeps test output clean."""

    # --- routing ------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        if self._path() == "/":
            self._send_text(200, "Ollama is running", head=True)
        else:
            self._send_text(404, "404 page not found", head=True)

    def do_GET(self) -> None:
        path = self._path()
        self.owner._record(path, {})
        if path == "/":
            self._send_text(200, "Ollama is running")
        elif path == "/api/tags":
            self._send_json(200, {"models": [self._tag(m) for m in sorted(self.owner.models)]})
        elif path == "/api/version":
            self._send_json(200, {"version": OLLAMA_VERSION})
        else:
            self._send_text(404, "404 page not found")

    def do_POST(self) -> None:
        path = self._path()
        try:
            body = self._read_json()
        except ValueError as exc:
            self._send_json(400, {"error": str(exc)})
            return
        self.owner._record(path, body)
        try:
            if path == "/api/chat":
                self._complete("chat", body)
            elif path == "/api/generate":
                self._complete("generate", body)
            elif path == "/api/show":
                self._show(body)
            elif path == "/api/embed":
                self._embed(body)
            else:
                self._send_text(404, "404 page not found")
        except ToolsNotOffered as exc:  # raised before anything is sent
            self._send_json(500, {"error": f"fake server: {exc}"})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away; nothing left to say

    # --- endpoints ----------------------------------------------------------------------------

    def _show(self, body: dict) -> None:
        owner = self.owner
        name = body.get("model") or body.get("name") or ""
        if not name:
            self._send_json(400, {"error": "model is required"})
            return
        if not owner.has_model(name):
            self._send_json(404, {"error": f"model '{name}' not found"})
            return
        if owner.fault == "hang":
            self._hang()
            return
        if owner.fault == "http_500":
            self._send_json(500, {"error": owner.error_message})
            return
        details = dict(owner.model_details)
        family = details.get("family") or "llama"
        self._send_json(200, {
            "license": "test licence",
            "modelfile": f"# Modelfile generated by \"ollama show\"\nFROM {name}\n",
            "parameters": "stop \"<|eot_id|>\"",
            "template": "{{ .Prompt }}",
            "details": details,
            "model_info": {"general.architecture": family, f"{family}.context_length": 131072},
            "capabilities": owner.capabilities(name),
            "modified_at": "2025-01-01T00:00:00.000000Z",
        })

    def _embed(self, body: dict) -> None:
        owner = self.owner
        name = body.get("model") or ""
        if not owner.has_model(name):
            self._send_json(404, {"error": f"model {json.dumps(name)} not found, try pulling it first"})
            return
        if owner.fault == "http_500":
            self._send_json(500, {"error": owner.error_message})
            return
        texts = body.get("input", "")
        texts = [texts] if isinstance(texts, str) else list(texts)
        self._send_json(200, {"model": name, "embeddings": [embed_text(t) for t in texts],
                              "total_duration": 1_000_000, "load_duration": 100_000,
                              "prompt_eval_count": sum(len(t.split()) for t in texts)})

    def _complete(self, endpoint: str, body: dict) -> None:
        owner = self.owner
        name = body.get("model") or ""
        if not name:
            self._send_json(400, {"error": "model is required"})
            return
        if not owner.has_model(name):
            # Ollama's own words differ by endpoint (server/routes.go).
            if endpoint == "chat":
                error = f"model {json.dumps(name)} not found, try pulling it first"
            else:
                error = f"model '{name}' not found"
            self._send_json(404, {"error": error})
            return
        think = body.get("think")
        if think not in (None, False, "") and not owner.thinks(name):
            # Ollama checks this before loading the model, for every request (routes.go).
            self._send_json(400, {"error": f"{json.dumps(name)} does not support thinking"})
            return
        if endpoint == "chat" and body.get("tools") and not owner.calls_tools(name):
            # Then scheduleRunner's capability check, which names the model in full (routes.go).
            self._send_json(400, {"error": f"{qualified_model(name)} does not support tools"})
            return
        fault = owner.fault
        if fault not in FAULTS:
            self._send_json(500, {"error": f"fake server: unknown fault {fault!r}"})
            return
        if fault == "hang":
            self._hang()
            return
        if fault == "http_500":
            self._send_json(500, {"error": owner.error_message})
            return

        empty = not body.get("messages") if endpoint == "chat" else not body.get("prompt")
        streaming = body.get("stream", True) is not False  # Ollama streams unless told not to
        if empty or not streaming:
            # Ollama answers these with one JSON object; faults act on the whole answer.
            if fault == "stall":
                self._hang()
            elif fault == "drop":
                self._abort()
            elif fault == "error_mid_stream":
                self._send_json(500, {"error": owner.error_message})
            else:
                if fault == "slow" and owner._wait(owner.slow_delay):
                    return
                reply = self._load_reply(endpoint, body) if empty else self._whole_reply(
                    endpoint, body)
                if fault == "no_done":
                    reply["done"] = False
                if fault == "truncated":
                    self._send_raw(200, json.dumps(reply).encode()[:20], "application/json")
                else:
                    self._send_json(200, reply)
            return

        thinking, answer, calls = self._reply(endpoint, body)
        pieces: list[tuple[str, Any]] = [
            ("thinking", p) for p in pieces_of(thinking, owner.chunk_chars)] + [
            ("content", p) for p in pieces_of(answer, owner.chunk_chars)]
        if calls:
            pieces.append(("tool_calls", calls))  # one chunk, as Ollama's parser sends them
        cut = min(owner.fault_after, len(pieces)) if fault in (
            "error_mid_stream", "drop", "stall", "no_done", "truncated") else len(pieces)
        self._start_stream()
        try:
            for kind, piece in pieces[:cut]:
                if fault == "slow" and owner._wait(owner.slow_delay):
                    self._abort()
                    return
                if kind == "thinking":
                    self._chunk(self._line(endpoint, name, "", thinking=piece))
                elif kind == "tool_calls":
                    self._chunk(self._line(endpoint, name, "", tool_calls=piece))
                else:
                    self._chunk(self._line(endpoint, name, piece))
            if fault == "error_mid_stream":
                self._chunk({"error": owner.error_message})
            elif fault == "drop":
                self._abort()  # no terminating zero-length chunk: the body is cut off
                return
            elif fault == "stall":
                self._hang()
                return
            elif fault == "truncated":
                rest = pieces[cut][1] if cut < len(pieces) and pieces[cut][0] != "tool_calls" \
                    else " more"
                whole = (json.dumps(self._line(endpoint, name, rest)) + "\n").encode()
                half = whole[: len(whole) // 2]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(half), half))
            elif fault == "no_done":
                pass
            else:
                self._chunk(self._done_line(endpoint, body, len(pieces)))
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            owner._note_aborted()
            self.close_connection = True

    # --- reply shapes -------------------------------------------------------------------------

    def _reply(self, endpoint: str, body: dict) -> tuple[str, str, list[dict]]:
        """(reasoning to send in `thinking`, text to send as the reply, tool calls on the wire)."""
        reply = self.owner.responder(endpoint, body)
        if not isinstance(reply, ToolCalls):
            text, calls = reply, []
        elif endpoint == "chat" and body.get("tools"):
            text, calls = reply.text, wire_tool_calls(reply)
        else:
            raise ToolsNotOffered(f"the responder called {[n for n, _ in reply.calls]} but "
                                  "the request offered no tools")
        if not self.owner.thinks(body["model"]):
            return "", text, calls  # nothing parses the model's tags: they stay in the text
        thinking, answer = split_thinking(text)
        if body.get("think") is False:
            return "", answer, calls  # told not to think, the model goes straight to the answer
        return thinking, answer, calls

    @staticmethod
    def _line(endpoint: str, name: str, text: str, *, thinking: str | None = None,
              tool_calls: list[dict] | None = None) -> dict:
        line: dict[str, Any] = {"model": name, "created_at": _now()}
        if endpoint == "chat":
            line["message"] = {"role": "assistant"}
        _say(line, endpoint, text, thinking)
        if tool_calls:
            line["message"]["tool_calls"] = tool_calls
        line["done"] = False
        return line

    @staticmethod
    def _counters(body: dict, eval_count: int) -> dict:
        if "messages" in body:
            prompt_words = sum(len(str(m.get("content") or "").split())
                               for m in body.get("messages") or [])
        else:
            prompt_words = len(str(body.get("prompt") or "").split()) + len(
                str(body.get("system") or "").split())
        return {
            "total_duration": 1_234_000_000 + eval_count * 20_000_000,
            "load_duration": 12_000_000,
            "prompt_eval_count": max(1, prompt_words),
            "prompt_eval_duration": 150_000_000,
            "eval_count": eval_count,
            "eval_duration": eval_count * 20_000_000,
        }

    def _done_line(self, endpoint: str, body: dict, eval_count: int) -> dict:
        line = self._line(endpoint, body["model"], "")
        line.update(done=True, done_reason="stop", **self._counters(body, eval_count))
        if endpoint == "generate":
            line["context"] = [1, 2, 3]
        return line

    def _whole_reply(self, endpoint: str, body: dict) -> dict:
        thinking, text, calls = self._reply(endpoint, body)
        line = self._done_line(endpoint, body, len(fragments(thinking)) + len(fragments(text))
                               + len(calls))
        _say(line, endpoint, text, thinking)
        if calls:
            line["message"]["tool_calls"] = calls
        return line

    def _load_reply(self, endpoint: str, body: dict) -> dict:
        keep_alive = body.get("keep_alive")
        unload = keep_alive in (0, 0.0, "0", "0s", "0m")
        line = self._line(endpoint, body["model"], "")
        line.update(done=True, done_reason="unload" if unload else "load")
        return line

    @staticmethod
    def _tag(name: str) -> dict:
        return {
            "name": name, "model": name, "modified_at": "2025-01-01T00:00:00.000000Z",
            "size": 2_019_393_189, "digest": "a80c4f17acd5" + "0" * 52,
        }

    # --- wire ---------------------------------------------------------------------------------

    def _path(self) -> str:
        return self.path.split("?", 1)[0]

    def _read_json(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            raise ValueError("missing request body")
        body = json.loads(raw)
        if not isinstance(body, dict):
            raise ValueError("json: cannot unmarshal into Go value of type api.Request")
        return body

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_raw(status, json.dumps(obj).encode(), "application/json; charset=utf-8")

    def _send_raw(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_text(self, status: int, text: str, head: bool = False) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, obj: dict) -> None:
        data = (json.dumps(obj) + "\n").encode()
        # wfile is unbuffered (wbufsize 0): each line leaves at once, like Ollama's flushes.
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _hang(self) -> None:
        """Send nothing until the server stops (or hang_seconds pass), then cut the connection."""
        self.owner._wait(self.owner.hang_seconds)
        self._abort()

    def _abort(self) -> None:
        """Close the socket now, mid-message, as a crashed server would."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT, after printing the URL on one line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", action="append", help="an installed model (repeatable)")
    parser.add_argument("--fault", choices=FAULTS, default="none")
    parser.add_argument("--slow-delay", type=float, default=0.05)
    parser.add_argument("--reply", help="a fixed reply instead of the echoing default")
    parser.add_argument("--thinking-model", action="append", default=[],
                        help="an installed model with the thinking capability (repeatable)")
    parser.add_argument("--tools-model", action="append", default=[],
                        help="an installed model with the tools capability (repeatable)")
    parser.add_argument("--chunk-chars", type=int, help="stream replies in pieces of N characters")
    args = parser.parse_args(argv)

    special = args.thinking_model + args.tools_model
    models = (args.model or ([] if special else [DEFAULT_MODEL])) + special
    server = FakeOllamaServer(host=args.host, port=args.port, models=models)
    server.model_capabilities = {m: ["completion", "thinking"] for m in args.thinking_model}
    for m in args.tools_model:
        server.model_capabilities[m] = server.model_capabilities.get(m, ["completion"]) + ["tools"]
    server.chunk_chars = args.chunk_chars
    server.fault = args.fault
    server.slow_delay = args.slow_delay
    if args.reply is not None:
        reply = args.reply
        server.responder = lambda endpoint, body: reply

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    print(server.url, flush=True)
    try:
        while not stop.wait(0.2):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
