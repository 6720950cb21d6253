"""The Ollama adapter: streams replies through the official async client, one error type out."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import ollama
import pydantic

from elara.brain.thinking import strip_thinking
from elara.conversation.render import ChatRequest, GenerateRequest
from elara.errors import LanguageModelError
from elara.tools.calls import ToolCall

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelInfo:
    """What Ollama's /api/show reports about the configured model."""

    name: str
    family: str | None
    parameter_size: str | None
    quantization: str | None
    thinking: bool = False
    """The model can think before it answers (its capabilities include "thinking")."""
    tools: bool = False
    """The model can call tools (its capabilities include "tools")."""


@dataclass(frozen=True)
class PromptTokens:
    """How a request's prompt was read: tokens evaluated anew, and kept from the last request
    (None where the model does not say)."""

    evaluated: int
    reused: int | None


def make_client(host: str, timeout_seconds: float) -> ollama.AsyncClient:
    """The official async Ollama client, with a timeout so a hung server cannot hang Elara."""
    # The client's default timeout is None (wait forever). httpx applies the read timeout to each
    # wait for the next bytes, not to the whole reply: a slow but steady stream keeps going, a
    # server that goes silent fails after timeout_seconds.
    # Connecting gets at most 10 s: a host that drops packets should not keep the user waiting
    # for the full reply timeout before hearing that Ollama is unreachable.
    timeout = httpx.Timeout(timeout_seconds, connect=min(timeout_seconds, 10.0))
    # The client (and its pooled connections) belongs to the event loop it first runs on.
    return ollama.AsyncClient(host=host, timeout=timeout)


class OllamaLanguageModel:
    """A model served by Ollama; every failure surfaces as exactly one LanguageModelError."""

    def __init__(self, client: ollama.AsyncClient, *, model: str, host: str,
                 keep_alive: str | float | None, options: Mapping[str, Any],
                 timeout_seconds: float) -> None:
        self.model = model
        self.host = host
        self._client = client
        self._keep_alive = keep_alive
        self._options = dict(options)
        self._timeout_seconds = timeout_seconds
        #: how the latest reply's prompt was read
        self.last_prompt: PromptTokens | None = None
        self._info: ModelInfo | None = None  # what the last check() learnt from /api/show

    @property
    def calls_tools(self) -> bool:
        """The model can call tools (learnt by check(); only then are tools sent)."""
        return self._info is not None and self._info.tools

    def _think(self) -> dict[str, Any]:
        """The `think` argument for chat()/generate(): False for a thinking model, else absent."""
        # Ollama lets a thinking model think unless told not to (slow, and none of it is spoken);
        # it refuses `think: true` for a model without the capability (HTTP 400 "... does not
        # support thinking") and servers older than thinking don't know the field, so `think`
        # goes only to a model that reports the capability.
        return {"think": False} if self._info is not None and self._info.thinking else {}

    async def stream(self, request: ChatRequest | GenerateRequest) -> AsyncIterator[str | ToolCall]:
        """Yield the reply's text fragments as Ollama produces them, and the tool calls it makes."""
        endpoint, start = self._start(request)
        doing = f"answering with {self.model}"
        parts: AsyncIterator[Any] | None = None
        finished = False
        thoughts: list[str] = []
        try:
            parts = await start
            async for part in parts:
                fragment = part.message.content if endpoint == "chat" else part.response
                # Reasoning Ollama parsed out arrives in `thinking` and is never part of the reply;
                # reasoning it did not parse (<think> in the text) is the orchestrator's to drop.
                thought = part.message.thinking if endpoint == "chat" else part.thinking
                if thought:
                    thoughts.append(thought)
                if fragment:
                    yield fragment
                for call in (part.message.tool_calls or []) if endpoint == "chat" else []:
                    yield ToolCall(call.function.name, dict(call.function.arguments or {}))
                if part.done:
                    finished = True
                    if part.prompt_eval_count is not None:
                        self.last_prompt = PromptTokens(part.prompt_eval_count, None)
                    if thoughts:
                        log.debug("%s thought (not part of the reply): %r", self.model,
                                  "".join(thoughts))
                    log.debug("%s finished (%s): %s prompt tokens, %s reply tokens, %.2f s",
                              self.model, part.done_reason, part.prompt_eval_count,
                              part.eval_count, (part.total_duration or 0) / 1e9)
        except Exception as exc:
            raise self._translate(exc, doing) from exc
        finally:
            # When the consumer stops early (the user barged in), close the HTTP response now:
            # the dropped connection is what tells Ollama to stop generating.
            if parts is not None:
                await _close_quietly(parts)
        if not finished:
            # Ollama always ends a reply with a `done: true` line; a body that ends without one
            # was cut off (a proxy, a crash of the runner), so the reply is incomplete.
            raise LanguageModelError(
                f"Ollama at {self.host} ended the reply of {self.model} before it was done: "
                "the connection was cut; check that Ollama is still running (`ollama ps`, its log)",
                code="connection_lost")

    def _start(self, request: ChatRequest | GenerateRequest) -> tuple[str, Any]:
        """The endpoint a request goes to, and the client's call for it (awaited by `stream`)."""
        if isinstance(request, ChatRequest):
            log.debug("asking %s at %s via /api/chat with %d messages: %r",
                      self.model, self.host, len(request.messages), request.messages)
            tools = [dict(t) for t in request.tools] if request.tools and self.calls_tools else None
            return "chat", self._client.chat(
                model=self.model, messages=[dict(m) for m in request.messages], stream=True,
                tools=tools, keep_alive=self._keep_alive, options=self._options, **self._think())
        if isinstance(request, GenerateRequest):
            log.debug("asking %s at %s via /api/generate: system %r, prompt %r",
                      self.model, self.host, request.system, request.prompt)
            return "generate", self._client.generate(
                model=self.model, prompt=request.prompt, system=request.system, stream=True,
                keep_alive=self._keep_alive, options=self._options, **self._think())
        raise TypeError(f"expected ChatRequest or GenerateRequest, got {type(request).__name__}")

    async def complete(self, messages: Sequence[Mapping[str, str]], *,
                       format: Mapping[str, Any] | None = None) -> str:
        """One whole chat reply, not streamed (background work: summaries, fact extraction), with
        any thinking dropped. With `format` (a JSON schema) Ollama constrains the reply to JSON
        matching it."""
        try:
            response = await self._client.chat(
                model=self.model, messages=[dict(m) for m in messages], stream=False,
                format=dict(format) if format is not None else None,
                keep_alive=self._keep_alive, options=self._options, **self._think())
        except Exception as exc:
            raise self._translate(exc, f"working in the background with {self.model}") from exc
        return strip_thinking(response.message.content or "")

    async def complete_json(self, messages: Sequence[Mapping[str, str]],
                            schema: Mapping[str, Any]) -> Any:
        """A reply constrained to `schema`, parsed; LanguageModelError if it isn't JSON."""
        return json_reply(await self.complete(messages, format=schema),
                          f"{self.model} at {self.host} did not answer with JSON as asked "
                          "(a model without structured-output support?)")

    async def embed(self, texts: list[str], model: str) -> list[list[float]]:
        """Embedding vectors for `texts` from Ollama's /api/embed with `model`."""
        try:
            response = await self._client.embed(model=model, input=texts,
                                                keep_alive=self._keep_alive)
        except Exception as exc:
            translated = self._translate(exc, f"embedding with {model}")
            if translated.code == "model_missing":
                translated = LanguageModelError(
                    f"Ollama at {self.host} does not have the embedding model {model}: run "
                    f"`ollama pull {model}` or set Memory.EmbeddingModel", code="model_missing")
            raise translated from exc
        return [list(vector) for vector in response.embeddings]

    async def check(self) -> ModelInfo:
        """Ask Ollama about the model; LanguageModelError when it is unreachable or not pulled."""
        try:
            shown = await self._client.show(self.model)
        except Exception as exc:
            raise self._translate(exc, f"looking up {self.model}") from exc
        details = shown.details
        # Ollama reported capabilities before it had thinking models: none listed, none thinks.
        thinking = "thinking" in (shown.capabilities or [])
        tools = "tools" in (shown.capabilities or [])
        info = ModelInfo(
            name=self.model,
            family=details.family if details else None,
            parameter_size=details.parameter_size if details else None,
            quantization=details.quantization_level if details else None,
            thinking=thinking,
            tools=tools,
        )
        # The provider checks every half minute for months: only news is worth an INFO line.
        level = logging.DEBUG if info == self._info else logging.INFO
        self._info = info
        log.log(level, "Ollama at %s has %s (family %s, %s parameters, %s%s, %s)", self.host, info.name,
                 info.family or "unknown", info.parameter_size or "unknown",
                 info.quantization or "unknown quantization",
                 ", a thinking model: asked not to think" if thinking else "",
                 "calls tools" if tools else "no tools: it cannot call them")
        return info

    async def warm_up(self) -> None:
        """Load the model into memory now, so the first question is not slowed by loading."""
        # An empty prompt makes Ollama load the model and return at once. The same options and
        # keep_alive as real requests matter: a different num_ctx would make Ollama reload.
        try:
            await self._client.generate(model=self.model, prompt="", stream=False,
                                        keep_alive=self._keep_alive, options=self._options)
        except Exception as exc:
            raise self._translate(exc, f"loading {self.model}") from exc
        log.info("%s is loaded in Ollama at %s (keep_alive %s)", self.model, self.host,
                 self._keep_alive if self._keep_alive is not None else "Ollama's default")

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._client.close()

    def _translate(self, exc: BaseException, doing: str) -> LanguageModelError:
        """The one LanguageModelError that says what went wrong, for whom, and the fix."""
        if isinstance(exc, LanguageModelError):
            return exc
        host, model = self.host, self.model
        # Reset/aborted are ConnectionError subclasses too, but they mean a connection was lost.
        if isinstance(exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
            return _lost(host, model, doing, exc)
        # The client raises the builtin ConnectionError for plain calls, but a raw
        # httpx.ConnectError escapes from streams; a connect timeout is unreachable too.
        if isinstance(exc, (ConnectionError, httpx.ConnectError, httpx.ConnectTimeout)):
            return LanguageModelError(
                f"can't reach Ollama at {host}: start it with `ollama serve` "
                "or set LanguageModel.Host", code="unreachable")
        if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
            return LanguageModelError(
                f"can't reach Ollama at {host} ({exc}): set LanguageModel.Host to a URL "
                "such as http://127.0.0.1:11434", code="unreachable")
        if isinstance(exc, httpx.TimeoutException):
            return LanguageModelError(
                f"Ollama at {host} sent nothing for {self._timeout_seconds:g} s while {doing}: "
                "it may be stuck or overloaded; check `ollama ps` and its log, "
                "or raise LanguageModel.TimeoutSeconds", code="timeout")
        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == 404:
                return LanguageModelError(
                    f"Ollama at {host} does not have the model {model} ({exc.error}): "
                    f"run `ollama pull {model}` or set LanguageModel.Model", code="model_missing")
            if exc.status_code == -1:
                # An {"error": ...} line inside a 200 stream: Ollama's own words on what broke.
                return LanguageModelError(
                    f"Ollama at {host} reported an error while {doing}: {exc.error}",
                    code="model_error")
            return LanguageModelError(
                f"Ollama at {host} answered HTTP {exc.status_code} while {doing}: {exc.error}",
                code="model_error")
        if isinstance(exc, (httpx.TransportError, httpx.StreamError, httpx.DecodingError,
                            json.JSONDecodeError)):
            # RemoteProtocolError, ReadError (peer closed mid-chunk), a truncated JSON line, ...
            return _lost(host, model, doing, exc)
        if isinstance(exc, pydantic.ValidationError):
            # The client validates both what it sends and what it gets back.
            first: Mapping[str, Any] = exc.errors()[0] if exc.error_count() else {}
            return LanguageModelError(
                f"the Ollama client rejected a request to or reply from {host} while {doing} "
                f"({exc.title}: {first.get('loc', ())} {first.get('msg', '')}): check "
                "LanguageModel.Model and that Ollama is up to date", code="model_error")
        return LanguageModelError(
            f"talking to Ollama at {host} failed while {doing}: {type(exc).__name__}: {exc}",
            code="model_error")


def _lost(host: str, model: str, doing: str, exc: BaseException) -> LanguageModelError:
    """The connection_lost error."""
    detail = str(exc) or type(exc).__name__
    return LanguageModelError(
        f"lost the connection to Ollama at {host} while {doing} ({detail}): "
        f"check that Ollama is still running (`ollama ps`, its log) and try again",
        code="connection_lost")


async def _close_quietly(parts: AsyncIterator[Any]) -> None:
    """Close the client's stream generator; a failure here must not hide the real outcome."""
    aclose = getattr(parts, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:
        log.debug("closing the Ollama stream failed", exc_info=True)


def json_reply(text: str, failure: str) -> Any:
    """A reply asked for as JSON, parsed; LanguageModelError saying `failure` if it isn't JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise LanguageModelError(failure, code="model_error") from None
