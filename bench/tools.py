#!/usr/bin/env python3
"""Benchmark: how well a language model calls Elara's built-in tools — the right tool with the
right arguments, and no call where none is needed — over everyday requests (bench.tools_cases).

    .venv/bin/python -m bench.tools                          # the built-in model, every way
    .venv/bin/python -m bench.tools --method two-step+examples --whole
    .venv/bin/python -m bench.tools --provider ollama --host http://127.0.0.1:11434 --model llama3.2:3b

The tools offered are exactly elara.tools.specs.BUILTIN_SPECS. Each request is asked alone, as
Elara asks a first question: the `assistant` personality's system prompt and the rule of the time
stamps, then the user's words behind their stamp (a fixed clock: Monday 23 November 2026, 17:40
UTC). Sampling is greedy (temperature 0) unless --temperature says otherwise.

Ways the built-in model (llama.cpp in-process, SmolLM2-135M-Instruct unless --embedded-model) is
asked, each over the whole table (`--method` picks some):
- json-grammar: the tools described in the system prompt; the reply is held by a llama.cpp grammar
  (from a JSON schema) to `{"tool": NAME, "arguments": {…}}` with that tool's argument schema, or
  `{"tool": "none"}`.
- two-step: first the choice alone (a grammar of the tool names and "none", the tools named and
  described in the system prompt); then, for a tool with arguments, the arguments alone, asked with
  only that tool described and held by a grammar from its schema.
- two-step-scored: two steps, the choice made by likelihood instead: each name scored whole, less
  its score after a request with no content (contextual calibration), then the arguments as above.
- chatml-function-calling: llama-cpp-python's own function calling (its chat handler of that
  name, `tools=` and tool_choice "auto"; SmolLM2's chat template is ChatML too).
- NAME+examples: the same with worked examples as earlier turns of the chat (requests unlike the
  bench's, one or two per tool and a few that need none; bench.tools.EXAMPLES).
- told-the-tool+examples, a diagnosis rather than a way: the right tool given, only the arguments
  asked (as two-step+examples asks them), to show how far the arguments alone fall short.
With --provider ollama, the one way is Ollama's native `tools` field (the official client's
AsyncClient.chat with the tools' function shapes; the calls read from message.tool_calls).

How a reply is judged (only its first call; bench.tools_cases says what is right): right; wrong
tool (a tool was needed, another was called); wrong arguments (the right tool, but its arguments
fail its JSON schema or the row's conditions); false call (a call where none was needed); missed
call (no call where one was needed); failed (no usable reply: an error, or JSON cut off). Seconds
are wall-clock per request, the whole decision (both steps of two-step); each way keeps its own
llama.cpp context(s), so the long system prompt is read once and later requests reuse it, as in a
daemon whose system prompt does not change. The report (stdout) is markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from bench.common import log, percentile, table
from bench.tools_cases import CASES, Case
from elara.brain.personalities import BUILT_IN
from elara.conversation.render import STAMP_RULE, stamp
from elara.tools.calls import ToolCall, ToolSpec, argument_problem
from elara.tools.specs import BUILTIN_SPECS

#: the bar the issue sets: below it the built-in model gets no tools
BAR = 0.90
NOW = datetime(2026, 11, 23, 17, 40, tzinfo=UTC)
SYSTEM = f"{BUILT_IN['assistant'].system_prompt}\n\n{STAMP_RULE}"
SPECS: dict[str, ToolSpec] = {spec.offered_name: spec for spec in BUILTIN_SPECS}
NONE = "none"
#: the longest reply a decision may take (a JSON call is far shorter)
MAX_TOKENS = 160
CONTEXT = 4096
#: the context of llama-cpp-python's function calling (ChatmlFunctionCalling)
FUNCTION_CALLING_CONTEXT = 3072
#: the context of a scored choice, which keeps every token's logits (n_ctx × vocabulary floats)
SCORED_CONTEXT = 2048
SHOWN_CHARS = 70

#: worked examples (request, tool or None, arguments, or the words of an answer when no tool),
#: the ones that need no tool spread among the others (a small model copies the latest turns)
EXAMPLES: tuple[tuple[str, str | None, Any], ...] = (
    ("Set a timer for three minutes.", "set_timer", {"seconds": 180}),
    ("Who painted the Mona Lisa?", None, "Leonardo da Vinci painted it."),
    ("Remind me at 4 pm to feed the cat.", "set_reminder", {"text": "feed the cat", "at": "16:00"}),
    ("Remember that my favourite colour is green.", "remember_fact",
     {"fact": "The user's favourite colour is green."}),
    ("Is it the weekend yet?", "current_time", {}),
    ("Hello!", None, "Hello! What can I do for you?"),
    ("What did I tell you about the garden two days ago?", "search_history",
     {"query": "garden", "days_ago": 2}),
    ("Which reminders are running?", "list_timers", {}),
    ("Call off the reminder to stretch.", "cancel_timer", {"name": "stretch"}),
    ("What is 12 divided by 4?", "compute", {"question": "what is 12 divided by 4"}),
    ("Tell me a story about a dragon.", None, "Once upon a time, a small dragon lived by the sea."),
    ("In twenty minutes, remind me to stretch.", "set_reminder", {"text": "stretch", "in_seconds": 1200}),
    ("Forget my phone number.", "forget_fact", {"fact": "the user's phone number"}),
    ("Time twelve minutes for the eggs, please.", "set_timer", {"seconds": 720, "name": "eggs"}),
    ("Why do cats purr?", None, "Mostly when they are content, though also to soothe themselves."),
    ("Did I mention my cousin's wedding last month?", "search_history", {"query": "cousin wedding"}),
    ("How many metres are in a mile?", "compute", {"question": "how many metres in a mile"}),
    ("Clear everything you have running.", "cancel_timer", {"all": True}),
    ("I work night shifts, keep that in mind.", "remember_fact", {"fact": "The user works night shifts."}),
    ("That's great, thank you.", None, "You're welcome."),
)


def said(request: str) -> str:
    """The user's words as Elara hands them to the model: behind the time they were said."""
    return f"{stamp(NOW, UTC)} {request}"


@dataclass(frozen=True)
class Decision:
    """What a model did with one request: its calls (empty: it would answer in words), the raw
    reply, and whether it failed to give a usable one."""

    calls: tuple[ToolCall, ...]
    raw: str
    failed: str | None = None


class Way(Protocol):
    """One way of asking a model to call tools."""

    name: str
    #: a diagnosis, not a way to ship: left out of "best"
    diagnostic: bool

    async def decide(self, case: Case) -> Decision:
        """What the model does with the case's request."""

    def close(self) -> None:
        """Free what it holds."""


# ---------------------------------------------------------------------------------------------
# judging

VERDICTS = ("right", "wrong tool", "wrong arguments", "false call", "missed call", "failed")


def judge(case: Case, decision: Decision) -> str:
    """One of VERDICTS for a decision on `case` (its first call only)."""
    if decision.failed is not None:
        return "failed"
    if not decision.calls:
        return "missed call" if case.needs_call else "right"
    first = decision.calls[0]
    if not case.expect:
        return "false call"
    fitting = [e for e in case.expect if e.tool == first.name]
    if not fitting:
        return "wrong tool"
    if argument_problem(SPECS[first.name].schema, first.arguments) is not None:
        return "wrong arguments"
    right = any(all(c.holds(first.arguments) for c in e.conditions) for e in fitting)
    return "right" if right else "wrong arguments"


# ---------------------------------------------------------------------------------------------
# the built-in model (llama.cpp)


def describe_tool(spec: ToolSpec, *, arguments: bool = True) -> str:
    """One tool as the system prompt describes it: name, what it does, and its arguments."""
    line = f"- {spec.offered_name}: {spec.description}"
    if not arguments:
        return line
    properties: Mapping[str, Any] = spec.schema.get("properties", {})
    if not properties:
        return line + " No arguments."
    required = set(spec.schema.get("required", ()))
    parts = [f"{name} ({prop.get('type', 'any')}{', required' if name in required else ''}): "
             f"{prop.get('description', '')}" for name, prop in properties.items()]
    return line + " Arguments: " + "; ".join(parts)


def call_schema() -> dict[str, Any]:
    """The JSON schema of a one-step reply: a tool with its own arguments' schema, or none."""
    choices: list[dict[str, Any]] = [
        {"type": "object", "properties": {"tool": {"const": name}, "arguments": dict(spec.schema)},
         "required": ["tool", "arguments"], "additionalProperties": False}
        for name, spec in SPECS.items()]
    choices.append({"type": "object", "properties": {"tool": {"const": NONE}}, "required": ["tool"],
                    "additionalProperties": False})
    return {"anyOf": choices}


def example_turns(reply: Any) -> list[dict[str, Any]]:
    """The examples as earlier chat turns; `reply(tool, arguments)` is the assistant's side."""
    turns: list[dict[str, Any]] = []
    for request, tool, arguments in EXAMPLES:
        turns += [{"role": "user", "content": said(request)}, reply(tool, arguments)]
    return turns


class Model:
    """Loads llama.cpp contexts of one GGUF, each in this thread (llama.cpp's thread pool stays
    with the thread that first uses it)."""

    def __init__(self, path: Path, threads: int, temperature: float) -> None:
        from elara.service.openmp import prepare_openmp

        prepare_openmp()
        import llama_cpp

        self._llama_cpp = llama_cpp
        self.path, self.threads, self.temperature = path, threads, temperature
        self.open: list[Any] = []

    def context(self, n_ctx: int = CONTEXT, **extra: Any) -> Any:
        """A fresh llama.cpp context (its own prompt cache)."""
        llama = self._llama_cpp.Llama(model_path=str(self.path), n_ctx=n_ctx, n_threads=self.threads,
                                      n_threads_batch=self.threads, verbose=False, **extra)
        self.open.append(llama)
        return llama

    def grammar(self, schema: Mapping[str, Any]) -> Any:
        """A llama.cpp grammar admitting the JSON documents of `schema`."""
        return self._llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)

    def choice_grammar(self, names: Sequence[str]) -> Any:
        """A llama.cpp grammar admitting exactly one of `names`."""
        rule = " | ".join(json.dumps(name) for name in names)
        return self._llama_cpp.LlamaGrammar.from_string(f"root ::= {rule}", verbose=False)

    def reply(self, llama: Any, messages: list[dict[str, Any]], grammar: Any) -> tuple[str, str | None]:
        """One chat completion under `grammar`: its text and how it finished."""
        done = llama.create_chat_completion(messages=messages, grammar=grammar, max_tokens=MAX_TOKENS,
                                            temperature=self.temperature)
        choice = done["choices"][0]
        return choice["message"].get("content") or "", choice.get("finish_reason")

    def close(self) -> None:
        """Free every context opened."""
        for llama in self.open:
            llama.close()
        self.open.clear()


def parsed(text: str, finish: str | None) -> tuple[Any, str | None]:
    """A JSON reply, or why it is not usable."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError:
        return None, f"not JSON ({finish}): {text[:80]!r}"


class JsonGrammar:
    """One step: the tools described in the system prompt, the reply held to a call or none."""

    def __init__(self, model: Model, examples: bool) -> None:
        self.name = "json-grammar" + ("+examples" if examples else "")
        self.diagnostic = False
        self._model = model
        self._llama = model.context()
        self._grammar = model.grammar(call_schema())
        tools = "\n".join(describe_tool(spec) for spec in BUILTIN_SPECS)
        system = (f"{SYSTEM}\n\nYou can use these tools:\n{tools}\n\nWhen one of them does what the "
                  'person asks, reply with {"tool": its name, "arguments": {its arguments}}. '
                  'Otherwise reply with {"tool": "none"}.')
        self._start = [{"role": "system", "content": system}]
        if examples:
            self._start += example_turns(self._example_reply)

    @staticmethod
    def _example_reply(tool: str | None, arguments: Any) -> dict[str, str]:
        body = {"tool": tool, "arguments": arguments} if tool else {"tool": NONE}
        return {"role": "assistant", "content": json.dumps(body)}

    async def decide(self, case: Case) -> Decision:
        """Ask once; the reply is the decision."""
        messages = [*self._start, {"role": "user", "content": said(case.request)}]
        text, finish = self._model.reply(self._llama, messages, self._grammar)
        reply, problem = parsed(text, finish)
        if problem is not None:
            return Decision((), text, problem)
        if reply["tool"] == NONE:
            return Decision((), text)
        return Decision((ToolCall(reply["tool"], reply["arguments"]),), text)

    def close(self) -> None:
        """Nothing of its own: the model's contexts are closed with it."""


class TwoStep:
    """First the choice alone (a tool's name or none, greedy under a grammar of the names); then
    the chosen tool's arguments alone, asked with only that tool described. Each step keeps its
    own context."""

    label = "two-step"
    diagnostic = False

    def __init__(self, model: Model, examples: bool) -> None:
        self.name = self.label + ("+examples" if examples else "")
        self._model, self._examples = model, examples
        self._fill = model.context()
        tools = "\n".join(describe_tool(spec, arguments=False) for spec in BUILTIN_SPECS)
        system = (f"{SYSTEM}\n\nYou can use these tools:\n{tools}\n\nReply with the name of the tool "
                  "that does what the person asks, or with none when no tool is needed.")
        self._start = [{"role": "system", "content": system}]
        if examples:
            self._start += example_turns(lambda tool, _: {"role": "assistant", "content": tool or NONE})
        self._grammars = {name: model.grammar(spec.schema) for name, spec in SPECS.items()}
        self._prepare()

    def _prepare(self) -> None:
        self._choose = self._model.context()
        self._choice = self._model.choice_grammar([*SPECS, NONE])

    def _chosen(self, case: Case) -> str:
        """The tool's name, or none."""
        messages = [*self._start, {"role": "user", "content": said(case.request)}]
        return self._model.reply(self._choose, messages, self._choice)[0]

    def _arguments_prompt(self, spec: ToolSpec, request: str) -> list[dict[str, Any]]:
        system = (f"{SYSTEM}\n\nYou call this tool for the person:\n{describe_tool(spec)}\n\n"
                  "Reply with its arguments as a JSON object, taken from what the person said.")
        messages = [{"role": "system", "content": system}]
        if self._examples:
            for example, tool, arguments in EXAMPLES:
                if tool == spec.offered_name:
                    messages += [{"role": "user", "content": said(example)},
                                 {"role": "assistant", "content": json.dumps(arguments)}]
        return [*messages, {"role": "user", "content": said(request)}]

    async def decide(self, case: Case) -> Decision:
        """Choose, then fill in the chosen tool's arguments (none to fill for a tool without)."""
        name = self._chosen(case)
        if name not in SPECS:
            return Decision((), name)
        spec = SPECS[name]
        if not spec.schema.get("properties"):
            return Decision((ToolCall(name, {}),), name)
        text, finish = self._model.reply(self._fill, self._arguments_prompt(spec, case.request),
                                         self._grammars[name])
        arguments, problem = parsed(text, finish)
        if problem is not None:
            return Decision((), f"{name} {text}", problem)
        return Decision((ToolCall(name, arguments),), f"{name} {text}")

    def close(self) -> None:
        """Nothing of its own: the model's contexts are closed with it."""


class ScoredTwoStep(TwoStep):
    """Two steps, the choice made by likelihood: each name (and the end of the turn) scored
    whole, less its score after a request with no content ("", "N/A", "[MASK]"), so that a
    name the model favours whatever is asked does not win by that alone (contextual
    calibration, Zhao et al. 2021)."""

    label = "two-step-scored"

    def _prepare(self) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self._choose = self._model.context(logits_all=True, n_ctx=SCORED_CONTEXT)
        llama = self._choose
        end = llama.token_eos()
        self._template: Any = Jinja2ChatFormatter(
            template=llama.metadata["tokenizer.chat_template"], eos_token=llama.detokenize([end]).decode(),
            bos_token=llama.detokenize([llama.token_bos()]).decode())
        self._names = {name: [*llama.tokenize(name.encode(), add_bos=False), end] for name in [*SPECS, NONE]}
        neutral = [self._scores(said(text)) for text in ("", "N/A", "[MASK]")]
        self._prior = {name: statistics.fmean(s[name] for s in neutral) for name in self._names}

    def _scores(self, request: str) -> dict[str, float]:
        """The log-likelihood of each name as the reply to `request`."""
        messages = [*self._start, {"role": "user", "content": request}]
        prompt = self._choose.tokenize(self._template(messages=messages).prompt.encode(), add_bos=False,
                                       special=True)
        return {name: self._likelihood(prompt, tokens) for name, tokens in self._names.items()}

    def _likelihood(self, prompt: list[int], reply: list[int]) -> float:
        llama = self._choose
        tokens = prompt + reply
        kept = 0
        for old, new in zip(llama.input_ids[:llama.n_tokens], tokens, strict=False):
            if old != new:
                break
            kept += 1
        # the logits of the tokens kept stay in `scores`; what follows is evaluated anew
        llama.n_tokens = min(kept, len(tokens) - 1)
        llama.eval(tokens[llama.n_tokens:])
        logits = np.asarray(llama.scores[len(prompt) - 1:len(tokens) - 1], dtype=np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        logs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return float(logs[np.arange(len(reply)), reply].sum())

    def _chosen(self, case: Case) -> str:
        scores = self._scores(said(case.request))
        return max(scores, key=lambda name: scores[name] - self._prior[name])


class ToldTheTool(TwoStep):
    """A diagnosis, not a way: the right tool given (the row's first), only its arguments asked
    as two-step asks them — how right the arguments alone would be."""

    label = "told-the-tool"
    diagnostic = True

    def _prepare(self) -> None:
        pass

    def _chosen(self, case: Case) -> str:
        return case.expect[0].tool if case.expect else NONE


class ChatmlFunctionCalling:
    """llama-cpp-python's own function calling: the "chatml-function-calling" chat format, the
    tools in `tools=`, tool_choice "auto"."""

    def __init__(self, model: Model, examples: bool) -> None:
        self.name = "chatml-function-calling" + ("+examples" if examples else "")
        self.diagnostic = False
        self._model = model
        # The handler puts no token limit on a call's arguments, and the model may write digits
        # until the context is full: a smaller context ends such a runaway (a failure) sooner.
        self._llama = model.context(n_ctx=FUNCTION_CALLING_CONTEXT, chat_format="chatml-function-calling")
        self._tools = [spec.function() for spec in BUILTIN_SPECS]
        self._start: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        if examples:
            self._start += example_turns(self._example_reply)

    @staticmethod
    def _example_reply(tool: str | None, arguments: Any) -> dict[str, Any]:
        if tool is None:
            return {"role": "assistant", "content": arguments}
        call = {"id": f"call_{tool}", "type": "function",
                "function": {"name": tool, "arguments": json.dumps(arguments)}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    async def decide(self, case: Case) -> Decision:
        """Ask with `tools=`; the reply's tool_calls are the calls."""
        messages = [*self._start, {"role": "user", "content": said(case.request)}]
        done = self._llama.create_chat_completion(messages=messages, tools=self._tools, tool_choice="auto",
                                                  temperature=self._model.temperature, max_tokens=MAX_TOKENS)
        message = done["choices"][0]["message"]
        calls = []
        for call in message.get("tool_calls") or ():
            arguments, problem = parsed(call["function"]["arguments"], None)
            if problem is not None:
                return Decision((), call["function"]["arguments"], problem)
            calls.append(ToolCall(call["function"]["name"], arguments))
        raw = " ".join(c.describe() for c in calls) or (message.get("content") or "")
        return Decision(tuple(calls), raw)

    def close(self) -> None:
        """Nothing of its own: the model's contexts are closed with it."""


#: every way to ask the built-in model, by name; the last is a diagnosis (the right tool given,
#: only the arguments asked: how far the arguments alone fall short)
EMBEDDED_WAYS: dict[str, Callable[[Model], Way]] = {
    "json-grammar": lambda model: JsonGrammar(model, examples=False),
    "json-grammar+examples": lambda model: JsonGrammar(model, examples=True),
    "two-step": lambda model: TwoStep(model, examples=False),
    "two-step+examples": lambda model: TwoStep(model, examples=True),
    "two-step-scored": lambda model: ScoredTwoStep(model, examples=False),
    "two-step-scored+examples": lambda model: ScoredTwoStep(model, examples=True),
    "chatml-function-calling": lambda model: ChatmlFunctionCalling(model, examples=False),
    "chatml-function-calling+examples": lambda model: ChatmlFunctionCalling(model, examples=True),
    "told-the-tool+examples": lambda model: ToldTheTool(model, examples=True),
}


# ---------------------------------------------------------------------------------------------
# Ollama


class OllamaTools:
    """Ollama's native tools: the official client's chat with `tools=`, the calls from
    message.tool_calls."""

    def __init__(self, host: str, model: str, temperature: float) -> None:
        from ollama import AsyncClient

        self.name = f"ollama {model} (native tools)"
        self.diagnostic = False
        self._client = AsyncClient(host=host)
        self._model, self._temperature = model, temperature
        self._tools = [spec.function() for spec in BUILTIN_SPECS]

    async def capabilities(self) -> list[str]:
        """What /api/show says the model can do."""
        shown = await self._client.show(self._model)
        return list(shown.capabilities or [])

    async def decide(self, case: Case) -> Decision:
        """Ask once with the tools offered."""
        from ollama import RequestError, ResponseError

        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": said(case.request)}]
        try:
            response = await self._client.chat(model=self._model, messages=messages, tools=self._tools,
                                               options={"temperature": self._temperature})
        except (ResponseError, RequestError, ConnectionError) as exc:
            return Decision((), "", f"{type(exc).__name__}: {exc}")
        message = response.message
        calls = tuple(ToolCall(c.function.name, dict(c.function.arguments)) for c in message.tool_calls or ())
        return Decision(calls, " ".join(c.describe() for c in calls) or (message.content or ""))

    def close(self) -> None:
        """Nothing to free (the client's connections close with the loop)."""


# ---------------------------------------------------------------------------------------------
# running and the report


@dataclass
class Outcome:
    """A way's decisions over the table: the decision, verdict and seconds of each case."""

    name: str
    diagnostic: bool = False
    decisions: list[Decision] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    @property
    def right(self) -> int:
        """Cases decided right."""
        return self.verdicts.count("right")


async def measure(way: Way, cases: Sequence[Case]) -> Outcome:
    """Every case asked of `way`, timed and judged."""
    outcome = Outcome(way.name, way.diagnostic)
    for case in cases:
        started = time.perf_counter()
        try:
            decision = await way.decide(case)
        except Exception as exc:  # a failed request is counted, not fatal
            decision = Decision((), "", f"{type(exc).__name__}: {exc}")
        outcome.seconds.append(time.perf_counter() - started)
        outcome.decisions.append(decision)
        outcome.verdicts.append(judge(case, decision))
        if len(outcome.verdicts) % 10 == 0:
            log(f"{way.name}: {len(outcome.verdicts)}/{len(cases)} asked, {outcome.right} right")
    log(f"{way.name}: {outcome.right}/{len(cases)} right, median {statistics.median(outcome.seconds):.2f} s")
    return outcome


def shown(decision: Decision) -> str:
    """A decision on one line, safe in a markdown table."""
    text = (" ; ".join(c.describe() for c in decision.calls) or "no call") if decision.failed is None \
        else f"failed: {decision.failed}"
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "…"


def report(outcomes: Sequence[Outcome], cases: Sequence[Case], described: str, whole: bool) -> None:
    """The summary per way, the verdict per request, and (with `whole`) each way's calls."""
    needing = sum(c.needs_call for c in cases)
    none = sum(not c.expect for c in cases)
    print(f"{described}; {len(cases)} requests ({needing} need a call, {none} need none, "
          f"{len(cases) - needing - none} may call or not)\n")
    rows = []
    for o in outcomes:
        counts = [str(o.verdicts.count(v)) for v in VERDICTS[1:]]
        rows.append([o.name + (" (diagnosis)" if o.diagnostic else ""), f"{o.right}/{len(cases)}",
                     f"{o.right / len(cases):.0%}", *counts,
                     f"{statistics.median(o.seconds):.2f}", f"{percentile(o.seconds, 90):.2f}"])
    print(table(["way", "right", "%", *VERDICTS[1:], "median s", "p90 s"], rows))
    mark = {"right": "✓", "wrong tool": "T", "wrong arguments": "A", "false call": "F",
            "missed call": "M", "failed": "!"}
    print("per request (✓ right, T wrong tool, A wrong arguments, F false call, M missed call, "
          "! failed), ways in the order above\n")
    print(table(["#", "kind", "request", "right is", "verdicts"],
                [[str(i + 1), c.kind, c.request, c.describe().replace("|", "/"),
                  "".join(mark[o.verdicts[i]] for o in outcomes)] for i, c in enumerate(cases)]))
    if whole:
        for o in outcomes:
            print(f"### {o.name}\n")
            print(table(["#", "request", "decision", "verdict"],
                        [[str(i + 1), c.request, shown(o.decisions[i]), o.verdicts[i]]
                         for i, c in enumerate(cases)]))
    silent = sum(judge(c, Decision((), "")) == "right" for c in cases)
    print(f"a model that never calls a tool: {silent}/{len(cases)} = {silent / len(cases):.0%} right")
    ways = [o for o in outcomes if not o.diagnostic]
    if ways:
        best = max(ways, key=lambda o: (o.right, -statistics.median(o.seconds)))
        share = best.right / len(cases)
        print(f"best: {best.name}, {best.right}/{len(cases)} = {share:.1%} right "
              f"({'meets' if share >= BAR else 'below'} the {BAR:.0%} bar), "
              f"median {statistics.median(best.seconds):.2f} s a request")


async def run_embedded(args: argparse.Namespace, cases: Sequence[Case]) -> tuple[str, list[Outcome]]:
    """Every chosen way of asking the built-in (or given) GGUF model."""
    from elara.brain.embedded import resolve_embedded_model

    path = resolve_embedded_model(args.embedded_model)
    model = Model(path, args.threads, args.temperature)
    outcomes = []
    for name in args.method or list(EMBEDDED_WAYS):
        way = EMBEDDED_WAYS[name](model)
        try:
            outcomes.append(await measure(way, cases))
        finally:
            way.close()
            model.close()
    return (f"embedded {path.name}, {args.threads} threads, temperature {args.temperature:g}", outcomes)


async def run_ollama(args: argparse.Namespace, cases: Sequence[Case]) -> tuple[str, list[Outcome]]:
    """The table against an Ollama server's native tools."""
    from ollama import ResponseError

    way = OllamaTools(args.host, args.model, args.temperature)
    try:
        capabilities = await way.capabilities()
    except (ResponseError, ConnectionError) as exc:
        log(f"cannot ask {args.model} at {args.host}: {exc}")
        return "", []
    if "tools" not in capabilities:
        log(f"{args.model} does not list the tools capability ({capabilities}): Ollama will refuse")
    outcome = await measure(way, cases)
    described = (f"Ollama {args.host}, model {args.model} ({', '.join(capabilities)}), "
                 f"temperature {args.temperature:g}")
    return described, [outcome]


def main() -> int:
    """Measure and print the report; exit 1 when no way reaches the bar."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=("embedded", "ollama"), default="embedded")
    parser.add_argument("--host", default="http://127.0.0.1:11434", help="Ollama's address")
    parser.add_argument("--model", default="llama3.2:3b", help="the Ollama model")
    parser.add_argument("--embedded-model", help="a GGUF chat model (default: the built-in)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    parser.add_argument("--temperature", type=float, default=0.0,
                        help="sampling temperature (default 0: greedy)")
    parser.add_argument("--method", action="append", choices=list(EMBEDDED_WAYS),
                        help="a way to ask the embedded model (repeatable; default: every way)")
    parser.add_argument("--limit", type=int, help="only the first N requests (a quick look)")
    parser.add_argument("--whole", action="store_true", help="also show each way's call for every request")
    args = parser.parse_args()
    cases = CASES[:args.limit] if args.limit else CASES
    runner = run_ollama if args.provider == "ollama" else run_embedded
    described, outcomes = asyncio.run(runner(args, cases))
    if not outcomes:
        return 1
    report(outcomes, cases, described, args.whole)
    return 0 if any(o.right / len(cases) >= BAR for o in outcomes if not o.diagnostic) else 1


if __name__ == "__main__":
    sys.exit(main())
