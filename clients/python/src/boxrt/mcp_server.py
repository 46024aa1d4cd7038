"""boxrt-mcp: an MCP server over one boxd workspace, for agent frameworks and coding
agents (the official ``mcp`` SDK, ``pip install "./clients/python[mcp]"``).

It connects to boxd as a host, with the token and instance id of its own configuration
(command line or environment), never from a tool call; every tool call is a tenant action
of its one workspace, so in admission mode it needs that workspace's entitlement like any
other call.

    boxrt-mcp --url ws://127.0.0.1:5410 --instance my-host --workspace w1            # stdio
    boxrt-mcp ... --transport streamable-http --host 127.0.0.1 --port 8765
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

import boxrt

__all__ = ["build_server", "main"]

MAX_READ_BYTES = 4 << 20
MAX_PROCESS_OUTPUT = 1 << 20


class _Target:
    """The one workspace this server acts on, connected on first use."""

    def __init__(self, url: str, token: str | None, instance: str, workspace: str, session: str):
        self.url, self.token, self.instance = url, token, instance
        self.workspace_id, self.session = workspace, session
        self._client: boxrt.Client | None = None
        self._lock = asyncio.Lock()

    async def workspace(self) -> boxrt.Workspace:
        async with self._lock:
            if self._client is None:
                self._client = await boxrt.connect(self.url, token=self.token, instance=self.instance)
            return self._client.workspace(self.workspace_id, session=self.session)


def build_server(target: _Target) -> MCPServer:
    server = MCPServer(
        "boxrt",
        instructions=(
            f"A sandbox (workspace {target.workspace_id!r}) of boxrt: run shell commands and read and write files "
            "in its workspace folder. Paths are relative to the workspace (/workspace) or absolute below it; "
            "state (files, installed packages) persists between calls."),
    )

    async def call(coro: Any) -> Any:
        try:
            return await coro
        except boxrt.BoxError as e:
            raise ToolError(str(e)) from e

    @server.tool(description=(
        "Run a shell command (sh -c) in the sandbox and return its exit code, stdout and stderr. Output is "
        "reported as progress while it runs. A non-zero exit code makes the call an error, with the output. "
        "timeout_sec ends the command (default: boxd's)."))
    async def run_command(command: str, ctx: Context, timeout_sec: int | None = None,
                          workdir: str | None = None) -> str:
        ws = await target.workspace()
        out: list[str] = []
        err: list[str] = []
        stream = ws.exec_stream(command, timeout=timeout_sec, workdir=workdir)
        try:
            n = 0
            async for chunk in stream:
                (out if chunk.stream == "stdout" else err).append(chunk.data)
                n += 1
                await ctx.report_progress(n, message=chunk.data[-200:])
        except boxrt.BoxError as e:
            raise ToolError(str(e)) from e
        result = stream.result or {}
        text = "".join(out)
        if err:
            text += ("\n" if text and not text.endswith("\n") else "") + "[stderr]\n" + "".join(err)
        code = result.get("exit_code")
        summary = f"exit code: {code}" if result.get("status") != "timed_out" else "timed out"
        if result.get("status") == "timed_out" or code != 0:
            raise ToolError(f"{summary}\n{text}")
        return f"{summary}\n{text}"

    @server.tool(description="Read a text file of the sandbox's workspace (at most 4 MiB; invalid UTF-8 as U+FFFD).")
    async def read_file(path: str) -> str:
        ws = await target.workspace()
        data = await call(ws.files.read(path, length=MAX_READ_BYTES + 1))
        if len(data) > MAX_READ_BYTES:
            raise ToolError(f"{path} is larger than {MAX_READ_BYTES} bytes; read it with run_command (head, sed)")
        return data.decode("utf-8", errors="replace")

    @server.tool(description=(
        "Write a text file in the sandbox's workspace, replacing it whole (parent folders are made). "
        "Returns the bytes written."))
    async def write_file(path: str, content: str) -> str:
        ws = await target.workspace()
        n = await call(ws.files.write(path, content))
        return f"wrote {n} bytes to {path}"

    @server.tool(description=(
        "List a folder of the sandbox's workspace (default: its root), depth levels down (default 1). "
        "Returns one JSON object per line: path, type (file, dir, symlink), size, mode."))
    async def list_files(path: str = ".", depth: int = 1) -> str:
        ws = await target.workspace()
        entries = await call(ws.files.list(path, depth=depth))
        return "\n".join(json.dumps({"path": e.path, "type": e.type, "size": e.size, "mode": oct(e.mode)})
                         for e in entries)

    # Managed processes (standard mode): each one's stdout is read by this server as it
    # comes and kept until read_process_output takes it (at most MAX_PROCESS_OUTPUT).
    relays: dict[str, tuple[boxrt.ProcessStdio, list[str], asyncio.Event, asyncio.Task]] = {}

    async def pump(stdio: boxrt.ProcessStdio, buffer: list[str], ready: asyncio.Event) -> None:
        async for text in stdio:
            buffer.append(text)
            while sum(len(t) for t in buffer) > MAX_PROCESS_OUTPUT:
                buffer.pop(0)
            ready.set()
        buffer.append(f"[relay closed: {stdio.close_reason or 'process ended'}]")
        ready.set()

    @server.tool(description=(
        "Start a long-running process in the sandbox (a server, a REPL) under process_id, replacing one of "
        "that id; its output is kept for read_process_output and send_process_input writes lines to its stdin. "
        "Not available in admission (Cloud) mode."))
    async def start_process(command: str, args: list[str] | None = None, process_id: str = "default") -> str:
        ws = await target.workspace()
        await call(ws.exec("true"))  # the session exists
        info = await call(ws.processes.start(command, args or [], process_id=process_id))
        if process_id in relays:
            relays.pop(process_id)[3].cancel()
        stdio = await call(ws.processes.attach(process_id))
        buffer: list[str] = []
        ready = asyncio.Event()
        relays[process_id] = (stdio, buffer, ready, asyncio.get_running_loop().create_task(pump(stdio, buffer, ready)))
        return f"process {process_id} {info.get('status', 'started')}"

    @server.tool(description=(
        "The output a process started with start_process wrote since the last call (waits up to wait_sec "
        "for some when there is none yet)."))
    async def read_process_output(process_id: str = "default", wait_sec: float = 1.0) -> str:
        if process_id not in relays:
            raise ToolError(f"no process {process_id} was started by this server")
        _, buffer, ready, _ = relays[process_id]
        if not buffer:
            try:
                await asyncio.wait_for(ready.wait(), max(0.0, min(wait_sec, 30.0)))
            except asyncio.TimeoutError:
                pass
        out = "".join(buffer)
        buffer.clear()
        ready.clear()
        return out

    @server.tool(description="Write one line to the stdin of a process started with start_process.")
    async def send_process_input(line: str, process_id: str = "default") -> str:
        if process_id not in relays:
            raise ToolError(f"no process {process_id} was started by this server")
        await relays[process_id][0].send(line)
        return "sent"

    @server.tool(description="Stop a process started with start_process (stdin closed, then TERM, then KILL).")
    async def stop_process(process_id: str = "default") -> str:
        ws = await target.workspace()
        if process_id in relays:
            stdio, _, _, task = relays.pop(process_id)
            task.cancel()
            await stdio.close()
        await call(ws.processes.stop(process_id))
        return f"process {process_id} stopped"

    return server


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="boxrt-mcp", description="An MCP server over one boxd workspace.")
    p.add_argument("--url", default=os.environ.get("BOXRT_URL", "ws://127.0.0.1:5410"))
    p.add_argument("--token", default=os.environ.get("LANGBOT_BOX_CONTROL_TOKEN"),
                   help="boxd's control token (default: LANGBOT_BOX_CONTROL_TOKEN)")
    p.add_argument("--instance", default=os.environ.get("BOXRT_INSTANCE", "boxrt-mcp"))
    p.add_argument("--workspace", default=os.environ.get("BOXRT_WORKSPACE", "default"))
    p.add_argument("--session", default=os.environ.get("BOXRT_SESSION", "default"),
                   help="the session of the workspace (admission mode: global)")
    p.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    a = p.parse_args(argv)
    server = build_server(_Target(a.url, a.token, a.instance, a.workspace, a.session))
    if a.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=a.host, port=a.port)


if __name__ == "__main__":
    main()
