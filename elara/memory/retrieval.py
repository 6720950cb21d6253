"""Retrieval: older turns similar to what the user just said, found by embedding vectors.

Each conversation turn gets one EMBEDDING record in the store (so its vector is encrypted like
everything else): content = base64 of the vector as little-endian float32 bytes; metadata
kind=embedding, model=<the embedding model>, of=<the turn's key>, role=<user|assistant>. A turn's
key is its timestamp to the millisecond plus its role, "2026-11-22T06:55:11.123Z/user", which is
what the store keeps of it. Vectors made with another model can't be compared with this model's,
so they are ignored; changing Memory.EmbeddingModel means embedding the history again. A vector
is deleted with its turn (elara.memory.retention), however new the vector itself is.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Protocol

import numpy as np

from elara.conversation.context import TURN_ROLES, read_turns
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.records import superseded
from elara.conversation.store import StoredMessage
from elara.errors import LanguageModelError
from elara.memory.records import EMBEDDING, KIND, OF, key_of, kind_of, memory_record

log = logging.getLogger(__name__)

#: Metadata kind of the System-role context messages this provider returns (never stored).
RETRIEVED = "retrieved"
#: Turns embedded per /api/embed call: a backfill of a long history must not be one huge request.
EMBED_BATCH = 64
#: Some embedding models are trained with task prefixes and rank noticeably worse without them:
#: base model name -> (prefix for stored turns, prefix for the query).
TASK_PREFIXES: dict[str, tuple[str, str]] = {
    "nomic-embed-text": ("search_document: ", "search_query: "),
    "mxbai-embed-large": ("", "Represent this sentence for searching relevant passages: "),
}

_VECTOR_DTYPE = np.dtype("<f4")


class Embedder(Protocol):
    """The part of the language model adapter the index needs."""

    async def embed(self, texts: list[str], model: str) -> list[list[float]]:
        """One vector per text; LanguageModelError on failure."""


class RecordStore(Protocol):
    """The part of the conversation store the index and the provider need."""

    def append(self, message: ChatMessage):
        """Write one message."""

    def read_tail(self, n: int, roles: Collection[ChatRole] | None = None) -> list[ChatMessage]:
        """The last n messages (of these roles), oldest first."""

    def iter_messages(self, roles: Collection[ChatRole] | None = None) -> Iterator[StoredMessage]:
        """Every readable message (of these roles), oldest first."""


def encode_vector(vector: Sequence[float]) -> str:
    """A vector as base64 of its little-endian float32 bytes (an EMBEDDING record's content)."""
    return base64.b64encode(np.asarray(vector, dtype=_VECTOR_DTYPE).tobytes()).decode("ascii")


def decode_vector(content: str) -> np.ndarray:
    """The vector in an EMBEDDING record's content; ValueError when it isn't one."""
    try:
        raw = base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not base64: {exc}") from None
    if not raw or len(raw) % _VECTOR_DTYPE.itemsize:
        raise ValueError(f"{len(raw)} bytes is not a whole number of float32 values")
    vector = np.frombuffer(raw, dtype=_VECTOR_DTYPE)
    if not np.all(np.isfinite(vector)):
        raise ValueError("the vector holds NaN or infinity")
    return vector


def same_model(a: str, b: str) -> bool:
    """Whether two Ollama model names mean the same model (`:latest` is implied)."""
    return _canonical(a) == _canonical(b)


def _canonical(name: str) -> str:
    name = name.strip()
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def task_prefixes(model: str) -> tuple[str, str]:
    """The (document, query) prefixes `model` expects; empty for models without any."""
    base = model.strip().rsplit("/", 1)[-1].split(":", 1)[0]
    return TASK_PREFIXES.get(base, ("", ""))


@dataclass(frozen=True)
class _Entry:
    """One indexed turn: its unit-length vector and the turn itself."""

    vector: np.ndarray
    turn: ChatMessage


@dataclass(frozen=True)
class _Loaded:
    """What a pass over the store found."""

    entries: dict[str, _Entry]
    unindexed: list[ChatMessage]
    foreign: dict[str, int]
    orphans: int
    bad: int


class EmbeddingIndex:
    """The turns' embedding vectors, kept in memory and persisted as EMBEDDING records."""

    def __init__(self, store: RecordStore, llm: Embedder, model: str, *,
                 clock: Callable[[], datetime] | None = None) -> None:
        """An empty index for vectors from `model`; call load() to read the stored ones."""
        self._store = store
        self._llm = llm
        self.model = model
        self._clock = clock or (lambda: datetime.now(UTC))
        self._document_prefix, self._query_prefix = task_prefixes(model)
        # Writers (add storing vectors, reload) take turns under this lock and replace these
        # dicts instead of changing them, so a search on the event loop needs no lock.
        self._writes = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        self._unindexed: dict[str, ChatMessage] = {}
        self._generation = 0  # counts reloads: an add that straddles one checks its turns again
        # (the entries it was built from, their keys, a matrix of their vectors)
        self._matrix: tuple[dict[str, _Entry], list[str], np.ndarray] | None = None

    def __len__(self) -> int:
        """How many turns have a vector."""
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        """Whether the turn with this key has a vector."""
        return key in self._entries

    def unindexed(self) -> list[ChatMessage]:
        """Turns the last load() found without a vector from this model and not added since,
        oldest first."""
        return sorted(self._unindexed.values(), key=lambda m: m.timestamp_utc)

    async def load(self) -> int:
        """Read this model's vectors and the turns they belong to from the store; returns how many."""
        return await asyncio.to_thread(self.reload)

    def writing(self) -> AbstractContextManager[object]:
        """Hold vector writes while the caller deletes from the store and reload()s (blocking):
        a vector being stored meanwhile waits, then sees the reload and skips deleted turns."""
        return self._writes

    def reload(self) -> int:
        """load(), blocking: afterwards no vector of a turn gone from the store is searched,
        and none is added for it."""
        with self._writes:
            loaded = self._read_store()
            self._entries = loaded.entries
            self._unindexed = {key_of(m): m for m in loaded.unindexed}
            self._generation += 1
        for model, count in sorted(loaded.foreign.items()):
            log.info("ignoring %d stored embeddings made with %s: Memory.EmbeddingModel is %s, "
                     "so those turns need embedding again", count, model, self.model)
        if loaded.orphans:
            log.debug("%d stored embeddings belong to turns that are gone", loaded.orphans)
        if loaded.bad:
            log.warning("skipped %d unreadable embedding records in the conversation store", loaded.bad)
        log.info("loaded %d embeddings (%s); %d turns have none yet", len(self._entries),
                 self.model, len(self._unindexed))
        return len(self._entries)

    def _read_store(self) -> _Loaded:
        """One pass over every readable message (blocking)."""
        vectors: dict[str, np.ndarray] = {}
        turns: dict[str, ChatMessage] = {}
        foreign: dict[str, int] = {}
        bad = 0
        for stored in self._store.iter_messages():
            message = stored.message
            if message.role in TURN_ROLES:
                if not superseded(message):
                    turns[key_of(message)] = message
                continue
            if kind_of(message) != EMBEDDING:
                continue
            model = message.metadata.get("model", "")
            of = message.metadata.get(OF)
            if not same_model(model, self.model):
                foreign[model] = foreign.get(model, 0) + 1
                continue
            try:
                if not of:
                    raise ValueError("no `of` key")
                vectors[of] = decode_vector(message.content)  # a later record for a turn wins
            except ValueError as exc:
                bad += 1
                log.debug("embedding record %s is unreadable: %s", stored.path.name, exc)
        entries: dict[str, _Entry] = {}
        for key, vector in vectors.items():
            turn = turns.get(key)
            if turn is not None:
                entries[key] = _Entry(_unit(vector), turn)
        unindexed = [turn for key, turn in turns.items() if key not in entries]
        orphans = sum(1 for key in vectors if key not in turns)
        return _Loaded(entries, unindexed, foreign, orphans, bad)

    async def add(self, turns: Sequence[ChatMessage]) -> int:
        """Embed these turns and store one EMBEDDING record each; returns how many were added.
        Turns already indexed, System messages, empty turns and turns deleted meanwhile are left
        out."""
        generation = self._generation
        wanted: dict[str, ChatMessage] = {}
        for turn in turns:
            key = key_of(turn)
            if (turn.role in TURN_ROLES and turn.content.strip() and key not in self._entries
                    and not superseded(turn)):
                wanted[key] = turn
        items = list(wanted.items())
        added = 0
        for start in range(0, len(items), EMBED_BATCH):
            batch = items[start:start + EMBED_BATCH]
            texts = [self._document_prefix + turn.content for _, turn in batch]
            vectors = await self._llm.embed(texts, self.model)
            if len(vectors) != len(batch):
                raise LanguageModelError(
                    f"the embedding model {self.model} returned {len(vectors)} vectors for "
                    f"{len(batch)} texts", code="model_error")
            done = [(key, turn, vector) for (key, turn), vector in zip(batch, vectors)]
            added += await asyncio.to_thread(self._store_vectors, done, generation)
        if added:
            log.debug("embedded %d turns with %s", added, self.model)
        return added

    def _store_vectors(self, done: list[tuple[str, ChatMessage, list[float]]],
                       generation: int) -> int:
        """Append one EMBEDDING record per turn and index it; returns how many (blocking)."""
        with self._writes:
            if self._generation != generation:
                # The store was read again while the model embedded (retention, a purge): a turn
                # missing from that reading is deleted, and its vector must not outlive it.
                done = [item for item in done if item[0] in self._unindexed]
            done = [item for item in done if item[0] not in self._entries]
            entries, unindexed = dict(self._entries), dict(self._unindexed)
            try:
                for key, turn, vector in done:
                    self._store.append(memory_record(
                        EMBEDDING, encode_vector(vector), self._clock(), model=self.model,
                        **{OF: key, "role": turn.role.slug}))
                    entries[key] = _Entry(_unit(np.asarray(vector, dtype=_VECTOR_DTYPE)), turn)
                    unindexed.pop(key, None)
            finally:
                # The vectors stored before a refused write (a full disk) are indexed: a retry
                # must not store them twice.
                self._entries, self._unindexed = entries, unindexed
        return len(done)

    async def search(self, query: str, top_k: int, min_score: float,
                     exclude: Collection[str] = frozenset()) -> list[tuple[float, ChatMessage]]:
        """Up to top_k indexed turns whose cosine similarity to `query` is at least min_score,
        best first, leaving out the turns whose keys are in `exclude`; Ollama is only asked when
        some turn is left to compare with."""
        if top_k <= 0 or not query.strip():
            return []
        entries = self._entries  # writers replace the dict while we wait for Ollama; keep this one
        keys, matrix = self._ranked_matrix(entries)
        candidates = np.array([key not in exclude for key in keys], dtype=bool)
        if not candidates.any():
            return []  # nothing could come back, so don't ask Ollama
        vectors = await self._llm.embed([self._query_prefix + query], self.model)
        if len(vectors) != 1:
            raise LanguageModelError(
                f"the embedding model {self.model} returned {len(vectors)} vectors for one text",
                code="model_error")
        query_vector = _unit(np.asarray(vectors[0], dtype=_VECTOR_DTYPE))
        if query_vector.shape[0] != matrix.shape[1]:
            # Same model name, different vectors (a re-pulled or replaced model): nothing compares.
            log.warning("%s now makes %d-dimensional vectors but the index holds %d-dimensional ones; "
                        "remove the stored embeddings to rebuild them", self.model,
                        query_vector.shape[0], matrix.shape[1])
            return []
        scores = matrix @ query_vector
        scores[~candidates] = -np.inf
        order = np.argsort(-scores, kind="stable")[:top_k]
        hits = [(float(scores[i]), entries[keys[i]].turn) for i in order
                if scores[i] >= min_score]
        log.debug("retrieval for %r: %s", query,
                  ", ".join(f"{keys[i]} {scores[i]:.2f}" for i in order) or "no candidates")
        return hits

    def _ranked_matrix(self, entries: dict[str, _Entry]) -> tuple[list[str], np.ndarray]:
        """Every key and a matrix of their unit vectors, one row each (cached until a change)."""
        cached = self._matrix
        if cached is None or cached[0] is not entries:
            keys = list(entries)
            lengths = [entries[k].vector.shape[0] for k in keys]
            if len(set(lengths)) > 1:
                # Mixed lengths can only come from a replaced model; keep the most common one.
                common = max(set(lengths), key=lengths.count)
                keys = [k for k, n in zip(keys, lengths) if n == common]
            matrix = (np.stack([entries[k].vector for k in keys]) if keys
                      else np.zeros((0, 0), dtype=_VECTOR_DTYPE))
            self._matrix = cached = (entries, keys, matrix)
        return cached[1], cached[2]


def _unit(vector: np.ndarray) -> np.ndarray:
    """The vector scaled to length 1 (a zero vector stays zero and matches nothing)."""
    vector = np.asarray(vector, dtype=_VECTOR_DTYPE)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


class RetrievalContextProvider:
    """Older turns relevant to the current prompt, as System-role context messages."""

    def __init__(self, index: EmbeddingIndex, *, top_k: int, min_score: float,
                 store: RecordStore, local_zone: tzinfo | None = None) -> None:
        """Search `index`; `store` tells which turns Last-N already shows; dates in `local_zone`."""
        self._index = index
        self._top_k = top_k
        self._min_score = min_score
        self._store = store
        self._local_zone = local_zone

    async def get_context(self, current_prompt: str, n: int) -> Sequence[ChatMessage]:
        """Up to top_k older turns scoring at least min_score, oldest first; LanguageModelError
        when the embedding model can't be asked."""
        if not current_prompt.strip():
            return []
        # Last-N reads n + 1 turns (the current user turn may already be stored): those are
        # in the prompt anyway, so repeating them would only spend tokens.
        recent = await asyncio.to_thread(read_turns, self._store, max(n, 0) + 1)
        exclude = {key_of(message) for message in recent}
        hits = await self._index.search(current_prompt, self._top_k, self._min_score, exclude)
        hits.sort(key=lambda hit: hit[1].timestamp_utc)
        return [self._render(score, turn) for score, turn in hits]

    def _render(self, score: float, turn: ChatMessage) -> ChatMessage:
        """The turn as a System-role note saying when it was said and by whom."""
        when = turn.timestamp_utc.astimezone(self._local_zone)  # None: the system's zone
        who = "the user said" if turn.role is ChatRole.USER else "you answered"
        return ChatMessage(
            ChatRole.SYSTEM, f"From an earlier conversation ({when:%Y-%m-%d}), {who}: {turn.content}",
            turn.timestamp_utc, {KIND: RETRIEVED, OF: key_of(turn), "score": f"{score:.3f}"})
