"""MCP servers as tool sources: the SDK's own server, over stdio and over streamable HTTP on
loopback; one killed mid-call and restarted, one that never answers, one that is not there."""

import asyncio
import json
import subprocess
import sys

import pytest

from elara.config import bind, packaged_defaults
from elara.settings import McpServerSettings
from elara.tools.calls import ToolCall
from elara.tools.mcp import McpToolSource
from elara.tools.policy import ToolPolicy
from elara.tools.toolbox import Toolbox
from tests.rig.mcp_tools_server import free_port, wait_listening

STDIO = ["-m", "tests.rig.mcp_tools_server", "stdio"]


def server(name="home", **values):
    """One Tools.McpServers entry, bound as the config binds it."""
    data = packaged_defaults()
    data["Tools"]["McpServers"] = [{"Name": name, **values}]
    return bind(data).tools.mcp_servers[0]


def stdio(name="home", **values) -> McpServerSettings:
    return server(name, Command=sys.executable, Args=STDIO, **values)


def run(coroutine, seconds=30):
    async def bounded():
        async with asyncio.timeout(seconds):
            return await coroutine
    return asyncio.run(bounded())


async def until(condition, seconds=10.0):
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.02)


@pytest.fixture
def http_server(tmp_path):
    """The test server over streamable HTTP on loopback, asking for a bearer token."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "tests.rig.mcp_tools_server", "http",
                                "--port", str(port), "--token", "s3cret"])
    try:
        wait_listening(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_stdio_server_lists_its_tools_and_answers_calls():
    async def use():
        source = McpToolSource(stdio())
        await source.start()
        try:
            assert source.status()["state"] == "up"
            tools = {spec.tool: spec for spec in source.specs()}
            assert {"add", "slow", "crash", "fail", "turn_off"} <= set(tools)
            assert tools["add"].schema["required"] == ["a", "b"]
            assert tools["add"].offered_name == "home_add" and tools["add"].key == "home/add"
            added = await source.call("add", {"a": 2, "b": 40})
            failed = await source.call("fail", {})
            return added, failed
        finally:
            await source.aclose()

    added, failed = run(use())
    assert added.text == "42" and not added.failed
    assert failed.failed and "the lights are not answering" in failed.text


def test_a_server_killed_mid_call_fails_the_call_withdraws_its_tools_and_comes_back():
    async def use():
        source = McpToolSource(stdio(), restart_first=0.2, restart_cap=0.2)
        await source.start()
        try:
            crashed = await source.call("crash", {})
            assert source.specs() == []  # withdrawn at once
            await until(lambda: source.status()["state"] == "up")
            return crashed, source.status(), await source.call("add", {"a": 1, "b": 1})
        finally:
            await source.aclose()

    crashed, status, after = run(use())
    assert crashed.failed and "home" in crashed.text
    assert status["restarts"] >= 1 and after.text == "2"


def test_a_call_that_never_answers_times_out_as_a_failed_outcome():
    async def use():
        source = McpToolSource(stdio(TimeoutSeconds=1))
        await source.start()
        try:
            started = asyncio.get_running_loop().time()
            outcome = await source.call("slow", {"seconds": 30})
            return outcome, asyncio.get_running_loop().time() - started
        finally:
            await source.aclose()

    outcome, seconds = run(use())
    assert outcome.failed and outcome.text == "Error: home/slow did not answer within 1 s"
    assert seconds < 3


def test_a_command_that_is_not_there_is_down_with_the_reason_and_start_does_not_raise():
    async def use():
        source = McpToolSource(server(Command="/nonexistent/mcp-server"))
        await source.start()
        try:
            return source.status(), source.specs(), await source.call("add", {})
        finally:
            await source.aclose()

    status, specs, outcome = run(use())
    assert status["state"] in ("down", "starting") and specs == []
    assert "nonexistent" in status["last_error"] or "No such file" in status["last_error"]
    assert outcome.failed and "not running" in outcome.text


def test_an_http_server_gets_the_headers_of_the_headers_file(http_server, tmp_path):
    headers = tmp_path / "headers.json"
    headers.write_text(json.dumps({"Authorization": "Bearer s3cret"}))

    async def use(path):
        source = McpToolSource(server(Url=http_server, HeadersFile=str(path), TimeoutSeconds=10))
        await source.start()
        try:
            status = source.status()
            outcome = await source.call("turn_off", {"room": "kitchen"}) if status["state"] == "up" else None
            return status, outcome
        finally:
            await source.aclose()

    status, outcome = run(use(headers))
    assert status["state"] == "up" and status["transport"] == "http", status
    assert outcome.text == "The kitchen lights are off."

    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"Authorization": "Bearer guess"}))
    status, _ = run(use(wrong))
    assert status["state"] != "up" and "check its Url and HeadersFile" in status["last_error"], status

    status, _ = run(use(tmp_path / "missing.json"))
    assert "HeadersFile" in status["last_error"] and "create it or fix the path" in status["last_error"]


def test_the_toolbox_checks_arguments_against_the_servers_schema_before_calling():
    async def use():
        source = McpToolSource(stdio())
        await source.start()
        try:
            box = Toolbox([source], ToolPolicy(allow=["home/add"]))
            offered = [spec.offered_name for spec in box.offered()]
            spec, refused = box.check(ToolCall("home_add", {"a": "two", "b": 2}))
            not_allowed = box.check(ToolCall("home_turn_off", {"room": "hall"}))
            return offered, refused, not_allowed, box.status()
        finally:
            await source.aclose()

    offered, refused, not_allowed, status = run(use())
    assert offered == ["home_add"]  # only what Tools.Allow names
    assert refused.failed and "a: 'two' is not of type 'integer'" in refused.text
    assert not_allowed[0] is None and "there is no tool home_turn_off" in not_allowed[1].text
    assert status["sources"]["home"]["failures"] == 1 and status["sources"]["home"]["calls"] == 1


def test_doctor_lists_each_servers_tools_and_which_may_run():
    from elara.service import doctor

    data = packaged_defaults()
    data["Tools"].update({"McpServers": [
        {"Name": "home", "Command": sys.executable, "Args": STDIO},
        {"Name": "gone", "Command": "/nonexistent/mcp-server"}],
        "Allow": ["elara/*", "home/turn_off", "home/add"], "Confirm": ["home/turn_off"]})
    builtin, home, gone = doctor.check_tools(bind(data))

    assert builtin.ok and "set_timer, set_reminder" in builtin.detail
    assert home.ok and home.name == "tools: home"
    assert "add, slow (not allowed), crash (not allowed), fail (not allowed), turn_off (asks first)" in home.detail
    assert not gone.ok and "gone did not start" in gone.detail and "Tools.McpServers (gone)" in gone.fix
