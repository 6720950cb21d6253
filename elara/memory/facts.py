"""Facts about the user: short third-person sentences kept in the store and shown to the model.

A fact is one System-role record of kind `fact` whose content is the sentence and whose metadata
is `{"kind": "fact", "id": <8 hex>, "created": <ISO 8601>, "source": "explicit"|"model"}`.

Conventions, chosen so that every part agrees:

- **Third person.** Facts are stored as sentences about "the user" ("The user is vegetarian.",
  "The user's sister's birthday is on 3 May."). `third_person` rewrites the user's own words with
  a small pronoun rewrite: I'm/I am → the user is, I <verb> → the user <verb>s, my/mine → the
  user's, me/myself → the user.
- **Same fact.** Two facts are the same when their normalized texts are equal (`normalize`:
  first person → third person, lower case, contractions expanded, punctuation and articles
  dropped, whitespace collapsed). Remembering the same fact again writes nothing.
- **An update.** A new fact replaces an old one when both have the same *subject* (`subject`):
  either a possessive phrase of up to six words followed by is/are/was/were (or "is called",
  "is named") — "The user's name is", "The user's sister's birthday is" — or "The user" followed
  by a single-valued verb phrase: lives in/at/near, works at/as/for/in, is from, comes from,
  is called, is named, goes by, was born in/on. "The user is vegetarian" and "The user is a
  teacher" have no subject in this sense and are both kept. The update keeps the old id and
  created time: the new record is appended first, then the old file deleted, so a crash in
  between leaves two records with one id, and the next `load` keeps the newest.
- **Forgetting** by id, by an id prefix of at least 4 characters, or by words: every fact whose
  words include all the query's significant words (stop words such as "the", "user", "is",
  "about" do not count; a query of stop words alone forgets nothing). Forgotten facts' files are
  deleted, so they are gone from disk, not hidden.

`FactBook` is blocking (callers use asyncio.to_thread) and thread-safe; the wording rules and
`parse_memory_request` are in elara.memory.phrasing (pure); `FactExtractor` asks the model;
`FactsSystemPrompt` adds the facts to the system prompt from memory, without touching the disk.
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from elara.conversation.messages import ChatRole
from elara.conversation.prompts import SystemPromptProvider, utc_now
from elara.conversation.records import FACTS_HEADING, parse_time
from elara.conversation.store import ConversationStore
from elara.errors import LanguageModelError, StoreError
from elara.memory.phrasing import normalize, significant_words, subject
from elara.memory.records import FACT, kind_of, memory_record

log = logging.getLogger(__name__)

#: The metadata keys of a fact record (besides `kind`).
ID = "id"
CREATED = "created"
SOURCE = "source"
#: Where a fact came from: the user asked for it, or the model picked it out of a conversation.
EXPLICIT = "explicit"
MODEL = "model"

#: The shortest id prefix `forget` accepts, so a short word is never taken for an id.
MIN_ID_PREFIX = 4
#: Limits on what the extractor may return.
MAX_EXTRACTED = 5
MAX_FACT_CHARS = 200

#: The JSON schema the extractor asks the model to constrain its reply to. The limits matter: a
#: small model under a grammar can otherwise repeat array items until its token limit cuts the JSON.
FACTS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"facts": {"type": "array", "maxItems": MAX_EXTRACTED,
                             "items": {"type": "string", "maxLength": MAX_FACT_CHARS}}},
    "required": ["facts"],
}

_ID_PATTERN = re.compile(r"[0-9a-f]{4,64}")


@dataclass(frozen=True)
class Fact:
    """One remembered fact about the user and the record file it lives in."""

    id: str
    text: str
    created: datetime
    updated: datetime
    path: Path
    source: str = EXPLICIT


# -- the book ----------------------------------------------------------------------------------


class FactBook:
    """The facts in the store, kept in memory; every change goes to disk before it returns."""

    def __init__(self, store: ConversationStore, *, max_facts: int = 50,
                 clock: Callable[[], datetime] = utc_now) -> None:
        if max_facts < 1:
            raise ValueError("max_facts must be at least 1")
        self._store = store
        self._max_facts = max_facts
        self._clock = clock
        self._lock = threading.RLock()
        self._facts: list[Fact] = []
        # An immutable copy for readers: the system prompt is built on the event loop and must
        # not wait for the lock while a write is fsyncing in a worker thread.
        self._published: tuple[Fact, ...] = ()
        # Files the book could not tidy away (older versions, records without an id): deleted
        # along with their fact by forget and clear, so nothing forgotten stays on disk.
        self._leftovers: dict[str, list[Path]] = {}
        self._malformed: list[Path] = []

    @property
    def max_facts(self) -> int:
        """How many facts are kept; remembering one more drops the oldest."""
        return self._max_facts

    def load(self) -> list[Fact]:
        """Read every fact record from the store; of several records with one id the newest wins
        and the older files are deleted. Returns the facts, oldest first. StoreError only when
        the store itself cannot be read."""
        with self._lock:
            try:
                self._load_locked()
            finally:
                self._publish()
            return list(self._facts)

    def facts(self) -> list[Fact]:
        """The facts as last loaded or changed, oldest (least recently written) first; never
        waits for a write in progress."""
        return list(self._published)

    def remember(self, text: str, *, source: str = EXPLICIT) -> Fact:
        """Store a fact (see the module's rules: the same fact is not stored twice; one with the
        same subject replaces the old one under its id); drops the oldest beyond max_facts."""
        text = " ".join(text.split())
        if not normalize(text):
            raise ValueError("a fact needs some words")
        with self._lock:
            try:
                return self._remember_locked(text, source)
            finally:
                self._publish()

    def matching(self, query: str) -> list[Fact]:
        """Of the loaded facts, those matching query: by id, id prefix, else by words."""
        with self._lock:
            return self._matching(query)

    def forget(self, query: str) -> list[Fact]:
        """Delete the matching facts' files from disk (after reloading); returns what was
        forgotten. StoreError if a file cannot be deleted."""
        with self._lock:
            try:
                self._load_locked()
                chosen = self._matching(query)
                if chosen:
                    self._delete(chosen)
                    log.info("forgot %d facts: %s", len(chosen), ", ".join(f.id for f in chosen))
                return chosen
            finally:
                self._publish()

    def clear(self) -> int:
        """Delete every fact record from disk; returns how many records were deleted."""
        with self._lock:
            try:
                self._load_locked()
                paths = [f.path for f in self._facts] + self._malformed
                paths += [p for leftover in self._leftovers.values() for p in leftover]
                deleted = self._store.delete(paths) if paths else 0
                self._facts, self._leftovers, self._malformed = [], {}, []
                log.info("cleared %d fact records", deleted)
                return deleted
            finally:
                self._publish()

    def system_block(self) -> str:
        """"What you know about the user:" and one "- fact" line per fact; "" when none. Never
        waits for a write in progress."""
        facts = self._published
        if not facts:
            return ""
        return "\n".join([FACTS_HEADING, *(f"- {f.text}" for f in facts)])

    # -- inside the lock ---------------------------------------------------------------------

    def _publish(self) -> None:
        self._published = tuple(self._facts)

    def _remember_locked(self, text: str, source: str) -> Fact:
        self._load_locked()  # another process may have changed the facts since
        key, topic = normalize(text), subject(text)
        for fact in self._facts:
            if normalize(fact.text) == key:
                log.debug("already known as fact %s: %r", fact.id, text)
                return fact
        old = next((f for f in self._facts if topic is not None and subject(f.text) == topic),
                   None)
        now = self._clock()
        if old is not None:
            fact = self._write(old.id, text, old.created, now, source)
            # Appended first, deleted second: a crash in between leaves two records with one
            # id, which the next load settles in favour of the newest.
            self._delete_quietly([old.path, *self._leftovers.pop(old.id, [])])
            self._facts.remove(old)
            log.info("updated fact %s", fact.id)
            log.debug("fact %s was %r, now %r", fact.id, old.text, text)
        else:
            fact = self._write(self._new_id(), text, now, now, source)
            log.info("remembered fact %s", fact.id)
            log.debug("fact %s: %r", fact.id, text)
        self._facts.append(fact)
        while len(self._facts) > self._max_facts:
            oldest = self._facts[0]
            self._delete([oldest])
            log.info("dropped the oldest fact %s: more than %d facts", oldest.id,
                     self._max_facts)
        return fact

    def _load_locked(self) -> None:
        versions: dict[str, list[Fact]] = {}
        malformed: list[Path] = []
        for stored in self._store.iter_messages(roles={ChatRole.SYSTEM}):
            message = stored.message
            if kind_of(message) != FACT:
                continue
            fact_id = message.metadata.get(ID, "")
            text = " ".join(message.content.split())
            if not _ID_PATTERN.fullmatch(fact_id) or not text:
                log.warning("skipping fact record %s: %s", stored.path,
                            "no text" if text == "" else "missing or invalid id")
                malformed.append(stored.path)
                continue
            created = parse_time(message.metadata.get(CREATED)) or message.timestamp_utc
            versions.setdefault(fact_id, []).append(Fact(
                fact_id, text, created, message.timestamp_utc, stored.path,
                message.metadata.get(SOURCE, EXPLICIT)))
        facts: list[Fact] = []
        leftovers: dict[str, list[Path]] = {}
        for fact_id, found in versions.items():
            # Name order is append order, so the last record of an id is its newest version.
            facts.append(found[-1])
            if len(found) > 1:
                older = [f.path for f in found[:-1]]
                log.info("fact %s has %d records; keeping the newest", fact_id, len(found))
                if not self._delete_quietly(older):
                    leftovers[fact_id] = older
        facts.sort(key=lambda f: f.path.name)
        self._facts, self._leftovers, self._malformed = facts, leftovers, malformed

    def _matching(self, query: str) -> list[Fact]:
        query = " ".join(query.split())
        if not query:
            return []
        lowered = query.lower()
        exact = [f for f in self._facts if f.id == lowered]
        if exact:
            return exact
        if len(lowered) >= MIN_ID_PREFIX and _ID_PATTERN.fullmatch(lowered):
            prefixed = [f for f in self._facts if f.id.startswith(lowered)]
            if prefixed:
                return prefixed
        wanted = significant_words(query)
        if not wanted:
            return []  # "forget that" must never mean "forget everything"
        return [f for f in self._facts if wanted <= significant_words(f.text)]

    def _write(self, fact_id: str, text: str, created: datetime, updated: datetime,
               source: str) -> Fact:
        record = memory_record(FACT, text, updated, **{
            ID: fact_id, CREATED: created.astimezone(UTC).isoformat(), SOURCE: source})
        path = self._store.append(record)
        return Fact(fact_id, text, created, record.timestamp_utc, path, source)

    def _delete(self, facts: list[Fact]) -> None:
        """Delete these facts' files (and their leftovers); StoreError if the disk refuses."""
        paths = [f.path for f in facts]
        for fact in facts:
            paths += self._leftovers.pop(fact.id, [])
        self._store.delete(paths)
        gone = {f.id for f in facts}
        self._facts = [f for f in self._facts if f.id not in gone]

    def _delete_quietly(self, paths: list[Path]) -> bool:
        try:
            self._store.delete(paths)
        except StoreError as exc:
            log.warning("cannot delete an old fact record yet (tried again on the next load): %s",
                        exc)
            return False
        return True

    def _new_id(self) -> str:
        taken = {f.id for f in self._facts} | set(self._leftovers)
        while True:
            fact_id = secrets.token_hex(4)
            if fact_id not in taken:
                return fact_id


# -- the model picks out facts -----------------------------------------------------------------


class JsonLanguageModel(Protocol):
    """The part of OllamaLanguageModel the extractor needs."""

    async def complete_json(self, messages: Sequence[Mapping[str, str]],
                            schema: Mapping[str, Any]) -> Any:
        """A reply constrained to `schema`, parsed."""


EXTRACTION_INSTRUCTIONS = (
    "You pick out lasting facts about the user from one exchange between the user and an "
    "assistant. Answer only with JSON of the form {\"facts\": [\"...\"]}.\n"
    "Each fact is one short sentence in the third person about the user, such as "
    "\"The user is vegetarian.\" or \"The user's sister's birthday is on 3 May.\"\n"
    "Include only durable facts the user stated about themselves: their name, preferences, diet, "
    "family, places, important dates, work. Leave out passing moods, opinions about the weather, "
    "questions, one-off requests, and anything the assistant said about itself.\n"
    "Do not repeat a known fact; if the user changed one, give the new version.\n"
    f"At most {MAX_EXTRACTED} facts. If there is nothing new, answer {{\"facts\": []}}."
)


class FactExtractor:
    """Asks the model, with a JSON schema, which new facts about the user an exchange revealed."""

    def __init__(self, llm: JsonLanguageModel) -> None:
        self._llm = llm

    async def extract(self, user_text: str, reply_text: str, known: list[Fact]) -> list[str]:
        """New third-person facts (at most 5); [] when none; LanguageModelError on a bad reply."""
        known_lines = "\n".join(f"- {f.text}" for f in known) or "(none)"
        messages = [
            {"role": "system", "content": EXTRACTION_INSTRUCTIONS},
            {"role": "user", "content": (f"Known facts:\n{known_lines}\n\n"
                                         f"The user said: {user_text}\n"
                                         f"The assistant replied: {reply_text}")},
        ]
        log.debug("asking for facts in %r / %r", user_text, reply_text)
        reply = await self._llm.complete_json(messages, FACTS_SCHEMA)
        facts = _validate_facts(reply)
        known_keys = {normalize(f.text) for f in known}
        new = [text for text in facts if normalize(text) not in known_keys]
        log.debug("the model found %d new facts: %r", len(new), new)
        return new


def _validate_facts(reply: Any) -> list[str]:
    """The `facts` list of a reply, or LanguageModelError(model_error) saying what is wrong."""
    def bad(why: str) -> LanguageModelError:
        return LanguageModelError(f"the model's fact extraction reply {why}; expected "
                                  f"{{\"facts\": [up to {MAX_EXTRACTED} short sentences]}}",
                                  code="model_error")

    if not isinstance(reply, dict) or "facts" not in reply:
        raise bad("is not an object with a \"facts\" list")
    facts = reply["facts"]
    if not isinstance(facts, list):
        raise bad("has \"facts\" that is not a list")
    if len(facts) > MAX_EXTRACTED:
        raise bad(f"has {len(facts)} facts, more than {MAX_EXTRACTED}")
    cleaned = []
    for item in facts:
        if not isinstance(item, str) or not item.strip():
            raise bad("has a fact that is not a non-empty string")
        if len(item) > MAX_FACT_CHARS:
            raise bad(f"has a fact longer than {MAX_FACT_CHARS} characters")
        cleaned.append(" ".join(item.split()))
    return cleaned


# -- the facts in the system prompt ------------------------------------------------------------


class FactsSystemPrompt:
    """The base system prompt followed by what Elara knows about the user (from memory)."""

    def __init__(self, base: SystemPromptProvider, book: FactBook) -> None:
        self._base = base
        self._book = book

    async def get_system_prompt(self) -> str:
        """The base text, a blank line, and the facts block (when there are facts)."""
        text = await self._base.get_system_prompt()
        block = self._book.system_block()
        if not block:
            return text
        return f"{text}\n\n{block}" if text else block
