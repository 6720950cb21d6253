"""Facts about the user: the book on a real store, explicit requests, the extractor against the
fake Ollama server, the system prompt, `elara memory`, and the records read by independent code."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from elara.brain.ollama import OllamaLanguageModel, make_client
from elara.cli import memory as memory_cli
from elara.config import load_settings
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.prompts import ConfigSystemPrompt
from elara.conversation.store import ConversationStore
from elara.errors import LanguageModelError
from elara.memory.facts import (
    FACTS_SCHEMA,
    Fact,
    FactBook,
    FactExtractor,
    FactsSystemPrompt,
)
from elara.memory.phrasing import (
    Forget,
    ForgetAll,
    Remember,
    normalize,
    parse_memory_request,
    subject,
    third_person,
)
from elara.memory.records import FACT, SUMMARY, memory_record
from tests.spec_reader import read_record

KEY = "facts test passphrase"
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Clock:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "Conversation"


@pytest.fixture
def store(root: Path) -> ConversationStore:
    return ConversationStore(root, KEY)


@pytest.fixture
def book(store: ConversationStore) -> FactBook:
    book = FactBook(store, clock=Clock())
    book.load()
    return book


def files(root: Path) -> list[str]:
    return sorted(name for name in os.listdir(root) if name.endswith(".json"))


def fact_records(store: ConversationStore) -> list[ChatMessage]:
    return [s.message for s in store.iter_messages() if s.message.metadata.get("kind") == FACT]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


# -- remembering -------------------------------------------------------------------------------


def test_remember_writes_one_system_record(book: FactBook, store: ConversationStore, root: Path):
    fact = book.remember("The user is vegetarian.")
    assert len(fact.id) == 8 and int(fact.id, 16) >= 0
    assert fact.created == fact.updated and fact.source == "explicit"
    assert files(root) == [fact.path.name] and fact.path.name.endswith("_system.json")
    [record] = fact_records(store)
    assert record.role is ChatRole.SYSTEM and record.content == "The user is vegetarian."
    assert dict(record.metadata) == {"kind": "fact", "id": fact.id, "source": "explicit",
                                     "created": fact.created.isoformat()}
    assert book.facts() == [fact]


def test_the_same_fact_is_not_stored_twice(book: FactBook, root: Path):
    first = book.remember(parse_memory_request("remember I'm vegetarian").text)
    again = book.remember(parse_memory_request("please remember that I am vegetarian!").text)
    also = book.remember("the user is  a vegetarian")
    assert first == again == also
    assert files(root) == [first.path.name]


def test_an_update_keeps_the_id_and_replaces_the_file(book: FactBook, store: ConversationStore,
                                                       root: Path):
    book.remember("The user likes jazz.")
    alice = book.remember(third_person("my name is Alice"))
    alicia = book.remember(third_person("My name is Alicia"))
    assert alicia.id == alice.id and alicia.created == alice.created
    assert alicia.updated > alice.updated and alicia.path != alice.path
    assert not alice.path.exists() and alicia.path.exists()
    names = [r.content for r in fact_records(store)]
    assert names == ["The user likes jazz.", "The user's name is Alicia."]
    assert len(files(root)) == 2
    # The updated fact is the most recently written one.
    assert [f.text for f in book.facts()] == names


@pytest.mark.parametrize("old, new", [
    ("The user's sister's birthday is on 3 May.", "The user's sister's birthday is 5 May."),
    ("The user lives in Paris.", "I live in Berlin"),
    ("The user works as a nurse.", "The user works as a doctor."),
    ("The user's favourite colour is blue.", "the user's favourite colour is green"),
])
def test_same_subject_is_an_update(book: FactBook, old: str, new: str):
    first = book.remember(old)
    second = book.remember(third_person(new) if new.startswith("I ") else new)
    assert second.id == first.id and [f.id for f in book.facts()] == [first.id]


@pytest.mark.parametrize("a, b", [
    ("The user is vegetarian.", "The user is a teacher."),
    ("The user likes jazz.", "The user likes pizza."),
    ("The user's sister lives in Rome.", "The user's brother lives in Rome."),
])
def test_different_facts_are_both_kept(book: FactBook, a: str, b: str):
    book.remember(a)
    book.remember(b)
    assert [f.text for f in book.facts()] == [a, b]


def test_subject_and_normalize_rules():
    assert normalize("I'm vegetarian!") == "user is vegetarian"
    assert normalize("The user is a vegetarian") == "user is vegetarian"
    assert subject("My name is Alice") == subject("The user's name is Alicia.") == "user's name is"
    assert subject("The user's sister is called Jane") == "user's sister is called"
    assert subject("The user lives in Paris") == "user lives in"
    assert subject("The user is vegetarian") is None
    assert subject("The user likes jazz") is None


def test_beyond_max_facts_the_oldest_is_dropped(store: ConversationStore, root: Path):
    book = FactBook(store, max_facts=3, clock=Clock())
    book.load()
    made = [book.remember(f"The user has visited country number {n}.") for n in range(5)]
    assert [f.id for f in book.facts()] == [f.id for f in made[2:]]
    assert files(root) == sorted(f.path.name for f in made[2:])


def test_remember_rejects_empty_text(book: FactBook):
    for text in ("   ", "?!"):
        with pytest.raises(ValueError):
            book.remember(text)


def test_threads_remembering_at_once(book: FactBook, store: ConversationStore):
    texts = [f"The user has visited city number {n}." for n in range(12)]
    with ThreadPoolExecutor(4) as pool:
        made = list(pool.map(book.remember, texts))
    assert sorted(f.text for f in book.facts()) == sorted(texts)
    assert len({f.id for f in made}) == 12 and len(fact_records(store)) == 12


def test_readers_never_wait_for_a_write(book: FactBook, three: list[Fact]):
    held, release = threading.Event(), threading.Event()

    def hold_the_lock():
        with book._lock:  # stands in for a slow write (reload, append, fsync)
            held.set()
            release.wait(5)

    writer = threading.Thread(target=hold_the_lock)
    writer.start()
    try:
        held.wait(5)
        assert book.facts() == three
        assert book.system_block().count("\n- ") == 3
    finally:
        release.set()
        writer.join(5)


# -- forgetting --------------------------------------------------------------------------------


@pytest.fixture
def three(book: FactBook) -> list[Fact]:
    return [book.remember("The user is vegetarian."),
            book.remember("The user's sister's birthday is on 3 May."),
            book.remember("The user lives in Berlin.")]


def test_forget_by_id(book: FactBook, three: list[Fact], root: Path):
    assert book.forget(three[1].id) == [three[1]]
    assert not three[1].path.exists()
    assert files(root) == sorted([three[0].path.name, three[2].path.name])


def test_forget_by_id_prefix(book: FactBook, three: list[Fact], root: Path):
    assert book.forget(three[2].id[:5].upper()) == [three[2]]
    assert three[2].path.name not in files(root) and len(files(root)) == 2


def test_forget_by_words(book: FactBook, three: list[Fact], root: Path):
    request = parse_memory_request("forget my sister's birthday")
    assert book.forget(request.query) == [three[1]]
    assert book.forget(parse_memory_request("Elara, forget where I live").query) == [three[2]]
    assert book.forget("vegetarian") == [three[0]]
    assert files(root) == [] and book.facts() == []


def test_forget_needs_significant_words(book: FactBook, three: list[Fact], root: Path):
    assert book.forget("the user") == []
    assert book.forget("that") == []
    assert book.forget("pizza") == []
    assert book.forget("cafe") == []  # hex, but no id starts with it and no fact mentions it
    assert len(files(root)) == 3


def test_clear_deletes_every_fact_but_nothing_else(book: FactBook, store: ConversationStore,
                                                   three: list[Fact], root: Path):
    kept = store.append(ChatMessage(ChatRole.USER, "hello", START))
    summary = store.append(memory_record(SUMMARY, "We said hello.", START, covers_until="x"))
    assert book.clear() == 3
    assert files(root) == sorted([kept.name, summary.name])
    assert book.facts() == [] and book.system_block() == ""


# -- loading: another process, duplicates, broken records --------------------------------------


def test_a_new_book_reads_the_facts_from_disk(book: FactBook, three: list[Fact], root: Path):
    other = FactBook(ConversationStore(root, KEY))
    assert other.facts() == []  # nothing until loaded
    assert other.load() == three


def test_changes_by_another_process_are_seen_before_writing(book: FactBook, three: list[Fact],
                                                            root: Path):
    other = FactBook(ConversationStore(root, KEY), clock=Clock())
    other.load()
    other.forget("vegetarian")
    # `book` still has the forgotten fact in memory, but a write reloads first.
    book.remember("The user likes tea.")
    assert [f.text for f in book.facts()] == [three[1].text, three[2].text, "The user likes tea."]
    moved = other.remember("The user lives in Hamburg.")
    assert moved.id == three[2].id
    assert book.forget("Hamburg")[0].path == moved.path
    assert not moved.path.exists()


def test_duplicate_ids_resolve_to_the_newest_on_load(store: ConversationStore, root: Path):
    meta = {"id": "0a1b2c3d", "created": START.isoformat(), "source": "explicit"}
    old = store.append(memory_record(FACT, "The user's name is Alice.", START, **meta))
    new = store.append(memory_record(FACT, "The user's name is Alicia.", START, **meta))
    other = store.append(memory_record(FACT, "The user likes tea.", START, id="99998888"))
    book = FactBook(store)
    facts = book.load()
    assert [(f.id, f.text) for f in facts] == [("0a1b2c3d", "The user's name is Alicia."),
                                               ("99998888", "The user likes tea.")]
    assert facts[0].path == new and facts[1].created == START
    assert not old.exists() and files(root) == sorted([new.name, other.name])


def test_broken_fact_records_are_skipped_with_a_warning(store: ConversationStore, root: Path,
                                                        caplog):
    no_id = store.append(memory_record(FACT, "The user is tall.", START))
    bad_id = store.append(memory_record(FACT, "The user is short.", START, id="not hex!"))
    store.append(memory_record(SUMMARY, "A summary.", START))
    store.append(ChatMessage(ChatRole.SYSTEM, "a plain system message", START))
    good = store.append(memory_record(FACT, "The user is kind.", START, id="12345678",
                                      created="yesterday"))
    (root / "20260301T090000000Z_9999_system.json").write_bytes(b"not an envelope")
    book = FactBook(store)
    with caplog.at_level(logging.WARNING, logger="elara.memory.facts"):
        facts = book.load()
    assert [(f.id, f.path, f.created) for f in facts] == [("12345678", good, START)]
    warned = " ".join(r.getMessage() for r in caplog.records if r.name == "elara.memory.facts")
    assert str(no_id) in warned and str(bad_id) in warned
    # Clearing removes the broken fact records too: nothing the user asked to forget may stay.
    assert book.clear() == 3
    assert not no_id.exists() and not bad_id.exists()


# -- the system prompt -------------------------------------------------------------------------


def test_system_block_and_facts_system_prompt(book: FactBook):
    prompt = FactsSystemPrompt(ConfigSystemPrompt("You are Elara."), book)
    assert book.system_block() == ""
    assert run(prompt.get_system_prompt()) == "You are Elara."
    book.remember("The user is vegetarian.")
    book.remember("The user lives in Berlin.")
    expected = ("You are Elara.\n\nWhat you know about the user:\n"
                "- The user is vegetarian.\n- The user lives in Berlin.")
    assert run(prompt.get_system_prompt()) == expected
    assert run(FactsSystemPrompt(ConfigSystemPrompt(""), book).get_system_prompt()) == \
        expected.split("\n\n", 1)[1]


# -- explicit requests -------------------------------------------------------------------------


@pytest.mark.parametrize("said, request_", [
    ("remember that my sister's birthday is on 3 May",
     Remember("The user's sister's birthday is on 3 May.")),
    ("please remember I'm vegetarian", Remember("The user is vegetarian.")),
    ("Elara, remember: my name is Alice.", Remember("The user's name is Alice.")),
    ("Hey Elara, could you remember that I’m allergic to nuts?",
     Remember("The user is allergic to nuts.")),
    ("Remember this: I prefer tea", Remember("The user prefers tea.")),
    ("keep in mind that I work nights, please", Remember("The user works nights.")),
    ("don't forget that my mother visits on Sundays",
     Remember("The user's mother visits on Sundays.")),
    ("forget that I'm vegetarian", Forget("The user is vegetarian")),
    ("forget my sister's birthday", Forget("The user's sister's birthday")),
    ("forget all about my sister's birthday", Forget("The user's sister's birthday")),
    ("Elara, please forget where I live.", Forget("Where the user lives")),
    ("forget allergies", Forget("Allergies")),
    ("forget everything you know about me", ForgetAll()),
    ("Forget everything.", ForgetAll()),
    ("forget all facts", ForgetAll()),
    ("please clear your memory", ForgetAll()),
    ("delete all facts about me", ForgetAll()),
    # Not requests: recollection, reminders, "never mind", questions, ordinary talk.
    ("I remember when we went to Rome", None),
    ("remember when we met?", None),
    ("remember to buy milk", None),
    ("don't forget the milk", None),
    ("Remember me.", None),
    ("forget it", None),
    ("forget about it", None),
    ("forget what I said", None),
    ("can you remember my name?", None),
    ("do you remember my name?", None),
    ("What's the weather like tomorrow?", None),
    ("", None),
    ("remember", None),
])
def test_parse_memory_request(said: str, request_):
    assert parse_memory_request(said) == request_


@pytest.mark.parametrize("words, fact", [
    ("I'm vegetarian", "The user is vegetarian."),
    ("I am not a morning person", "The user is not a morning person."),
    ("my sister's birthday is on 3 May", "The user's sister's birthday is on 3 May."),
    ("I like jazz", "The user likes jazz."),
    ("I really like jazz", "The user really likes jazz."),
    ("I don't eat meat", "The user doesn't eat meat."),
    ("I have two cats", "The user has two cats."),
    ("I study law", "The user studies law."),
    ("I watch football on Sundays", "The user watches football on Sundays."),
    ("I was born in Paris", "The user was born in Paris."),
    ("I moved to Berlin in 2019", "The user moved to Berlin in 2019."),
    ("I've got a dog", "The user has got a dog."),
    ("call me Al", "Call the user Al."),
    ("The user is vegetarian.", "The user is vegetarian."),
])
def test_third_person(words: str, fact: str):
    assert third_person(words) == fact


# -- the extractor against the fake Ollama server ----------------------------------------------


def language_model(url: str) -> OllamaLanguageModel:
    return OllamaLanguageModel(make_client(url, 5.0), model="test-model", host=url,
                               keep_alive="30m", options={}, timeout_seconds=5.0)


async def extract(url: str, user: str, reply: str, known: list[Fact]) -> list[str]:
    llm = language_model(url)
    try:
        return await FactExtractor(llm).extract(user, reply, known)
    finally:
        await llm.aclose()


def known_fact(text: str) -> Fact:
    return Fact("abcdef01", text, START, START, Path("/nowhere"))


def test_extractor_asks_with_the_schema(ollama_server):
    ollama_server.responder = lambda endpoint, body: json.dumps({"facts": [
        "The user's sister is called Jane.", "The user is vegetarian!", "The user likes  tea."]})
    facts = run(extract(ollama_server.url, "My sister Jane is visiting; I'm vegetarian.",
                        "Nice! I'll suggest vegetarian recipes.",
                        [known_fact("The user is vegetarian.")]))
    # A known fact said again is not new.
    assert facts == ["The user's sister is called Jane.", "The user likes tea."]
    [body] = ollama_server.bodies("/api/chat")
    assert body["format"] == FACTS_SCHEMA and body["stream"] is False
    assert body["model"] == "test-model"
    system, user = body["messages"]
    assert system["role"] == "system" and "third person" in system["content"]
    assert "- The user is vegetarian." in user["content"]
    assert "My sister Jane is visiting" in user["content"]
    assert "I'll suggest vegetarian recipes" in user["content"]


def test_extractor_with_nothing_new(ollama_server):
    ollama_server.responder = lambda endpoint, body: '{"facts": []}'
    assert run(extract(ollama_server.url, "What's the weather?", "Sunny.", [])) == []
    assert "(none)" in ollama_server.bodies("/api/chat")[0]["messages"][1]["content"]


@pytest.mark.parametrize("reply", [
    "Sure! The user is vegetarian.",
    "{}",
    '["The user is vegetarian."]',
    '{"facts": "The user is vegetarian."}',
    '{"facts": [42]}',
    '{"facts": [""]}',
    '{"facts": ["' + "x" * 201 + '"]}',
    json.dumps({"facts": [f"The user likes thing {n}." for n in range(6)]}),
])
def test_extractor_rejects_a_bad_reply(ollama_server, reply: str):
    ollama_server.responder = lambda endpoint, body: reply
    with pytest.raises(LanguageModelError) as caught:
        run(extract(ollama_server.url, "hi", "hello", []))
    assert caught.value.code == "model_error"


# -- `elara memory` ----------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path):
    return load_settings(env={"XDG_CONFIG_HOME": str(tmp_path / "config"),
                              "ELARA__Context__StorageRoot": str(tmp_path / "Conversation"),
                              "ELARA__Context__EncryptionKey": KEY})


def memory(settings, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="elara")
    memory_cli.add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["memory", *argv])
    return args.handler(args, settings)


def test_memory_commands(settings, book: FactBook, three: list[Fact], root: Path, capsys):
    capsys.readouterr()
    assert memory(settings, "list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [f.id for f in three]
    assert lines[0].endswith("explicit  The user is vegetarian.")

    assert memory(settings, "forget", three[0].id[:4]) == 0
    assert capsys.readouterr().out == f"forgot {three[0].id}: The user is vegetarian.\n"
    assert memory(settings, "forget", "sister's", "birthday") == 0
    assert three[1].id in capsys.readouterr().out
    assert memory(settings, "forget", "deadbeef") == 1
    assert "no remembered fact matches 'deadbeef'" in capsys.readouterr().err
    assert files(root) == [three[2].path.name]

    assert memory(settings, "clear") == 0
    assert capsys.readouterr().out == "removed 1 fact\n"
    assert files(root) == []
    assert memory(settings, "list") == 0
    assert capsys.readouterr().out == "no facts remembered\n"


def test_memory_command_in_a_real_process(tmp_path: Path, book: FactBook, three: list[Fact]):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELARA")}
    env.update({"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
                "ELARA__Context__StorageRoot": str(tmp_path / "Conversation"),
                "ELARA__Context__EncryptionKey": KEY})
    result = subprocess.run([sys.executable, "-m", "elara", "memory", "list"], env=env,
                            capture_output=True, text=True, timeout=30)
    if "invalid choice: 'memory'" in result.stderr:
        pytest.skip("`elara memory` is not registered in elara/cli/__init__.py yet")
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == [f.id for f in three]


# -- the records, read with independent code ---------------------------------------------------


def test_fact_records_decrypt_with_independent_code(book: FactBook, root: Path):
    request = parse_memory_request("remember that my sister's birthday is on 3 May")
    fact = book.remember(request.text)
    body = read_record(fact.path, KEY)
    assert body == {
        "role": "System",
        "content": "The user's sister's birthday is on 3 May.",
        "timestampUtc": fact.updated.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "metadata": {"kind": "fact", "id": fact.id, "created": fact.created.isoformat(),
                     "source": "explicit"},
    }
