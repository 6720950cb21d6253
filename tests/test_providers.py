"""`LanguageModel.Provider`: `auto` answers with Ollama when it is there and with the real built-in
model when it isn't, switching between turns both ways as the Ollama-protocol server is started and
stopped mid-test, with every turn stored."""

import asyncio
import logging
import random

import pytest

from elara.brain.providers import EMBEDDED, OLLAMA, AutoLanguageModel, describe
from elara.config import load_settings
from elara.conversation.messages import ChatRole, PromptReady
from elara.conversation.store import ConversationStore
from elara.errors import ConfigError, LanguageModelError
from elara.service import answering
from elara.service.slices import LanguageModelSlice
from tests.rig.ollama_server import closed_port

KEY = "providers key"


def settings_for(host: str, tmp_path, **overrides: str):
    env = {"ELARA__LanguageModel__Host": host, "ELARA__LanguageModel__Model": "test-model",
           "ELARA__LanguageModel__TimeoutSeconds": "60",
           "ELARA__Context__StorageRoot": str(tmp_path / "store"), "ELARA__Context__EncryptionKey": KEY}
    env.update({f"ELARA__{k}": v for k, v in overrides.items()})
    return load_settings(env=env)


class Printed:
    """A sentence sink that keeps what it was given."""

    def __init__(self) -> None:
        self.sentences: list[str] = []

    async def say(self, sentence: str) -> None:
        self.sentences.append(sentence)


def auto_over(settings, embedded_model, **options) -> AutoLanguageModel:
    """`auto` as the build layer makes it, with the session's loaded built-in model to fall back on."""
    return AutoLanguageModel(answering.make_ollama(LanguageModelSlice.of(settings)), embedded_model.reconfigured,
                             ollama_hint="start Ollama", **options)


def test_auto_switches_both_ways_and_no_turn_is_lost(ollama_server, embedded_model, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="elara.brain.providers")
    ollama_server.responder = lambda endpoint, body: "Ollama says Paris."
    settings = settings_for(ollama_server.url, tmp_path)
    store = ConversationStore(tmp_path / "store", KEY)
    port = ollama_server.port = int(ollama_server.url.rsplit(":", 1)[1])  # the same port when restarted
    llm = auto_over(settings, embedded_model, check_interval=0.05, check_seconds=2)
    sink = Printed()
    orchestrator = answering.make_orchestrator(settings, store, llm, sink)

    async def scenario():
        watcher = None
        try:
            await llm.check()
            assert llm.status()["provider"] == OLLAMA
            first = await orchestrator.on_prompt_ready(PromptReady("What is the capital of France?"))
            assert first.ok and first.reply == "Ollama says Paris."

            ollama_server.stop()  # Ollama goes away between turns: the next turn is not lost
            second = await orchestrator.on_prompt_ready(PromptReady("How far away is the moon?"))
            assert second.ok and second.reply  # from the built-in model: see the stored metadata
            assert llm.status()["provider"] == EMBEDDED and "can't reach Ollama" in llm.status()["reason"]

            ollama_server.start()  # ... and comes back: the watcher hands the next turn to it
            assert int(ollama_server.url.rsplit(":", 1)[1]) == port
            watcher = asyncio.create_task(llm.watch())
            for _ in range(200):
                if llm.status()["provider"] == OLLAMA:
                    break
                await asyncio.sleep(0.02)
            third = await orchestrator.on_prompt_ready(PromptReady("And the capital of Spain?"))
            assert third.ok and third.reply == "Ollama says Paris."
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
            await llm._ollama.aclose()  # the built-in model belongs to the session

    asyncio.run(scenario())
    stored = store.read_tail(10)
    assert [m.role for m in stored] == [ChatRole.USER, ChatRole.ASSISTANT] * 3
    assert [m.metadata["model"] for m in stored if m.role is ChatRole.ASSISTANT] == [
        "test-model", embedded_model.model, "test-model"]
    assert len(ollama_server.turns()) == 2  # the first and the third turn
    assert "small built-in model" in caplog.text and "answering with it from the next turn" in caplog.text


def test_auto_starts_on_the_built_in_model_when_ollama_lacks_the_model(ollama_server, embedded_model,
                                                                        tmp_path):
    settings = settings_for(ollama_server.url, tmp_path, LanguageModel__Model="qwen2.5:1.5b")
    llm = auto_over(settings, embedded_model)

    async def scenario():
        try:
            info = await llm.check()
            return info, llm.status(), describe(llm, "auto")
        finally:
            await llm._ollama.aclose()

    info, status, described = asyncio.run(scenario())
    assert info.name == embedded_model.model and status["provider"] == EMBEDDED
    assert "does not have the model qwen2.5:1.5b" in status["reason"] and described == status


def test_auto_facts_come_from_the_built_in_model_when_ollama_is_away(embedded_model, tmp_path):
    from elara.memory.facts import FACTS_SCHEMA

    settings = settings_for(f"http://127.0.0.1:{closed_port()}", tmp_path)
    llm = auto_over(settings, embedded_model)

    async def scenario():
        try:
            return await llm.complete_json(
                [{"role": "user", "content": "My name is Alice and I am vegetarian. List facts as JSON."}],
                FACTS_SCHEMA)
        finally:
            await llm._ollama.aclose()

    answer = asyncio.run(scenario())
    assert isinstance(answer, dict) and isinstance(answer.get("facts"), list)


def test_a_reply_cut_off_midway_is_not_answered_twice(ollama_server, embedded_model, tmp_path):
    ollama_server.responder = lambda endpoint, body: "One two three four five six seven."
    settings = settings_for(ollama_server.url, tmp_path)
    llm = auto_over(settings, embedded_model)

    async def scenario():
        try:
            await llm.check()
            ollama_server.fault = "drop"  # fragments, then the connection closes
            return [f async for f in llm.stream(answering.make_renderer(settings).render(
                await answering.make_builder(settings, ConversationStore(tmp_path / "store", KEY)).build("hi", 0)))]
        finally:
            await llm._ollama.aclose()

    with pytest.raises(LanguageModelError) as failure:
        asyncio.run(scenario())
    assert failure.value.code == "connection_lost"


def test_ollama_only_and_embedded_only(tmp_path, embedded_model):
    down = settings_for(f"http://127.0.0.1:{closed_port()}", tmp_path, LanguageModel__Provider="ollama")
    only_ollama = answering.load_language_model(LanguageModelSlice.of(down))
    assert not isinstance(only_ollama, AutoLanguageModel)
    assert describe(only_ollama, "ollama")["reason"] == "LanguageModel.Provider is ollama"
    asyncio.run(only_ollama.aclose())
    missing = settings_for("http://127.0.0.1:9", tmp_path, LanguageModel__Provider="auto",
                           LanguageModel__EmbeddedModel=str(tmp_path / "nope.gguf"))
    with pytest.raises(ConfigError, match="LanguageModel.EmbeddedModel"):
        answering.load_language_model(LanguageModelSlice.of(missing))


def test_cancelling_the_watch_always_ends_it(ollama_server, tmp_path):
    """The daemon stops the watch by cancelling it, at whatever moment a check is in. A cancel
    that lands as a check completes once went unnoticed (Python 3.11's asyncio.wait_for returns
    the finished result instead) and the watch ran on forever: shutdown, and this suite, hung."""
    settings = settings_for(ollama_server.url, tmp_path)
    llm = AutoLanguageModel(answering.make_ollama(LanguageModelSlice.of(settings)), lambda: None,  # type: ignore[arg-type,return-value]
                            ollama_hint="start Ollama", check_interval=0.0005, check_seconds=2)
    rng = random.Random(3)

    async def scenario():
        try:
            for _ in range(150):
                before = len(ollama_server.bodies("/api/show"))
                watcher = asyncio.create_task(llm.watch())
                # Every cancel lands once a check has begun (on a busy machine a fixed sleep could
                # cancel before the first one was sent), at a random moment of it or a later one.
                async with asyncio.timeout(5):
                    while len(ollama_server.bodies("/api/show")) == before:
                        await asyncio.sleep(0.0005)
                await asyncio.sleep(rng.uniform(0.0, 0.01))
                watcher.cancel()
                done, _ = await asyncio.wait([watcher], timeout=2)
                assert done, "the watch went on after it was cancelled"
        finally:
            await llm._ollama.aclose()

    asyncio.run(scenario())
    assert len(ollama_server.bodies("/api/show")) >= 150  # a check had begun before every cancel
