"""boxrt-mcp driven by the official mcp SDK's own client over stdio, against a real boxd:
the tools listed with their schemas, each called, progress while a command runs, a
failing command and a path outside the workspace as tool errors with the wire's text."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from test_sdk import INSTANCE, TOKEN, Boxd, backends


@pytest.fixture(scope="module")
def boxd():
    b = Boxd(backends()[0])
    yield b
    b.stop()


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def test_the_tools_over_stdio(boxd):
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "boxrt.mcp_server", "--url", boxd.url, "--token", TOKEN, "--instance", INSTANCE,
        "--workspace", "mcp-ws"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == {"run_command", "read_file", "write_file", "list_files", "start_process",
                                  "read_process_output", "send_process_input", "stop_process"}
            assert "command" in tools["run_command"].input_schema["properties"]
            assert tools["run_command"].description

            progress = []

            async def on_progress(p, total, message):
                progress.append(message)

            r = await session.call_tool("run_command", {"command": "echo one; echo two"},
                                        progress_callback=on_progress)
            assert not r.is_error
            assert text_of(r) == "exit code: 0\none\ntwo\n"
            assert progress and "one" in "".join(m or "" for m in progress)

            r = await session.call_tool("write_file", {"path": "notes/a.txt", "content": "héllo"})
            assert not r.is_error and text_of(r) == "wrote 6 bytes to notes/a.txt"
            r = await session.call_tool("read_file", {"path": "/workspace/notes/a.txt"})
            assert text_of(r) == "héllo"
            r = await session.call_tool("list_files", {"path": ".", "depth": 2})
            assert '"path": "notes/a.txt"' in text_of(r)

            # The mcp SDK puts "Error executing tool <name>: " before a tool error's own text.
            r = await session.call_tool("run_command", {"command": "echo bad >&2; exit 3"})
            assert r.is_error and text_of(r) == "Error executing tool run_command: exit code: 3\n[stderr]\nbad\n"
            r = await session.call_tool("read_file", {"path": "/etc/passwd"})
            assert r.is_error
            assert text_of(r) == ("Error executing tool read_file: "
                                  "BoxValidationError: path /etc/passwd is outside the workspace /workspace")

            r = await session.call_tool("start_process", {"command": "sh", "process_id": "up", "args": [
                "-c", "echo ready; while read l; do echo \"$l\" | tr a-z A-Z; done"]})
            assert not r.is_error, text_of(r)
            assert text_of(await session.call_tool("read_process_output", {"process_id": "up", "wait_sec": 10})).strip() == "ready"
            await session.call_tool("send_process_input", {"process_id": "up", "line": "shout"})
            assert text_of(await session.call_tool("read_process_output", {"process_id": "up", "wait_sec": 10})).strip() == "SHOUT"
            r = await session.call_tool("stop_process", {"process_id": "up"})
            assert text_of(r) == "process up stopped"
            r = await session.call_tool("read_process_output", {"process_id": "up"})
            assert r.is_error


async def test_streamable_http(boxd):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "boxrt.mcp_server", "--url", boxd.url, "--token", TOKEN,
                               "--instance", INSTANCE, "--workspace", "mcp-http", "--transport", "streamable-http",
                               "--host", "127.0.0.1", "--port", str(port)],
                              stderr=subprocess.PIPE, text=True)
    try:
        # Ready once uvicorn says it listens (its own log line), or gone.
        for line in server.stderr:
            if "Uvicorn running on" in line:
                break
        else:
            pytest.fail("boxrt-mcp exited before it listened")
        # Its later log lines are read too, so the pipe never fills.
        threading.Thread(target=server.stderr.read, daemon=True).start()
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                assert "run_command" in {t.name for t in (await session.list_tools()).tools}
                r = await session.call_tool("run_command", {"command": "echo over http"})
                assert not r.is_error and text_of(r) == "exit code: 0\nover http\n"
    finally:
        server.terminate()
        server.wait(30)
