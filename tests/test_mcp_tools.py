"""MCP servers as tool sources, against a real server built with the official SDK
(tests/rig/mcp_tools_server.py) over stdio and over streamable HTTP on loopback: tools listed and
called, an error result, a timeout, a server killed mid-call or dying while idle and restarted,
a changed list of tools, headers from a HeadersFile, and servers that cannot start."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from elara.config import bind, packaged_defaults
from elara.settings import McpServerSettings
from elara.tools.calls import ToolCall
from elara.tools.mcp import McpToolSource
from elara.tools.policy import ToolPolicy
from elara.tools.toolbox import Toolbox

SERVER = str(Path(__file__).parent / "rig" / "mcp_tools_server.py")
TOKEN = "s3cret-token"
RIG_TOOLS = {"add", "slow", "turn_off", "fail", "crash", "exit_soon", "grow"}


def stdio(timeout: float = 5.0) -> McpServerSettings:
    return McpServerSettings(name="rig", command=sys.executable, args=(SERVER, "stdio"),
                             timeout_seconds=timeout)


def run(test: Callable[[], object], limit: float = 15.0) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(limit):
            await test()  # type: ignore[misc]
    asyncio.run(bounded())


async def until(condition: Callable[[], bool], within: float = 5.0) -> None:
    """Wait until `condition()` holds; fail the test if it does not within `within` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        await asyncio.sleep(0.02)


@contextlib.contextmanager
def serving_http(token: str | None = None) -> Iterator[str]:
    """The rig served over streamable HTTP on a loopback socket bound here (so the port is known
    and listening before the server starts: nothing to wait for), refusing requests without the
    bearer `token` if one is given; its address, and the server stopped after."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        process = subprocess.Popen([sys.executable, SERVER, "http", str(listener.fileno()),
                                    *([token] if token else [])], pass_fds=[listener.fileno()])
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """One HTTP rig for the module's tests, asking for the bearer TOKEN."""
    with serving_http(TOKEN) as url:
        yield url


def test_a_stdio_server_s_tools_are_listed_and_called():
    async def test():
        source = McpToolSource(stdio())
        try:
            await source.start()
            status = source.status()
            assert status["state"] == "up" and status["transport"] == "stdio"
            assert set(status["tools"]) == RIG_TOOLS and status["last_error"] is None
            add = next(spec for spec in source.specs() if spec.tool == "add")
            assert add.source == "rig" and add.key == "rig/add" and not add.read_only
            assert add.description == "Add two whole numbers."
            assert set(add.schema["properties"]) == {"a", "b"}

            added = await source.call("add", {"a": 2, "b": 3})
            assert added.text == "5" and not added.failed
            failed = await source.call("fail", {})
            assert failed.failed and "failed on purpose" in failed.text
            unknown = await source.call("no_such_tool", {})
            assert unknown.failed and "no_such_tool" in unknown.text
            assert source.status()["calls"] == 3 and source.status()["failures"] == 2
        finally:
            began = time.monotonic()
            await source.aclose()
            assert time.monotonic() - began < 3.0
        assert source.status()["state"] == "stopped" and source.specs() == []
    run(test)


def test_a_call_that_outlasts_the_timeout_fails_in_time_and_the_server_stays_up():
    async def test():
        source = McpToolSource(stdio(timeout=0.5), start_seconds=10.0)
        try:
            await source.start()
            began = time.monotonic()
            slow = await source.call("slow", {"seconds": 30})
            assert time.monotonic() - began < 0.5 + 1.0
            assert slow.failed and slow.text == "Error: rig/slow did not answer within 0.5 s"
            assert source.status()["state"] == "up"
            assert (await source.call("add", {"a": 1, "b": 1})).text == "2"
        finally:
            await source.aclose()
    run(test)


def test_a_server_killed_mid_call_fails_the_call_withdraws_its_tools_and_is_restarted():
    async def test():
        source = McpToolSource(stdio(), backoff_first=0.05)
        try:
            await source.start()
            crashed = await source.call("crash", {})
            assert crashed.failed and "rig" in crashed.text and "crash" in crashed.text
            assert source.specs() == [] and source.status()["state"] == "down"
            assert (await source.call("add", {"a": 1, "b": 2})).failed  # not while it is down

            await until(lambda: source.status()["state"] == "up")
            assert source.status()["restarts"] == 1 and "crash" in source.status()["last_error"]
            assert {spec.tool for spec in source.specs()} == RIG_TOOLS
            assert (await source.call("add", {"a": 1, "b": 2})).text == "3"
        finally:
            await source.aclose()
    run(test)


def test_a_server_that_dies_while_idle_is_noticed_and_restarted():
    async def test():
        source = McpToolSource(stdio(), backoff_first=0.05, health_seconds=0.1)
        try:
            await source.start()
            assert (await source.call("exit_soon", {})).text == "bye"
            await until(lambda: source.status()["restarts"] == 1 and source.status()["state"] == "up")
            assert "ping" in source.status()["last_error"]
            assert (await source.call("add", {"a": 4, "b": 5})).text == "9"
        finally:
            await source.aclose()
    run(test)


def test_a_changed_list_of_tools_is_listed_again():
    async def test():
        source = McpToolSource(stdio())
        try:
            await source.start()
            assert "extra" not in source.status()["tools"]
            assert (await source.call("grow", {})).text == "grown"
            await until(lambda: "extra" in source.status()["tools"])
            assert (await source.call("extra", {})).text == "extra"
        finally:
            await source.aclose()
    run(test)


def test_aclose_during_a_call_ends_it_promptly():
    async def test():
        source = McpToolSource(stdio())
        await source.start()
        call = asyncio.create_task(source.call("slow", {"seconds": 30}))
        await asyncio.sleep(0.2)  # let the call reach the server (either way, it must end)
        began = time.monotonic()
        await source.aclose()
        outcome = await call
        assert time.monotonic() - began < 5.0
        assert outcome.failed and source.status()["state"] == "stopped"
    run(test)


def test_an_http_server_is_reached_with_the_headers_from_its_headers_file(http_url, tmp_path):
    headers = tmp_path / "headers.json"
    headers.write_text(json.dumps({"Authorization": f"Bearer {TOKEN}"}))

    async def test():
        source = McpToolSource(McpServerSettings(name="web", url=http_url, headers_file=str(headers)))
        try:
            await source.start()
            assert source.status()["state"] == "up" and source.status()["transport"] == "http"
            assert {spec.key for spec in source.specs()} >= {"web/add", "web/slow"}
            assert (await source.call("add", {"a": 20, "b": 22})).text == "42"
            assert (await source.call("fail", {})).failed
        finally:
            await source.aclose()
    run(test)


def test_an_http_server_that_dies_mid_call_fails_the_call_and_is_down():
    async def test():
        with serving_http() as url:
            source = McpToolSource(McpServerSettings(name="web", url=url), backoff_first=0.05)
            try:
                await source.start()
                assert source.status()["state"] == "up"
                crashed = await source.call("crash", {})
                assert crashed.failed and "web" in crashed.text
                assert source.specs() == []
                await until(lambda: source.status()["restarts"] >= 1 and source.status()["state"] == "down")
                assert "cannot reach" in source.status()["last_error"]
            finally:
                await source.aclose()
    run(test)


@pytest.mark.parametrize(("content", "expected"), [
    (json.dumps({"Authorization": "Bearer wrong"}), "HTTP 401"),
    (None, "does not exist"),
    ("{not json", "is not JSON"),
    (json.dumps({"Authorization": 42}), "is not a JSON object of header names to text"),
])
def test_a_wrong_or_broken_headers_file_leaves_the_server_down_with_the_fix(
        http_url, tmp_path, content, expected):
    headers = tmp_path / "headers.json"
    if content is not None:
        headers.write_text(content)

    async def test():
        source = McpToolSource(McpServerSettings(name="web", url=http_url, headers_file=str(headers)))
        try:
            await source.start()
            status = source.status()
            assert status["state"] == "down" and source.specs() == []
            assert expected in status["last_error"] and "HeadersFile" in status["last_error"]
        finally:
            await source.aclose()
    run(test)


def test_a_command_that_does_not_exist_is_down_with_a_clear_error():
    async def test():
        settings = McpServerSettings(name="ghost", command="/nonexistent/elara-mcp-server")
        source = McpToolSource(settings)
        try:
            began = time.monotonic()
            await source.start()
            assert time.monotonic() - began < 2.0
            status = source.status()
            assert status["state"] == "down" and status["tools"] == []
            assert "/nonexistent/elara-mcp-server" in status["last_error"]
            assert "Tools.McpServers[].Command" in status["last_error"]
            outcome = await source.call("anything", {})
            assert outcome.failed and "ghost is not running" in outcome.text
        finally:
            await source.aclose()
    run(test)


def test_a_program_that_exits_at_once_is_down_with_a_clear_error():
    async def test():
        source = McpToolSource(McpServerSettings(name="quitter", command=sys.executable,
                                                 args=("-c", "raise SystemExit(2)")))
        try:
            await source.start()
            assert source.status()["state"] == "down"
            assert "closed the connection before it answered" in source.status()["last_error"]
        finally:
            await source.aclose()
    run(test)


def test_an_unreachable_url_is_down_and_start_does_not_raise():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def test():
        source = McpToolSource(McpServerSettings(name="away", url=f"http://127.0.0.1:{port}/mcp"))
        try:
            await source.start()
            assert source.status()["state"] == "down"
            assert "cannot reach" in source.status()["last_error"] and "Url" in source.status()["last_error"]
        finally:
            await source.aclose()
    run(test)


def test_the_toolbox_offers_only_allowed_tools_and_checks_arguments_against_the_servers_schema():
    async def test():
        source = McpToolSource(stdio())
        await source.start()
        try:
            box = Toolbox([source], ToolPolicy(allow=["rig/add"]))
            assert [spec.offered_name for spec in box.offered()] == ["rig_add"]
            spec, refused = box.check(ToolCall("rig_add", {"a": "two", "b": 2}))
            assert refused.failed and "a: 'two' is not of type 'integer'" in refused.text
            spec, unknown = box.check(ToolCall("rig_turn_off", {"room": "hall"}))
            assert spec is None and "there is no tool rig_turn_off" in unknown.text
            assert box.status()["sources"]["rig"]["failures"] == 1
        finally:
            await source.aclose()

    run(test)


def test_doctor_lists_each_servers_tools_and_which_may_run():
    from elara.service import doctor

    data = packaged_defaults()
    data["Tools"].update({"McpServers": [
        {"Name": "home", "Command": sys.executable, "Args": [SERVER, "stdio"]},
        {"Name": "gone", "Command": "/nonexistent/mcp-server"}],
        "Allow": ["elara/*", "home/turn_off", "home/add"], "Confirm": ["home/turn_off"]})
    builtin, home, gone = doctor.check_tools(bind(data))

    assert builtin.ok and "set_timer, set_reminder" in builtin.detail
    assert home.ok and home.name == "tools: home"
    assert "add, slow (not allowed), fail (not allowed), turn_off (asks first)" in home.detail
    assert not gone.ok and "gone did not start" in gone.detail and "Tools.McpServers (gone)" in gone.fix
