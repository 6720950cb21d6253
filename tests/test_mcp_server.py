"""`elara mcp` driven by the official MCP SDK's own client over stdio: every tool and resource,
read-only refusal of writes, and a wrong key as an MCP error with the fix."""

import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore
from elara.memory.facts import FactBook
from elara.memory.summaries import SummaryBook

KEY = "mcp test key"
T0 = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


@pytest.fixture
def home(tmp_path):
    """A store with a conversation about the boiler, two facts and a summary."""
    store = ConversationStore(tmp_path / "store", KEY)
    said = [("user", "The boiler makes a knocking noise."), ("assistant", "Bleed the radiators first."),
            ("user", "What is the capital of France?"), ("assistant", "Paris.")]
    turns = []
    for i, (role, text) in enumerate(said):
        message = ChatMessage(ChatRole(role.capitalize()), text, T0 + timedelta(minutes=i))
        store.append(message)
        turns.append(message)
    book = FactBook(store, max_facts=50)
    book.remember("The user's sister is called Maria.")
    book.remember("The user is vegetarian.")
    SummaryBook(store).save("The user asked about the boiler.", turns[:2], "test-model")
    return tmp_path


def env_for(home, key=KEY):
    return {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"),
            "ELARA__Context__StorageRoot": str(home / "store"), "ELARA__Context__EncryptionKey": key}


async def session_with(home, *args, key=KEY):
    """Results of `use(session)` against `elara mcp ARGS` started over stdio."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "elara", "mcp", *args],
                                   env=env_for(home, key))
    return stdio_client(params)


def run(home, use, *args, key=KEY):
    async def go():
        async with asyncio.timeout(60):
            async with await session_with(home, *args, key=key) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await use(session)
    return asyncio.run(go())


def content(result):
    assert not result.is_error, result.content
    return json.loads(result.content[0].text) if len(result.content) == 1 else [
        json.loads(c.text) for c in result.content]


def test_every_tool_and_resource_reads_the_encrypted_store(home):
    async def use(session):
        tools = {t.name for t in (await session.list_tools()).tools}
        resources = {str(r.uri) for r in (await session.list_resources()).resources}
        found = await session.call_tool("search_history", {"query": "boiler noise"})
        page = await session.call_tool("read_history", {"page": 1, "per_page": 2})
        older = await session.call_tool("read_history", {"page": 2, "per_page": 2})
        facts = await session.call_tool("list_facts", {})
        summary = await session.call_tool("read_summary", {})
        people = await session.call_tool("list_personalities", {})
        facts_resource = await session.read_resource("elara://facts")
        return tools, resources, found, page, older, facts, summary, people, facts_resource

    tools, resources, found, page, older, facts, summary, people, facts_resource = run(home, use)
    assert tools == {"search_history", "read_history", "list_facts", "read_summary",
                     "list_personalities", "forget_fact", "purge_history",
                     "switch_personality"}
    assert resources == {"elara://facts", "elara://summary", "elara://personalities"}
    hits = content(found)
    hits = hits if isinstance(hits, list) else [hits]
    assert [h["text"] for h in hits] == ["The boiler makes a knocking noise."]
    assert [m["text"] for m in _listed(page)] == ["What is the capital of France?", "Paris."]
    assert [m["text"] for m in _listed(older)][0] == "The boiler makes a knocking noise."
    assert sorted(f["text"] for f in _listed(facts)) == [
        "The user is vegetarian.", "The user's sister is called Maria."]
    assert content(summary)["summary"] == "The user asked about the boiler."
    assert content(people)["active"] == "assistant"
    assert "vegetarian" in facts_resource.contents[0].text


def test_writes_are_refused_unless_allowed(home):
    async def forget(session):
        return await session.call_tool("forget_fact", {"query": "vegetarian"})

    def facts():
        book = FactBook(ConversationStore(home / "store", KEY), max_facts=50)
        book.load()
        return sorted(f.text for f in book.facts())

    refused = run(home, forget)
    assert refused.is_error and "elara mcp --allow-writes" in refused.content[0].text
    assert facts() == ["The user is vegetarian.", "The user's sister is called Maria."]
    done = run(home, forget, "--allow-writes")
    assert not done.is_error and "vegetarian" in done.content[0].text
    assert facts() == ["The user's sister is called Maria."]


def test_a_wrong_key_is_an_mcp_error_that_names_the_fix(home):
    async def use(session):
        return await session.call_tool("list_facts", {}), await session.call_tool(
            "search_history", {"query": "boiler"})

    facts, found = run(home, use, key="not the key")
    for result in (facts, found):
        assert result.is_error
        text = result.content[0].text
        assert "Traceback" not in text and "set Context.EncryptionKey" in text, text


def _listed(result):
    assert not result.is_error, result.content
    items = [json.loads(c.text) for c in result.content]
    return items[0] if len(items) == 1 and isinstance(items[0], list) else items


def test_purging_deletes_the_old_history_only_when_allowed(home):
    async def purge(session):
        return await session.call_tool("purge_history", {"older_than_days": 0})

    refused = run(home, purge)
    assert refused.is_error and "--allow-writes" in refused.content[0].text
    assert len(ConversationStore(home / "store", KEY).read_tail(10)) >= 4
    done = run(home, purge, "--allow-writes")
    assert not done.is_error and json.loads(done.content[0].text)["turns"] == 4
    assert ConversationStore(home / "store", KEY).read_tail(10, (ChatRole.USER, ChatRole.ASSISTANT)) == []


def test_switching_the_personality_writes_the_config_when_allowed(home):
    async def switch(session):
        done = await session.call_tool("switch_personality", {"name": "Counselor"})
        listed = await session.call_tool("list_personalities", {})
        unknown = await session.call_tool("switch_personality", {"name": "pirate"})
        return done, listed, unknown

    async def refused(session):
        return await session.call_tool("switch_personality", {"name": "counselor"})

    no = run(home, refused)
    assert no.is_error and "--allow-writes" in no.content[0].text
    assert not (home / "config" / "elara" / "appsettings.json").exists()

    done, listed, unknown = run(home, switch, "--allow-writes")
    assert not done.is_error, done.content
    written = json.loads((home / "config" / "elara" / "appsettings.json").read_text())
    assert written == {"LanguageModel": {"Personality": "counselor"}}
    assert json.loads(listed.content[0].text)["active"] == "counselor"
    assert unknown.is_error and "there is no personality 'pirate'" in unknown.content[0].text


def test_a_switch_a_later_layer_overrides_is_refused_and_the_file_kept(home):
    (home / "config" / "elara").mkdir(parents=True)
    config = home / "config" / "elara" / "appsettings.json"
    config.write_text('{"languagemodel": {"personality": "advisor"}, "Logging": {"Level": "INFO"}}')

    async def switch(session):
        return await session.call_tool("switch_personality", {"name": "professional"})

    params_env = {"ELARA__LanguageModel__Personality": "assistant"}
    os.environ.update(params_env)
    try:
        result = run(home, switch, "--allow-writes")
    finally:
        os.environ.pop("ELARA__LanguageModel__Personality")
    assert result.is_error and "a later layer" in result.content[0].text
    assert config.read_text() == '{"languagemodel": {"personality": "advisor"}, "Logging": {"Level": "INFO"}}'
