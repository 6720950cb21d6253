"""One conversational turn: store the user's words, build and render the prompt, stream the reply
sentence by sentence to a sink, store the reply. Errors become a log line or a spoken apology here."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from elara.brain.acting import DECLINED, Acting, PendingCall, ToolTurn
from elara.brain.ollama import PromptTokens
from elara.brain.sentences import SentenceSplitter
from elara.brain.thinking import ThinkFilter
from elara.conversation.messages import ChatMessage, ChatRole, PromptReady
from elara.conversation.prompts import PromptBuilder, utc_now
from elara.conversation.records import SUPERSEDED
from elara.conversation.render import ChatRequest, GenerateRequest, PromptRenderer
from elara.errors import CommandError, ContextError, ElaraError, LanguageModelError, StoreError
from elara.skills.commands import LocalCommands, LocalReply
from elara.skills.intents import yes_or_no
from elara.tools.calls import ToolCall

log = logging.getLogger(__name__)


class SentenceSink(Protocol):
    """Receives the reply one complete sentence at a time (text mode prints, voice mode speaks)."""

    async def say(self, sentence: str) -> None:
        """Deliver one sentence."""


@runtime_checkable
class HeardSink(Protocol):
    """A sink whose reply is heard over time (speech): it can be waited for, and cut short."""

    def heard_text(self) -> str:
        """What of the current reply has been heard so far."""

    async def finish(self) -> None:
        """Return once everything said has been heard."""


@runtime_checkable
class CutShortSink(Protocol):
    """A heard sink that says when a reply's audio stopped short on its own (the speaker failed)."""

    def cut_short(self) -> str | None:
        """What was heard of the last reply if its audio stopped short, else None."""


class LanguageModel(Protocol):
    """Streams the reply to a rendered request as text fragments."""

    @property
    def model(self) -> str:
        """The model's name (stored with each reply)."""

    def stream(self, request: ChatRequest | GenerateRequest) -> AsyncIterator[str | ToolCall]:
        """Text fragments of the reply, and the tool calls it makes (for a request that offers
        tools); raises LanguageModelError."""


class MessageStore(Protocol):
    """Where turns are kept."""

    def append(self, message: ChatMessage) -> object:
        """Store one complete message; where it is kept."""

    def annotate(self, path: Any, metadata: Mapping[str, str]) -> None:
        """Add metadata to the message kept at `path`."""


class TurnObserver(Protocol):
    """Told when a turn starts and ends (memory work waits for the gaps between turns)."""

    def turn_started(self) -> None:
        """A turn began: background work that competes with it for the model should pause."""

    def turn_finished(self, user: ChatMessage, reply: ChatMessage | None) -> None:
        """A turn ended; `reply` is None when the model failed. Must not block."""

    def turn_abandoned(self) -> None:
        """A turn started but was cut off (barge-in, or a speculative reply dropped): no work for it."""


@dataclass(frozen=True)
class TurnTimings:
    """Seconds from the start of the turn to its milestones (None when never reached)."""

    prompt_built: float | None
    first_token: float | None
    first_sentence: float | None
    total: float


@dataclass(frozen=True)
class TurnResult:
    """What became of one turn."""

    reply: str
    sentences: int
    error: ElaraError | None
    user_stored: bool
    assistant_stored: bool
    timings: TurnTimings
    intent: str | None = None  # a local command answered it (no model request)
    expects_answer: bool = False  # the reply asked a question
    quiet: bool = False  # the person asked for quiet ("stop"): no conversation follows
    prompt_tokens: PromptTokens | None = None  # how the model read the prompt, where it says

    @property
    def ok(self) -> bool:
        """True when the model answered and nothing went wrong on the way."""
        return self.error is None


@dataclass
class _Streamed:
    """A reply as it streams: its visible text, when its milestones came, how much was said."""

    started: float
    fragments: list[str] = field(default_factory=list)
    first_token: float | None = None
    first_sentence: float | None = None
    spoken: int = 0
    said: list[str] = field(default_factory=list)
    error: LanguageModelError | None = None
    prompt_tokens: PromptTokens | None = None

    @property
    def reply(self) -> str:
        """The visible text so far, stripped."""
        return "".join(self.fragments).strip()


class Orchestrator:
    """Handles PromptReady events one at a time."""

    def __init__(self, *, store: MessageStore, builder: PromptBuilder, renderer: PromptRenderer,
                 llm: LanguageModel, sink: SentenceSink, context_size: int,
                 clock: Callable[[], datetime] = utc_now,
                 monotonic: Callable[[], float] = time.monotonic,
                 splitter: Callable[[], SentenceSplitter] = SentenceSplitter,
                 redact: Callable[[str], str] | None = None,
                 observers: list[TurnObserver] | None = None,
                 commands: LocalCommands | None = None, room: str | None = None,
                 acting: Acting | None = None) -> None:
        self.store = store
        self.builder = builder
        self.renderer = renderer
        self.llm = llm
        self.sink = sink
        self.context_size = context_size
        self._clock = clock
        self._monotonic = monotonic
        self._splitter = splitter
        #: applied to the user's words before they are stored or sent, and to the reply before
        #: it is stored (e.g. masking card numbers)
        self.redact = redact or (lambda text: text)
        self.observers = list(observers or [])
        #: everyday commands answered without the model (None: the model answers everything)
        self.commands = commands
        #: the satellite's room this orchestrator answers in (its turns' `metadata.room`)
        self.room = room
        #: the tool calls the model makes (None: it is offered no tools)
        self.acting = acting
        self._lock = asyncio.Lock()
        #: where the question the person went on with is kept (its reply was dropped): the whole
        #: question, stored next, supersedes it
        self._gone_on: object | None = None
        self._preparing: asyncio.Task[None] | None = None
        self._prepare_again = False

    async def on_prompt_ready(self, event: PromptReady, *, commit: asyncio.Event | None = None,
                              ended: asyncio.Event | None = None) -> TurnResult:
        """Run one turn for the user's text; never raises for store, context or model failures.

        With `commit`, the turn is speculative: the reply is worked out (and said to the sink,
        which the caller holds) at once, but the user's words are stored only once `ended` is set
        (the turn judged over; `commit` when not given), and the reply, and what it does, once
        `commit` is (the person can no longer go on). Cancelled before `ended`, the turn leaves
        nothing stored; after it, its question stays, until a `continues` question supersedes it."""
        async with self._lock:
            try:
                result = await self._turn(event, commit, ended or commit)
            except asyncio.CancelledError:
                for observer in self.observers:
                    observer.turn_abandoned()
                raise
        self.prepare()
        return result

    def prepare(self) -> None:
        """Have the model read the next turn's prompt up to its question while nobody waits for
        it (after a reply, when memory jobs changed the prompt, and at the wake word), where the
        model can (the built-in one)."""
        prefill = getattr(self.llm, "prefill", None)
        if prefill is None:
            return
        if self._preparing is not None and not self._preparing.done():
            self._prepare_again = True  # the prompt may have changed since that reading began
            return
        if not self._lock.locked():
            self._preparing = asyncio.create_task(self._prefill(prefill), name="prepare-turn")

    async def _prefill(self, prefill: Callable[[ChatRequest | GenerateRequest], Awaitable[None]]) -> None:
        self._prepare_again = True
        while self._prepare_again and not self._lock.locked():
            self._prepare_again = False
            try:
                prompt = await self.builder.build("", self.context_size, measured=False)
                await prefill(self.renderer.render(prompt))
            except (ElaraError, OSError) as exc:
                # Only time is lost: the turn reads its whole prompt itself.
                log.debug("could not prepare the next turn: %s", exc)
                return

    async def _turn(self, event: PromptReady, commit: asyncio.Event | None,
                    ended: asyncio.Event | None) -> TurnResult:
        started = self._monotonic()
        log.debug("user said: %s", event.text)
        text = self.redact(event.text)
        pending = self.acting.answer(yes_or_no(text)) if self.acting is not None else None
        local = self.commands.answer(text) if self.commands is not None and pending is None else None
        if local is not None:
            return await self._local(local, text, event, started, commit, ended)
        for observer in self.observers:
            observer.turn_started()
        user = ChatMessage(ChatRole.USER, text, self._clock(), self._meta({"source": event.source}))
        question = _Question(user, event.continues, ended, self._store_question)
        if ended is None:
            await asyncio.wait([question.stored])  # stored before the prompt is built, as always
        records = _Records(self._append, after=question.stored)
        turn = ToolTurn(say=self.sink.say, record=records.add,
                        committed=commit.wait if commit is not None else _now)
        try:
            return await self._answer(text, user, started, question.stored, turn, records, pending)
        except asyncio.CancelledError:
            if commit is None or commit.is_set():
                await records.written()  # what the tools did goes before what was heard of her
                await self._keep_interrupted(question.stored)
            else:
                if pending is not None and self.acting is not None:
                    self.acting.pending = pending  # a dropped speculative turn answered nothing
                await self._dropped(question)
            raise
        finally:
            if commit is not None and not commit.is_set():
                records.cancel()  # what a dropped reply did with tools is not kept

    async def _answer(self, text: str, user: ChatMessage, started: float,
                      stored_user: asyncio.Task[bool], turn: ToolTurn, records: _Records,
                      pending: PendingCall | None) -> TurnResult:
        if pending is not None:
            return await self._confirmed(user, started, stored_user, turn, records, pending)
        try:
            # Stamped with the time the words are stored with, so that this turn's question reads
            # the same in the next turn's history (the model's cache of it stays valid).
            prompt = await self.builder.build(text, self.context_size, at=user.timestamp_utc)
        except ContextError as exc:
            log.warning("answering without history: %s", exc)
            prompt = await self.builder.build(text, self.context_size, with_context=False,
                                              at=user.timestamp_utc)
        request = self.renderer.render(prompt)
        if self.acting is not None:
            request = self.acting.offer(request, self.llm)
        built = self._monotonic() - started
        streamed = await self._reply(request, _Streamed(started), turn)
        return await self._finish(user, stored_user, streamed, built, len(prompt.context), turn, records)

    async def _reply(self, request: ChatRequest | GenerateRequest, streamed: _Streamed,
                     turn: ToolTurn) -> _Streamed:
        """Stream the reply, running the tools it calls round by round; a model failure is said."""
        try:
            start = 0
            while True:
                calls = await self._stream(request, streamed)
                if not calls or self.acting is None or not isinstance(request, ChatRequest):
                    break
                said = "".join(streamed.fragments[start:]).strip()
                if said:
                    streamed.fragments.append(" ")  # the next round's words are a new sentence
                start = len(streamed.fragments)
                request = await self.acting.act(turn, request, said, calls)
            if not streamed.reply:
                # A reply that was only thinking (or an unclosed think block) is empty too.
                raise LanguageModelError(f"model {self.llm.model} gave an empty reply", code="model_error")
            streamed.prompt_tokens = getattr(self.llm, "last_prompt", None)
        except LanguageModelError as exc:
            streamed.error = exc
            log.error("language model failed (%s): %s", exc.code, exc.message)
            await self.sink.say(exc.apology)
        return streamed

    async def _confirmed(self, user: ChatMessage, started: float, stored_user: asyncio.Task[bool],
                         turn: ToolTurn, records: _Records, pending: PendingCall) -> TurnResult:
        """The person answered the question about a pending call: run it and let the model say
        how it went, or say it is not done."""
        assert self.acting is not None
        streamed = _Streamed(started)
        if pending.yes:
            request = await self.acting.confirmed(turn, pending)
            streamed = await self._reply(request, streamed, turn)
        else:
            self.acting.declined(turn, pending)
            streamed.fragments.append(DECLINED)
            streamed.first_token = self._monotonic() - started
            await self._say_streamed(DECLINED, streamed)
        return await self._finish(user, stored_user, streamed, None, 0, turn, records)

    async def _stream(self, request: ChatRequest | GenerateRequest, streamed: _Streamed) -> list[ToolCall]:
        """Stream one reply into `streamed`, each sentence said as it completes; the tool calls
        it made. Raises LanguageModelError."""
        # A thinking model's reasoning is dropped before sentences are cut, whichever provider
        # streamed it: it is never spoken, stored, or counted as the reply.
        think = ThinkFilter()
        splitter = self._splitter()
        calls: list[ToolCall] = []
        async for fragment in self.llm.stream(request):
            if isinstance(fragment, ToolCall):
                calls.append(fragment)
                continue
            visible = think.feed(fragment)
            if not visible:
                continue
            # first_token times the first VISIBLE text: reasoning the user never hears is
            # still waiting, not a response.
            self._received(visible, streamed)
            for sentence in splitter.feed(visible):
                await self._say_streamed(sentence, streamed)
        rest = think.flush()
        if rest:
            self._received(rest, streamed)
        if think.thought:
            log.debug("dropped the thinking of %s from its reply", self.llm.model)
        for sentence in splitter.feed(rest) + splitter.flush():
            await self._say_streamed(sentence, streamed)
        return calls

    def _received(self, visible: str, streamed: _Streamed) -> None:
        if streamed.first_token is None:
            streamed.first_token = self._monotonic() - streamed.started
        streamed.fragments.append(visible)

    async def _say_streamed(self, sentence: str, streamed: _Streamed) -> None:
        if streamed.first_sentence is None:
            streamed.first_sentence = self._monotonic() - streamed.started
        await self.sink.say(sentence)
        streamed.spoken += 1
        streamed.said.append(sentence)

    async def _finish(self, user: ChatMessage, stored_user: asyncio.Task[bool], streamed: _Streamed,
                      built: float | None, context_messages: int, turn: ToolTurn,
                      records: _Records) -> TurnResult:
        """Store the turn once the reply is heard, tell the observers, log and return its result."""
        reply, error = streamed.reply, streamed.error
        if isinstance(self.sink, HeardSink):
            # The reply is stored once heard: cut short before that, only what was heard is kept.
            await self.sink.finish()
        cut = self.sink.cut_short() if isinstance(self.sink, CutShortSink) else None
        if turn.asked and self.acting is not None:
            # The window for the yes starts once the question is heard; after a failure (an
            # apology, not the question) nothing waits for one.
            if error is None:
                self.acting.asked()
            else:
                self.acting.pending = None
        await turn.committed()  # the person going on drops the reply: it is kept only after that
        user_stored = await asyncio.shield(stored_user)  # the user's words go first, whatever became of the reply
        await records.written()  # then what the tools did
        assistant_stored = False
        answer = None
        if error is None and cut is None:
            log.debug("assistant said: %s", reply)
            answer = ChatMessage(ChatRole.ASSISTANT, self.redact(reply), self._clock(),
                                 self._meta({"model": self.llm.model}))
            assistant_stored = await self._append(answer)
        else:
            # Cut short — the speaker failed, or the stream broke — what was said of it is kept,
            # marked as a barged reply is; the rest was never heard, and an apology is not the model's.
            said = cut if cut is not None else " ".join(streamed.said)
            if said and user_stored:
                assistant_stored = await self._store_interrupted(said)
        for observer in self.observers:
            observer.turn_finished(user, answer)
        timings = TurnTimings(prompt_built=built, first_token=streamed.first_token,
                              first_sentence=streamed.first_sentence,
                              total=self._monotonic() - streamed.started)
        read = streamed.prompt_tokens
        log.info("turn %s: %d context messages, prompt %s (%s tokens evaluated, %s reused), "
                 "first token %s, first sentence %s, total %.3f s, %d sentences, %d tool rounds",
                 "done" if error is None else f"failed ({error.code})", context_messages, _seconds(built),
                 "?" if read is None else read.evaluated,
                 "?" if read is None or read.reused is None else read.reused,
                 _seconds(streamed.first_token), _seconds(streamed.first_sentence), timings.total,
                 streamed.spoken, turn.rounds)
        return TurnResult(reply=reply if error is None else "", sentences=streamed.spoken, error=error,
                          user_stored=user_stored, assistant_stored=assistant_stored,
                          timings=timings, prompt_tokens=read, expects_answer=turn.asked)

    async def _keep_interrupted(self, stored_user: asyncio.Task[bool]) -> None:
        """A reply cut short (barge-in, "stop"): store what the user heard of it, never the rest."""
        heard = self.sink.heard_text() if isinstance(self.sink, HeardSink) else ""
        if not heard:
            return
        if not await asyncio.shield(stored_user):  # the user's words go first
            return
        await self._store_interrupted(heard)

    async def _store_interrupted(self, said: str) -> bool:
        """Store the part of a reply that was said before it was cut short, marked interrupted."""
        log.info("reply interrupted: storing the %d words said", len(said.split()))
        log.debug("assistant said (interrupted): %s", said)
        return await self._append(ChatMessage(ChatRole.ASSISTANT, self.redact(said), self._clock(),
                                              self._meta({"model": self.llm.model, "interrupted": "true"})))

    async def _local(self, local: LocalReply, text: str, event: PromptReady, started: float,
                     commit: asyncio.Event | None, ended: asyncio.Event | None) -> TurnResult:
        """A local command's turn: no model, the same storing rules. Done before it is said when
        the turn is already committed; said first and done on commit when speculative."""
        log.info("local command: %s", local.intent)
        user = ChatMessage(ChatRole.USER, text, self._clock(),
                           self._meta({"source": event.source, "intent": local.intent}))
        question = _Question(user, event.continues, ended, self._store_question) if local.store else None
        stored_user = question.stored if question is not None else None
        reply = local.text
        error: CommandError | None = None
        try:
            if commit is None:
                error = await self._act(local)
            first = await self._say_all(reply if error is None else error.apology or "")
            if commit is not None:
                if first is None and isinstance(self.sink, HeardSink):
                    # Nothing to say ("stop"): the turn need not wait for audio that never comes.
                    await self.sink.finish()
                await commit.wait()
                error = await self._act(local)
                if error is not None:
                    await self._say_all(error.apology or "")
        except asyncio.CancelledError:
            if question is not None and commit is not None and not commit.is_set():
                await self._dropped(question)
            raise
        user_stored = await asyncio.shield(stored_user) if stored_user is not None else False
        assistant_stored = False
        if local.store and error is None and reply:
            log.debug("assistant said: %s", reply)
            answer = ChatMessage(ChatRole.ASSISTANT, reply, self._clock(), self._meta({"intent": local.intent}))
            assistant_stored = await self._append(answer)
        said = None if first is None else first - started
        return TurnResult(reply=reply if error is None else "", sentences=int(first is not None),
                          error=error, user_stored=user_stored, assistant_stored=assistant_stored,
                          timings=TurnTimings(prompt_built=None, first_token=said, first_sentence=said,
                                              total=self._monotonic() - started),
                          intent=local.intent, expects_answer=local.expects_answer, quiet=not local.store)

    async def _act(self, local: LocalReply) -> CommandError | None:
        if local.act is None:
            return None
        try:
            await local.act()
        except (StoreError, OSError) as exc:
            log.error("could not carry out %s: %s", local.intent, exc)
            return CommandError(f"{local.intent}: {exc}")
        return None

    async def _say_all(self, text: str) -> float | None:
        """Say `text` sentence by sentence; when the first sentence went to the sink (or None)."""
        splitter = self._splitter()
        first = None
        for sentence in splitter.feed(text) + splitter.flush():
            if first is None:
                first = self._monotonic()
            await self.sink.say(sentence)
        return first

    def _meta(self, metadata: dict[str, str]) -> dict[str, str]:
        """A record's metadata, with the room it was said in when that is a satellite's."""
        return metadata if self.room is None else {**metadata, "room": self.room}

    async def _append(self, message: ChatMessage) -> bool:
        try:
            await asyncio.to_thread(self.store.append, message)
            return True
        except (StoreError, OSError) as exc:
            # The conversation goes on; only its record is lost, and the log says so.
            log.error("could not store the %s turn: %s", message.role.slug, exc)
            return False

    async def _store_question(self, question: _Question) -> bool:
        """Store the user's words once the turn is judged over; if they go on the question the
        person went on with, mark that one superseded after them (no instant without the words)."""
        if question.ended is not None:
            await question.ended.wait()
        gone_on, self._gone_on = self._gone_on, None
        try:
            question.where = await asyncio.to_thread(self.store.append, question.message)
        except (StoreError, OSError) as exc:
            log.error("could not store the user turn: %s", exc)
            return False
        log.info("stored the person's question (%d words)", len(question.message.content.split()))
        if question.continues and gone_on is not None:
            try:
                await asyncio.to_thread(self.store.annotate, gone_on, {SUPERSEDED: "true"})
            except (StoreError, OSError, ValueError) as exc:
                log.error("could not mark the question the person went on with as superseded: %s", exc)
        return True

    async def _dropped(self, question: _Question) -> None:
        """The reply was dropped before its commit: the question stays stored if the turn had
        ended (the person went on with it: the whole question will supersede it), else it is not."""
        if question.ended is None or not question.ended.is_set():
            question.stored.cancel()
            return
        if await asyncio.shield(question.stored) and question.where is not None:
            self._gone_on = question.where


class _Question:
    """A turn's user record, written by its own task (`stored`) once the turn is judged over."""

    def __init__(self, message: ChatMessage, continues: bool, ended: asyncio.Event | None,
                 store: Callable[[_Question], Coroutine[Any, Any, bool]]) -> None:
        self.message = message
        self.continues = continues
        self.ended = ended
        self.where: object | None = None  # where it is kept, once stored
        self.stored: asyncio.Task[bool] = asyncio.create_task(store(self), name="store-user")


class _Records:
    """A turn's tool records, written in order after the user's words, once the turn is committed."""

    def __init__(self, append: Callable[[ChatMessage], Awaitable[bool]],
                 after: asyncio.Task[bool]) -> None:
        self._append = append
        self.after = after
        self._last: asyncio.Task[bool] | None = None

    def add(self, message: ChatMessage) -> None:
        """Write `message` after everything added before it."""
        previous = self._last or self.after

        async def write() -> bool:
            # shielded: dropping the records must not drop the user's words before them
            if previous is not None and not await asyncio.shield(previous):
                return False  # what came before was never stored: neither is this
            return await self._append(message)

        self._last = asyncio.create_task(write(), name="store-tool-record")

    async def written(self) -> None:
        """Wait for the records added so far."""
        if self._last is not None:
            await self._last

    def cancel(self) -> None:
        """The turn was dropped before its commit: its records are not written."""
        if self._last is not None:
            self._last.cancel()


async def _now() -> None:
    """A turn that is committed already waits for nothing."""


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"
