"""The `elara` command line, run as a real process against the Ollama-protocol server."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from elara.conversation.messages import ChatRole
from elara.conversation.store import ConversationStore
from elara.skills.timers import TimerBook

KEY = "cli test passphrase"


@pytest.fixture
def env(tmp_path):
    """A clean environment: no user config, a temporary store, no inherited ELARA_ settings."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ELARA")}
    base.update({
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "ELARA__Context__EncryptionKey": KEY,
        "ELARA__LanguageModel__Model": "test-model",
        "ELARA__LanguageModel__TimeoutSeconds": "5",
    })
    return base


def elara(env, *args, stdin=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "elara", *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def store_of(tmp_path) -> ConversationStore:
    return ConversationStore(tmp_path / "cache" / "elara" / "Conversation", KEY)


def test_version_and_help(env):
    assert elara(env, "--version").stdout.startswith("elara ")
    out = elara(env, "--help").stdout
    for command in ("ask", "chat", "history", "config"):
        assert command in out


def test_ask_prints_the_reply_and_stores_the_turn(tmp_path, env, ollama_server):
    ollama_server.responder = lambda endpoint, body: "Hello Alice. Nice to meet you."
    env["ELARA__LanguageModel__Host"] = ollama_server.url
    done = elara(env, "ask", "My", "name", "is", "Alice")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello Alice. Nice to meet you.\n"
    assert "Alice" not in done.stderr  # no conversation text in logs by default
    stored = store_of(tmp_path).read_tail(10)
    assert [(m.role, m.content) for m in stored] == [
        (ChatRole.USER, "My name is Alice"), (ChatRole.ASSISTANT, "Hello Alice. Nice to meet you.")]
    mode = (tmp_path / "cache" / "elara" / "Conversation").stat().st_mode & 0o777
    assert mode == 0o700


def test_ask_when_ollama_is_down(tmp_path, env):
    env["ELARA__LanguageModel__Host"] = "http://127.0.0.1:9"  # discard port: nothing listens
    env["ELARA__LanguageModel__Provider"] = "ollama"  # only Ollama: no built-in model to fall back on
    done = elara(env, "ask", "anyone home?")
    assert done.returncode == 69
    error_lines = [line for line in done.stderr.splitlines() if line.startswith("elara:")]
    assert len(error_lines) == 1 and "can't reach Ollama at http://127.0.0.1:9" in error_lines[0]
    assert [m.role for m in store_of(tmp_path).read_tail(10)] == [ChatRole.USER]


def test_chat_reads_turns_until_eof(tmp_path, env, ollama_server):
    env["ELARA__LanguageModel__Host"] = ollama_server.url
    done = elara(env, "chat", stdin="first question\nsecond question\n")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip().splitlines()) == 2
    last = ollama_server.turns()[-1]
    assert [m["content"] for m in last["messages"][1:]][0].endswith("UTC] first question")
    assert len(store_of(tmp_path).read_tail(10)) == 4


def test_default_key_warns(tmp_path, env, ollama_server):
    # A history already written with the default key keeps it (a new one gets a generated key).
    from datetime import UTC, datetime

    from elara.conversation.crypto import DEFAULT_PASSPHRASE
    from elara.conversation.messages import ChatMessage

    ConversationStore(tmp_path / "cache" / "elara" / "Conversation", DEFAULT_PASSPHRASE).append(
        ChatMessage(ChatRole.USER, "before", datetime(2026, 1, 1, tzinfo=UTC)))
    del env["ELARA__Context__EncryptionKey"]
    env["ELARA__LanguageModel__Host"] = ollama_server.url
    done = elara(env, "-v", "ask", "hi")
    assert done.returncode == 0
    assert "default encryption key" in done.stderr


def test_wrong_key_refuses_and_writes_nothing(tmp_path, env, ollama_server):
    env["ELARA__LanguageModel__Host"] = ollama_server.url
    assert elara(env, "ask", "hello").returncode == 0
    root = tmp_path / "cache" / "elara" / "Conversation"
    before = sorted(p.name for p in root.iterdir())
    env["ELARA__Context__EncryptionKey"] = "not the key"
    done = elara(env, "ask", "hello again")
    assert done.returncode == 78
    assert f"wrong encryption key for {root}" in done.stderr
    assert sorted(p.name for p in root.iterdir()) == before
    assert not [body for path, body in ollama_server.requests if "again" in json.dumps(body)]


def test_history_list_export_verify_purge(tmp_path, env, ollama_server):
    env["ELARA__LanguageModel__Host"] = ollama_server.url
    for q in ("one", "two"):
        assert elara(env, "ask", q).returncode == 0
    listed = elara(env, "history", "list", "--limit", "3")
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 3
    assert "User" in listed.stdout and "two" in listed.stdout
    # a question the person went on with (stored again whole after it) says so
    root = tmp_path / "cache" / "elara" / "Conversation"
    ConversationStore(root, KEY).annotate(sorted(root.glob("*_user.json"))[0], {"superseded": "true"})
    assert "User (went on)  one" in elara(env, "history", "list").stdout

    exported = elara(env, "history", "export")
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [r["role"] for r in rows] == ["User", "Assistant", "User", "Assistant"]
    assert rows[0]["content"] == "one" and rows[0]["timestampUtc"].endswith("Z")
    markdown = elara(env, "history", "export", "--format", "markdown").stdout
    assert markdown.startswith("## ") and "**User**" in markdown

    assert elara(env, "history", "verify").returncode == 0
    root = tmp_path / "cache" / "elara" / "Conversation"
    victim = sorted(root.glob("*_user.json"))[0]
    victim.write_bytes(victim.read_bytes()[:-20])
    verified = elara(env, "history", "verify")
    assert verified.returncode == 1
    assert f"unreadable: {victim}" in verified.stdout and "3 readable, 1 unreadable" in verified.stdout

    assert "deleted 0 messages" in elara(env, "history", "purge", "--older-than", "30d").stdout
    assert "deleted 4 messages" in elara(env, "history", "purge", "--older-than", "0d").stdout
    bad = elara(env, "history", "purge", "--older-than", "soon")
    assert bad.returncode == 2 and "expected an age such as 30d" in bad.stderr


def test_config_check_and_show(tmp_path, env):
    ok = elara(env, "config", "check")
    assert ok.returncode == 0 and "configuration is valid" in ok.stdout
    shown = json.loads(elara(env, "config", "show").stdout)
    assert shown["Context"]["EncryptionKey"] == "(redacted)"
    assert KEY not in json.dumps(shown)

    env["ELARA__Context__LastN"] = "six"
    bad = elara(env, "config", "check")
    assert bad.returncode == 78
    assert 'Context.LastN: expected an integer from 0 to 1000, got "six"' in bad.stderr
    assert elara(env, "ask", "hi").returncode == 78

    del env["ELARA__Context__LastN"]
    path = Path(tmp_path / "conf.json")
    path.write_text('{"Context": {"LastN": 2, "Unknown": 1}}')
    bad = elara(env, "--config", str(path), "config", "check")
    assert bad.returncode == 78 and "Context.Unknown: unknown key" in bad.stderr


def test_ask_with_no_ollama_is_answered_by_the_built_in_model(tmp_path, env):
    env["ELARA__LanguageModel__Host"] = "http://127.0.0.1:9"  # nothing listens: `auto` falls back
    env["ELARA__LanguageModel__Options"] = '{"num_ctx": 2048, "temperature": 0, "num_predict": 48}'
    env["ELARA__Memory__Facts"] = "explicit"  # no fact extraction: keeps the test short
    env["ELARA__LanguageModel__TimeoutSeconds"] = "60"  # a loaded CI machine may be slow to start
    done = elara(env, "ask", "What is the capital of France?", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "paris" in done.stdout.lower()
    assert "small built-in model SmolLM2-135M-Instruct" in done.stderr and "ollama serve" in done.stderr
    stored = store_of(tmp_path).read_tail(10)
    assert [m.role for m in stored] == [ChatRole.USER, ChatRole.ASSISTANT]
    assert stored[1].metadata["model"] == "SmolLM2-135M-Instruct.Q4_1"


def test_timers_set_by_ask_listed_cancelled_and_exported(tmp_path, env, ollama_server):
    env["ELARA__LanguageModel__Host"] = ollama_server.url
    done = elara(env, "ask", "Set a pasta timer for 8 minutes.")
    assert done.returncode == 0 and done.stdout == "Pasta timer set for eight minutes.\n"
    assert [p for p, _ in ollama_server.requests if p in ("/api/chat", "/api/generate")] == []
    TimerBook(store_of(tmp_path)).start(3600)  # a second one, as the daemon would have set it
    listed = elara(env, "timers").stdout.splitlines()
    assert len(listed) == 2 and "pasta" in listed[0] and "eight minutes" in listed[0]
    pasta_id = listed[0].split()[0]

    assert elara(env, "timers", "cancel", "zzzz").returncode == 1
    cancelled = elara(env, "timers", "cancel", pasta_id[:4])
    assert cancelled.returncode == 0 and f"cancelled {pasta_id} (pasta)" in cancelled.stdout
    assert elara(env, "timers", "clear").stdout == "cancelled 1 timer\n"
    assert "cancelled" in elara(env, "timers", "list", "--all").stdout

    rows = [json.loads(line) for line in elara(env, "history", "export").stdout.splitlines()]
    timers = [r for r in rows if r["metadata"].get("kind") == "timer"]
    assert {r["metadata"]["state"] for r in timers} == {"cancelled"} and len(timers) == 2
    turns = [(r["role"], r["metadata"].get("intent")) for r in rows if r["role"] != "System"]
    assert turns == [("User", "set_timer"), ("Assistant", "set_timer")]


def test_ask_and_chat_let_a_model_with_tools_act_and_history_shows_the_calls(tmp_path, env, ollama_server):
    from tests.rig.ollama_server import ToolCalls, pending_tool_results

    def respond(endpoint, body):
        results = pending_tool_results(body)
        if results:
            return f"Done: {results[-1]['content']}"
        if "mum" in body["messages"][-1]["content"] and body.get("tools"):
            return ToolCalls([("set_reminder", {"text": "call mum", "at": "18:00"})])
        return "Noted."

    ollama_server.responder = respond
    ollama_server.model_capabilities = {"test-model": ["completion", "tools"]}
    env["ELARA__LanguageModel__Host"] = ollama_server.url
    done = elara(env, "ask", "don't let me forget to ring mum at six tonight")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Done: Reminder set for six o'clock in the evening")
    [listed] = elara(env, "timers").stdout.splitlines()
    assert "reminder: call mum" in listed

    chat = elara(env, "chat", stdin="and the same again for mum please\nthanks\n")
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.splitlines()[0].startswith("Done: Reminder set") and len(elara(env, "timers").stdout.splitlines()) == 2

    history = elara(env, "history", "list", "--limit", "20").stdout
    assert 'tool call elara/set_reminder:  set_reminder({"at": "18:00", "text": "call mum"})' in history
    assert "tool result elara/set_reminder:  Reminder set for" in history
