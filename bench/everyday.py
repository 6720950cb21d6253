#!/usr/bin/env python3
"""Benchmark: everyday questions a person asks a voice assistant, answered by the model the way a
user's question is answered — right or wrong, and how long the reply takes.

    .venv/bin/python -m bench.everyday                      # the built-in model (SmolLM2-135M)
    .venv/bin/python -m bench.everyday --runs 3             # each question asked three times
    .venv/bin/python -m bench.everyday --provider ollama --host http://127.0.0.1:11434 --model llama3.2:3b
    .venv/bin/python -m bench.everyday --embedded-model models/other.gguf

Each question goes through the real answering path: the packaged default settings (the
`assistant` personality's system prompt and sampling, `LanguageModel.Options`), the prompt builder,
renderer and orchestrator from elara.service.answering, over a fresh encrypted store in a temporary
folder (the key resolved as Elara resolves it, from a temporary config home: never the user's own
config, key or history). Memory is off and no local commands are asked: every question reaches the
model, and the system prompt is the one a new user's first question gets. Each question is its own
conversation; a follow-up's conversation holds the previous exchange, stored as it would have been
said (with a right answer), so it measures only whether the model uses the previous turn.
Arithmetic, units and dates are left out: the intent matcher answers those without the model.

How a reply is judged (`Check`): right when at least one accepted pattern occurs in it and no
rejected one does; patterns are regular expressions matched as whole words, case-insensitively.
Accepted patterns are every wording of the right answer (and, for advice, each usual tip); rejected
patterns are the usual wrong answers a right reply has no reason to name, so a reply listing
several candidates, or the wrong one beside the right one, is wrong. A reply that only says it does
not know is wrong: this measures what the model knows. A failed request is wrong.

Timings come from the orchestrator's own turn timings: seconds from the start of the turn (the
user's words stored, the prompt built and rendered) to the first visible token and to the end of
the reply. The report (stdout) is markdown: one row per question, then the counts and timings.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import secrets
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import log, percentile, table
from elara.brain import personalities
from elara.brain.providers import EMBEDDED, OLLAMA, Provider
from elara.config import load_settings
from elara.conversation.messages import ChatMessage, ChatRole, PromptReady
from elara.conversation.store import ConversationStore
from elara.errors import ElaraError
from elara.service.answering import encryption_passphrase, load_language_model, make_orchestrator
from elara.service.slices import LanguageModelSlice
from elara.settings import Settings

#: how much of a reply the table shows
SHOWN_CHARS = 90


@dataclass(frozen=True)
class Check:
    """What makes a reply right: an accepted pattern in it and no rejected one (regular
    expressions, whole words, case-insensitive)."""

    accept: tuple[str, ...]
    reject: tuple[str, ...] = ()

    def judge(self, reply: str) -> bool:
        """True when the reply names an accepted answer and no rejected one."""
        return _any(self.accept, reply) and not _any(self.reject, reply)


def _any(patterns: Sequence[str], text: str) -> bool:
    # whole words by lookaround, not \b, so a pattern may end in punctuation ("no,")
    return any(re.search(rf"(?<!\w)(?:{p})(?!\w)", text, re.IGNORECASE) for p in patterns)


@dataclass(frozen=True)
class Case:
    """One question, how its reply is judged, and the exchange said before it (a follow-up's)."""

    kind: str
    question: str
    check: Check
    before: tuple[str, str] | None = None


def _case(kind: str, question: str, accept: tuple[str, ...], reject: tuple[str, ...] = (),
          before: tuple[str, str] | None = None) -> Case:
    return Case(kind, question, Check(accept, reject), before)


_MINUTES = r"(?:[3-9]|1[0-2]|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"

CASES: tuple[Case, ...] = (
    _case("knowledge", "What is the largest planet in our solar system?", ("jupiter",), ("neptune", "uranus")),
    _case("knowledge", "Who wrote Romeo and Juliet?", ("shakespeare",), ("marlowe", "dickens")),
    _case("knowledge", "What's the capital of Australia?", ("canberra",), ("sydney", "melbourne")),
    _case("knowledge", "What is the chemical symbol for gold?", ("au",), ("ag", "gd")),
    _case("knowledge", "How many legs does a spider have?", ("eight", "8")),
    _case("knowledge", "What is the tallest mountain in the world?", ("everest",), ("k2", "kilimanjaro")),
    _case("knowledge", "Who painted the Mona Lisa?", ("leonardo", "da vinci"),
          ("michelangelo", "picasso", "van gogh", "raphael")),
    _case("knowledge", "What gas do plants take in from the air?", ("carbon dioxide", "co2", "co₂"),
          ("nitrogen",)),
    _case("knowledge", "What is the longest river in the world?", ("nile", "amazon"),
          ("mississippi", "yangtze", "thames")),
    _case("knowledge", "Which planet is known as the Red Planet?", ("mars",), ("venus", "jupiter", "mercury")),
    _case("knowledge", "What language do people speak in Brazil?", ("portuguese",), ("spanish",)),
    _case("knowledge", "Who was the first person to walk on the Moon?", ("armstrong",), ("gagarin",)),
    _case("knowledge", "How many continents are there?", ("seven", "7")),
    _case("knowledge", "What is the largest ocean on Earth?", ("pacific",), ("atlantic", "indian", "arctic")),
    _case("knowledge", "What's the capital of Canada?", ("ottawa",), ("toronto", "montreal", "vancouver")),
    _case("knowledge", "Who discovered penicillin?", ("fleming",), ("pasteur",)),
    _case("knowledge", "What is the fastest land animal?", ("cheetah",), ("lion", "horse", "gazelle")),
    _case("knowledge", "What do bees make?", ("honey",)),
    _case("knowledge", "What is the main ingredient in guacamole?", ("avocados?",)),
    _case("knowledge", "Which organ pumps blood around the body?", ("heart",), ("liver", "lungs?", "kidneys?")),
    _case("practical", "How long should I boil an egg?",
          (rf"{_MINUTES}(?:\s*(?:to|-|–|or)\s*{_MINUTES})?\s*minutes?",), ("hours?",)),
    _case("practical", "What temperature does water boil at?", ("100", "hundred", "212")),
    _case("practical", "How often should I water a cactus?",
          ("weeks?", "months?", "monthly", "dry", "rarely", "sparingly", "infrequently"),
          ("times a week", "every day", "every other day", "daily", "twice a day")),
    _case("practical", "How can I get rid of hiccups?",
          ("breath", "hold", "water", "sugar", "drink", "swallow")),
    _case("practical", "What should I do if I burn my finger?", ("cool", "cold", "running water", "lukewarm")),
    _case("practical", "How long should I brush my teeth?", (r"(?:two|2)\s+(?:full\s+)?minutes",)),
    _case("practical", "How many hours of sleep does an adult need?", ("seven", "eight", "nine", "7", "8", "9"),
          (r"(?:1[1-9]|[2-9]\d)(?:\.\d+)?\s*hours",)),
    _case("practical", "How do I get a red wine stain out of a shirt?",
          ("salt", "baking soda", "cold water", "blot", "dish soap", "detergent", "hydrogen peroxide",
           "vinegar", "club soda", "stain remover")),
    _case("advice", "I can't fall asleep. Any tips?",
          ("screens?", "phone", "caffeine", "coffee", "alcohol", "dark", "quiet", "cool", "routine",
           "schedule", "same time", "relax", "relaxing", "breathing", "breaths?", "meditat\\w*", "read",
           "reading", "warm bath", "exercise", "heavy meals?", "light meal")),
    _case("advice", "Should I wear sunscreen on a cloudy day?",
          ("yes", "still", r"even (?:on|when|if) (?:a |it's |it is )?cloud\w*", r"through (?:the )?clouds"),
          ("no need", "don't need", "do not need", "not necessary", "unnecessary")),
    _case("advice", "How can I stay focused while working from home?",
          ("breaks?", "pomodoro", "distractions?", "workspace", "schedule", "routine", "notifications",
           "phone", "list", "goals?")),
    _case("advice", "Is it safe to eat raw chicken?",
          ("no[,.!]", "not safe", "unsafe", "salmonella", "food poisoning", "bacteria", "sick", "ill",
           "cook(?:ed|ing)?"),
          ("yes", "it's safe", "it is safe", "perfectly safe")),
    _case("definition", "What does photosynthesis mean?", ("light", "sunlight", "sun")),
    _case("definition", "What is a noun?", ("person", "place", "thing", "names?")),
    _case("definition", "What does procrastinate mean?",
          ("delay", "delaying", "put off", "putting off", "postpone", "postponing", "later")),
    _case("definition", "What is gravity?", ("force", "pulls?", "attracts?", "attraction")),
    _case("definition", "What is an allergy?", ("immune", "reaction", "reacts?", "overreacts?", "sensitivity")),
    _case("definition", "What is a synonym?", ("same", "similar")),
    _case("follow-up", "What else did he write?",
          ("hamlet", "macbeth", "othello", "king lear", "tempest", "midsummer", "twelfth night",
           "julius caesar", "merchant of venice", "sonnets", "much ado", "richard"),
          before=("Who wrote Romeo and Juliet?", "William Shakespeare wrote Romeo and Juliet.")),
    _case("follow-up", "What's the most famous tower there?", ("eiffel",),
          before=("What's the capital of France?", "The capital of France is Paris.")),
    _case("follow-up", "Which museum is it in?", ("louvre",),
          before=("Who painted the Mona Lisa?", "Leonardo da Vinci painted the Mona Lisa.")),
    _case("follow-up", "What is it made of?", ("hydrogen", "helium", "gas", "gases"),
          before=("What is the largest planet?", "Jupiter is the largest planet in our solar system.")),
    _case("follow-up", "Which country has most of it?", ("brazil",),
          before=("Tell me about the Amazon rainforest.",
                  "The Amazon is the largest tropical rainforest in the world, in South America.")),
    _case("follow-up", "What breed would suit a small flat?",
          ("pugs?", "chihuahuas?", "french bulldogs?", "cavalier", "shih tzus?", "dachshunds?",
           "yorkshire", "yorkies?", "maltese", "poodles?", "bichon", "havanese", "pomeranians?",
           "boston terriers?", "greyhounds?", "small breeds?"),
          before=("I'm thinking of getting a dog.",
                  "That's lovely! Dogs are loyal companions, but they need daily walks and attention.")),
)


@dataclass(frozen=True)
class Answer:
    """One reply: its text, whether it is right, and the turn's seconds to the first token and
    to the end (from the orchestrator's turn timings)."""

    reply: str
    right: bool
    first_token: float
    total: float


class Collected:
    """The sink: collects the reply's sentences (nothing is spoken)."""

    def __init__(self) -> None:
        self.sentences: list[str] = []

    async def say(self, sentence: str) -> None:
        """Keep one sentence."""
        self.sentences.append(sentence)


def bench_settings(args: argparse.Namespace, folder: Path) -> tuple[Settings, dict[str, str]]:
    """The packaged defaults with the provider chosen on the command line, a temporary config
    home and store root; and the environment they were read from (for the key)."""
    env = {"HOME": str(folder), "XDG_CONFIG_HOME": str(folder / "config"),
           "XDG_CACHE_HOME": str(folder / "cache"),
           "ELARA__Context__StorageRoot": str(folder / "store"),
           "ELARA__Context__EncryptionKey": secrets.token_urlsafe(32),
           "ELARA__LanguageModel__Provider": args.provider}
    optional = {"Host": args.host, "Model": args.model, "EmbeddedModel": args.embedded_model,
                "EmbeddedThreads": args.threads}
    env |= {f"ELARA__LanguageModel__{key}": str(value) for key, value in optional.items() if value is not None}
    env |= {f"ELARA__{key}": value for key, value in (item.split("=", 1) for item in args.set)}
    return load_settings(env=env), env


async def ask(settings: Settings, passphrase: str, llm: Provider, case: Case, root: Path) -> Answer:
    """One case in a conversation of its own: the previous exchange stored (a follow-up's),
    then the question asked through the orchestrator."""
    store = ConversationStore(root, passphrase)
    if case.before is not None:
        said = datetime.now(UTC) - timedelta(seconds=20)
        store.append(ChatMessage(ChatRole.USER, case.before[0], said, {"source": "voice"}))
        store.append(ChatMessage(ChatRole.ASSISTANT, case.before[1], said + timedelta(seconds=3),
                                 {"model": llm.model}))
    orchestrator = make_orchestrator(settings, store, llm, Collected())
    result = await orchestrator.on_prompt_ready(PromptReady(case.question, source="voice"))
    if not result.ok:
        reply = f"(failed: {result.error})"
        log(f"{case.question!r}: {reply}")
    else:
        reply = result.reply
    timings = result.timings
    first = timings.first_token if timings.first_token is not None else timings.total
    return Answer(reply, result.ok and case.check.judge(reply), first, timings.total)


async def run(args: argparse.Namespace, folder: Path) -> tuple[str, list[list[Answer]]]:
    """Load the model, warm it up, and ask every case `args.runs` times; the model's description
    and the answers, one list per run."""
    settings, env = bench_settings(args, folder)
    passphrase = encryption_passphrase(settings, env)
    # Blocking for the embedded model (it loads it), which is what the bench waits for anyway.
    llm = load_language_model(LanguageModelSlice.of(settings))
    try:
        info = await llm.check()
        await llm.warm_up()
        lm = settings.language_model
        options = personalities.model_options(personalities.resolve(lm.personality, settings.personalities),
                                              lm.options)
        described = (f"{info.name} ({info.parameter_size or '?'} parameters, {info.quantization or '?'}) "
                     f"from {llm.host}; personality {lm.personality}, options {options}")
        log(described)
        answers: list[list[Answer]] = []
        for number in range(args.runs):
            answers.append([])
            for index, case in enumerate(CASES):
                answer = await ask(settings, passphrase, llm, case, folder / f"run{number}-case{index}")
                answers[-1].append(answer)
            log(f"run {number + 1}: {sum(a.right for a in answers[-1])}/{len(CASES)} right")
        return described, answers
    finally:
        await llm.aclose()


def shortened(reply: str, whole: bool = False) -> str:
    """A reply on one line, safe in a markdown table: at most SHOWN_CHARS characters unless `whole`."""
    flat = " ".join(reply.split()).replace("|", "\\|")
    return flat if whole or len(flat) <= SHOWN_CHARS else flat[:SHOWN_CHARS - 1].rstrip() + "…"


def report(described: str, answers: list[list[Answer]], whole: bool = False) -> None:
    """The table (the first run's reply, ✓/✗ per run), the counts right and the timings."""
    print(f"model {described}; {len(CASES)} questions, {len(answers)} run(s)\n")
    rows = []
    for index, case in enumerate(CASES):
        marks = "".join("✓" if run[index].right else "✗" for run in answers)
        rows.append([str(index + 1), case.kind, case.question, shortened(answers[0][index].reply, whole), marks])
    print(table(["#", "kind", "question", "reply (first run)", "right"], rows))
    counts = [sum(a.right for a in run) for run in answers]
    print(f"right: {', '.join(f'{c}/{len(CASES)}' for c in counts)} per run"
          + (f" (median {statistics.median(counts):g})" if len(counts) > 1 else ""))
    kinds = dict.fromkeys(case.kind for case in CASES)
    for kind in kinds:
        indexes = [i for i, case in enumerate(CASES) if case.kind == kind]
        right = sum(run[i].right for run in answers for i in indexes)
        print(f"- {kind}: {right}/{len(indexes) * len(answers)}")
    firsts = [a.first_token for run in answers for a in run]
    totals = [a.total for run in answers for a in run]
    print(f"\nseconds over {len(firsts)} turns | median | p90\n--- | ---: | ---:")
    print(f"to the first token | {statistics.median(firsts):.2f} | {percentile(firsts, 90):.2f}")
    print(f"to the whole reply | {statistics.median(totals):.2f} | {percentile(totals, 90):.2f}")


def main() -> int:
    """Ask the everyday questions and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=(EMBEDDED, OLLAMA), default=EMBEDDED,
                        help="LanguageModel.Provider (default: the built-in embedded model)")
    parser.add_argument("--host", help="LanguageModel.Host: Ollama's address")
    parser.add_argument("--model", help="LanguageModel.Model: the Ollama model (default llama3.2:3b)")
    parser.add_argument("--embedded-model", help="LanguageModel.EmbeddedModel: a GGUF (default: the built-in)")
    parser.add_argument("--threads", type=int, help="LanguageModel.EmbeddedThreads (default: up to 4)")
    parser.add_argument("--runs", type=int, default=3,
                        help="passes over the questions (sampling is not greedy: see the docs)")
    parser.add_argument("--whole", action="store_true", help="show whole replies, not their start")
    parser.add_argument("--set", action="append", default=[], metavar="Section__Key=VALUE",
                        help='a setting, e.g. LanguageModel__Options={"temperature": 0.2}')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="elara-everyday-") as tmp:
        try:
            described, answers = asyncio.run(run(args, Path(tmp)))
        except ElaraError as exc:  # no Ollama, no model file: say so, as Elara would
            log(f"cannot ask {args.provider}: {exc.message}")
            return 1
    report(described, answers, args.whole)
    return 0


if __name__ == "__main__":
    sys.exit(main())
