"""The asyncio client: one WebSocket to boxd's /rpc/ws, requests by seq_id, streams
with the SDK's flow control (a window of 8 frames, acknowledged every 4)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import websockets

from .errors import BoxError, ConnectionLost, error_from_message

__all__ = ["connect", "Client", "Workspace", "Files", "Sessions", "Processes", "ProcessStdio", "ExecResult",
           "OutputChunk", "ExecStream", "FileEntry"]

STREAM_WINDOW = 8
# Actions that change nothing: sent again once when the connection drops under them.
SAFE_TO_RETRY = frozenset({
    "box_health", "box_get_backend_info", "box_status", "box_get_storage_analysis", "box_get_session",
    "box_get_sessions", "box_get_managed_process", "box_stat_file", "box_list_files", "box_read_file",
    "box_list_all_sessions", "box_get_network_policy",
})
CALL_BYTES = 1 << 20
TOKEN_HEADER = "X-LangBot-Box-Control-Token"
INSTANCE_HEADER = "X-LangBot-Instance-Id"


@dataclass
class ExecResult:
    """A command's outcome (box_exec)."""

    session_id: str
    status: str
    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: int
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass
class OutputChunk:
    """A piece of a streamed command's output: ``stream`` is "stdout" or "stderr",
    ``offset`` the raw bytes of that stream before it."""

    stream: str
    data: str
    offset: int


@dataclass
class FileEntry:
    """One entry of a listing or a stat."""

    path: str
    name: str
    type: str
    size: int
    mode: int
    mtime: float
    target: str | None = None


class _Stream:
    """The frames of one streamed request, in order, with flow control."""

    def __init__(self, conn: "_Connection", seq: int, context: dict | None):
        self.conn = conn
        self.seq = seq
        self.context = context
        self.queue: asyncio.Queue[dict | BaseException] = asyncio.Queue()
        self.consumed = 0
        self.done = False

    async def frames(self, timeout: float) -> AsyncIterator[dict]:
        try:
            while True:
                m = await asyncio.wait_for(self.queue.get(), timeout)
                if isinstance(m, BaseException):
                    raise m
                if m.get("code", 0) != 0:
                    self.done = True
                    raise error_from_message(m.get("message", ""))
                if m.get("chunk_status") == "end":
                    self.done = True
                    return
                index = m.get("stream_index")
                if index is not None:
                    self.consumed = index
                data = m.get("data") or {}
                if data.get("stream") != "keepalive":
                    yield data
                if index is not None and self.consumed % (STREAM_WINDOW // 2) == 0:
                    await self.conn.call("__stream_ack", {"seq_id": self.seq, "index": self.consumed},
                                         self.context)
        finally:
            self.conn.streams.pop(self.seq, None)
            if not self.done and not self.conn.closed:
                try:
                    await self.conn.call("__cancel_action", {"seq_id": self.seq}, self.context)
                except BoxError:
                    pass


class _Connection:
    def __init__(self, ws: Any):
        self.ws = ws
        self.seq = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.streams: dict[int, _Stream] = {}
        self.closed = False
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        error: BaseException = ConnectionLost("boxrt: the connection to boxd closed")
        try:
            async for text in self.ws:
                try:
                    m = json.loads(text)
                except ValueError:
                    continue
                seq = m.get("seq_id")
                if seq in self.streams:
                    self.streams[seq].queue.put_nowait(m)
                elif seq in self.pending:
                    fut = self.pending.pop(seq)
                    if not fut.done():
                        fut.set_result(m)
        except Exception as e:  # the socket failed
            error = ConnectionLost(f"boxrt: the connection to boxd was lost ({e}); "
                                   "a call in flight may or may not have run")
        finally:
            self.closed = True
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(error)
            self.pending.clear()
            for s in list(self.streams.values()):
                s.queue.put_nowait(error)

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    async def _send(self, seq: int, action: str, data: dict, context: dict | None, flow: bool) -> None:
        if self.closed:
            raise ConnectionLost("boxrt: the connection to boxd is closed")
        msg: dict[str, Any] = {"seq_id": seq, "action": action, "data": data}
        if context is not None:
            msg["context"] = context
        if flow:
            msg["stream_flow_control"] = 1
        await self.ws.send(json.dumps(msg))

    async def call(self, action: str, data: dict, context: dict | None = None, timeout: float = 300) -> dict:
        seq = self._next()
        fut = asyncio.get_running_loop().create_future()
        self.pending[seq] = fut
        try:
            await self._send(seq, action, data, context, False)
            m = await asyncio.wait_for(fut, timeout)
        finally:
            self.pending.pop(seq, None)
        if m.get("code", 0) != 0:
            raise error_from_message(m.get("message", ""))
        return m.get("data") or {}

    async def stream(self, action: str, data: dict, context: dict | None, timeout: float) -> AsyncIterator[dict]:
        seq = self._next()
        s = _Stream(self, seq, context)
        self.streams[seq] = s
        try:
            await self._send(seq, action, data, context, True)
        except BaseException:
            self.streams.pop(seq, None)
            raise
        frames = s.frames(timeout)
        try:
            async for frame in frames:
                yield frame
        finally:
            # A caller that leaves early cancels the stream (the inner generator's end).
            await frames.aclose()

    async def close(self) -> None:
        self.closed = True
        await self.ws.close()
        await self.reader


class ExecStream:
    """``async for chunk in ws.exec_stream(cmd)``: the output as it comes, then
    ``stream.result`` holds the last frame (``exit_code``, ``status``, ``ended``, ...).
    Leaving the loop early cancels the command."""

    def __init__(self, frames: AsyncIterator[dict]):
        self._frames = frames
        self.result: dict[str, Any] | None = None

    def __aiter__(self) -> "ExecStream":
        return self

    async def __anext__(self) -> OutputChunk:
        while True:
            frame = await self._frames.__anext__()
            if frame.get("stream") == "result":
                self.result = frame
                continue
            return OutputChunk(frame["stream"], frame.get("data", ""), frame.get("offset", 0))

    async def aclose(self) -> None:
        await self._frames.aclose()

    @property
    def exit_code(self) -> int | None:
        return None if self.result is None else self.result.get("exit_code")


def _entry(e: dict) -> FileEntry:
    return FileEntry(path=e.get("path", ""), name=e.get("name", e.get("path", "")), type=e.get("type", ""),
                     size=e.get("size", 0), mode=e.get("mode", 0), mtime=e.get("mtime", 0), target=e.get("target"))


class Files:
    """A session's workspace (docs/files.md). Paths are absolute inside the sandbox (under
    its mount path, ``/workspace``) or relative to it. Large files move in calls of at
    most 1 MiB; reads stream on the wire's frames."""

    def __init__(self, ws: "Workspace", session: str):
        self._ws = ws
        self._session = session

    def _data(self, path: str, **more: Any) -> dict:
        return {"session_id": self._session, "path": path, **more}

    async def _ensure_session(self) -> None:
        await self._ws.sessions.create(self._session, exist_ok=True)

    async def read(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        """The file's bytes (from ``offset``, ``length`` of them or to its end)."""
        data = self._data(path, offset=offset, encoding="base64")
        if length is not None:
            data["length"] = length
        # A read changes nothing: a connection lost under it is read again, once.
        for attempt in (1, 2):
            out = bytearray()
            try:
                async for frame in self._ws._client._stream("box_read_file", data, self._ws.context):
                    if frame.get("stream") == "data":
                        out += base64.b64decode(frame["data"])
                return bytes(out)
            except ConnectionLost:
                if attempt == 2 or self._ws._client._closing:
                    raise
        raise AssertionError("unreachable")

    async def read_text(self, path: str) -> str:
        return (await self.read(path)).decode("utf-8", errors="replace")

    async def write(self, path: str, data: bytes | str, mode: int | None = None, make_parents: bool = True) -> int:
        """Writes the whole file: under a temporary name in calls of at most 1 MiB, then
        moved over ``path`` (a failure leaves no partial file under its name)."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        part = f"{path}.boxrt-part-{os.getpid()}-{os.urandom(6).hex()}"
        try:
            offset = 0
            while True:
                piece = raw[offset:offset + CALL_BYTES]
                fields: dict[str, Any] = {"content": base64.b64encode(piece).decode(), "encoding": "base64",
                                          "make_parents": make_parents}
                if offset:
                    fields["offset"] = offset
                if mode is not None:
                    fields["mode"] = mode
                await self._ws._call("box_write_file", self._data(part, **fields))
                offset += len(piece)
                if offset >= len(raw):
                    break
            await self._ws._call("box_move_file", self._data(part, to=path, overwrite=True))
        except BaseException:
            try:
                await self._ws._call("box_remove_file", self._data(part))
            except BoxError:
                pass
            raise
        return len(raw)

    async def list(self, path: str = ".", depth: int = 1) -> list[FileEntry]:
        r = await self._ws._call("box_list_files", self._data(path, depth=depth))
        return [_entry(e) for e in r.get("entries", [])]

    async def stat(self, path: str) -> FileEntry:
        r = await self._ws._call("box_stat_file", self._data(path))
        return _entry({"name": os.path.basename(r.get("path", path)), **r})

    async def remove(self, path: str, recursive: bool = False) -> None:
        await self._ws._call("box_remove_file", self._data(path, recursive=recursive))

    async def mkdir(self, path: str, parents: bool = True) -> None:
        await self._ws._call("box_make_dir", self._data(path, make_parents=parents))

    async def move(self, path: str, to: str, overwrite: bool = False) -> None:
        await self._ws._call("box_move_file", self._data(path, to=to, overwrite=overwrite))

    async def upload(self, local: str | os.PathLike, remote: str) -> int:
        with open(local, "rb") as f:
            return await self.write(remote, f.read())

    async def download(self, remote: str, local: str | os.PathLike) -> int:
        data = await self.read(remote)
        tmp = f"{os.fspath(local)}.boxrt-part"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, local)
        return len(data)


class Sessions:
    """The workspace's sessions (box_create_session, box_get_session, ...)."""

    def __init__(self, ws: "Workspace"):
        self._ws = ws

    async def create(self, session_id: str, exist_ok: bool = False, **spec: Any) -> dict:
        try:
            return await self._ws._call("box_create_session", {"session_id": session_id, **spec})
        except BoxError as e:
            if exist_ok and "already exists" in str(e):
                return await self.get(session_id)
            raise

    async def get(self, session_id: str) -> dict:
        return await self._ws._call("box_get_session", {"session_id": session_id})

    async def list(self) -> list[dict]:
        return (await self._ws._call("box_get_sessions", {})).get("sessions", [])

    async def delete(self, session_id: str) -> None:
        await self._ws._call("box_delete_session", {"session_id": session_id})


def physical_session_id(instance: str, workspace: str, generation: int, logical: str) -> str:
    """The session's id as the relay's path names it (protocol.md §4.1): the workspace's
    namespace, its generation and the logical id made safe."""
    ns = "ws-" + hashlib.sha256(f"{instance}\0{workspace}".encode()).hexdigest()[:24]
    stripped = logical.strip().encode()
    safe = re.sub(rb"[^A-Za-z0-9_.-]+", b"-", stripped).strip(b"-")
    if not safe:
        raise ValueError("Box session_id must contain a valid character")
    suffix = safe.decode()
    if safe != stripped:
        suffix += "~" + hashlib.sha256(stripped).hexdigest()[:8]
    return f"{ns}-g{generation}-{suffix}"


class ProcessStdio:
    """A managed process's stdio over the relay WebSocket: ``send`` writes one line to
    its stdin; ``async for text in stdio`` reads its stdout as it comes (the relay ends
    when the process exits). One relay holds a process at a time."""

    def __init__(self, ws: Any):
        self._ws = ws

    async def send(self, line: str) -> None:
        await self._ws.send(line)

    def __aiter__(self) -> "ProcessStdio":
        return self

    async def __anext__(self) -> str:
        try:
            text = await self._ws.recv()
        except websockets.exceptions.ConnectionClosed:
            raise StopAsyncIteration
        return text if isinstance(text, str) else text.decode("utf-8", errors="replace")

    @property
    def close_reason(self) -> str | None:
        """Why the relay closed (``managed process exited``, ...), once it has."""
        return self._ws.close_reason

    async def close(self) -> None:
        await self._ws.close()


class Processes:
    """The session's managed processes (standard mode only): long-running stdio servers,
    such as MCP servers, started, read and stopped by ``process_id``."""

    def __init__(self, ws: "Workspace", session: str):
        self._ws = ws
        self._session = session

    async def start(self, command: str, args: list[str] | None = None, process_id: str = "default",
                    env: dict[str, str] | None = None, cwd: str = "/workspace") -> dict:
        """Starts the process (one of that ``process_id`` already running is replaced);
        the session must exist."""
        spec: dict[str, Any] = {"process_id": process_id, "command": command, "args": args or [], "cwd": cwd}
        if env:
            spec["env"] = env
        return await self._ws._call("box_start_managed_process", {"session_id": self._session, "spec": spec})

    async def get(self, process_id: str = "default") -> dict:
        return await self._ws._call("box_get_managed_process", {"session_id": self._session, "process_id": process_id})

    async def stop(self, process_id: str = "default") -> None:
        await self._ws._call("box_stop_managed_process", {"session_id": self._session, "process_id": process_id})

    async def attach(self, process_id: str = "default") -> ProcessStdio:
        """The process's stdio over boxd's relay (waits while another relay holds it)."""
        await self._ws.sessions.get(self._session)  # a clear error when the session is not there
        physical = physical_session_id(self._ws._client.instance, self._ws.workspace_id, self._ws.generation,
                                       self._session)
        c = self._ws._client
        base = c.url.split("/rpc/ws")[0]
        headers = {INSTANCE_HEADER: c.instance, "X-LangBot-Workspace-Id": self._ws.workspace_id,
                   "X-LangBot-Placement-Generation": str(self._ws.generation)}
        if c.token:
            headers[TOKEN_HEADER] = c.token
        url = f"{base}/v1/sessions/{physical}/managed-process/{process_id}/ws"
        try:
            ws = await websockets.connect(url, additional_headers=headers, subprotocols=["mcp"], max_size=None)
        except websockets.exceptions.InvalidStatus as e:
            body = e.response.body.decode("utf-8", errors="replace") if e.response.body else ""
            try:
                message = json.loads(body)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = f"the relay was refused (HTTP {e.response.status_code}) {body}".strip()
            raise error_from_message(message) from e
        return ProcessStdio(ws)


class Workspace:
    """One tenant workspace: its actions carry its context (instance, workspace,
    placement generation)."""

    def __init__(self, client: "Client", workspace_id: str, generation: int = 1, session: str = "default"):
        self._client = client
        self.workspace_id = workspace_id
        self.generation = generation
        self.session = session
        self.sessions = Sessions(self)
        self.files = Files(self, session)
        self.processes = Processes(self, session)

    @property
    def context(self) -> dict:
        return {"instance_uuid": self._client.instance, "workspace_uuid": self.workspace_id,
                "placement_generation": self.generation}

    async def _call(self, action: str, data: dict) -> dict:
        return await self._client._request(action, data, self.context)

    def in_session(self, session: str) -> "Workspace":
        """The same workspace, its commands and files in ``session``."""
        return Workspace(self._client, self.workspace_id, self.generation, session)

    async def exec(self, cmd: str, timeout: int | None = None, workdir: str | None = None,
                   env: dict[str, str] | None = None, session: str | None = None) -> ExecResult:
        """Runs ``cmd`` (a shell command line) and returns its outcome; a non-zero exit is
        no exception."""
        data: dict[str, Any] = {"session_id": session or self.session, "cmd": cmd}
        if timeout is not None:
            data["timeout_sec"] = timeout
        if workdir is not None:
            data["workdir"] = workdir
        if env:
            data["env"] = env
        r = await self._call("box_exec", data)
        return ExecResult(session_id=r.get("session_id", ""), status=r.get("status", ""),
                          exit_code=r.get("exit_code"), stdout=r.get("stdout", ""), stderr=r.get("stderr", ""),
                          duration_ms=r.get("duration_ms", 0), raw=r)

    def exec_stream(self, cmd: str, timeout: int | None = None, workdir: str | None = None,
                    session: str | None = None) -> ExecStream:
        """Runs ``cmd`` with its output as it comes (box_exec_stream)."""
        data: dict[str, Any] = {"session_id": session or self.session, "cmd": cmd}
        if timeout is not None:
            data["timeout_sec"] = timeout
        if workdir is not None:
            data["workdir"] = workdir
        return ExecStream(self._client._stream("box_exec_stream", data, self.context))

    async def status(self) -> dict:
        return await self._call("box_status", {})

    # The workspace's egress policy (docs/network.md): host-control calls naming it.
    async def network_policy(self) -> dict:
        """Its own policy, the one in force and where that comes from (``source``:
        workspace, default or none)."""
        return await self._client._request("box_get_network_policy", self._names(), None)

    async def set_network_policy(self, policy: dict | None = None, *, profile: str | None = None) -> dict:
        """Gives the workspace ``policy`` (``None`` clears it: back to boxd's default) or
        one of boxd's ``box.network_profiles`` by name; in force in its running sandboxes
        when this returns."""
        data = self._names()
        if profile is not None:
            data["profile"] = profile
        else:
            data["policy"] = policy
        return await self._client._request("box_set_network_policy", data, None)

    def _names(self) -> dict:
        return {"instance_uuid": self._client.instance, "workspace_uuid": self.workspace_id}

    async def skill_action(self, action: str, data: dict) -> dict:
        """A skill action of this workspace (``box_list_skills``, ``box_install_skill_zip``
        with a key from ``client.upload``, ...; docs/skills.md), its data as the wire has it."""
        if not action.startswith("box_") or "skill" not in action:
            raise ValueError(f"{action} is not a skill action")
        return await self._call(action, data)


class Client:
    """A connection to boxd as a host (its token and instance id)."""

    def __init__(self, conn: _Connection, instance: str, timeout: float, url: str = "", token: str | None = None):
        self._conn = conn
        self.instance = instance
        self.timeout = timeout
        self.url = url
        self.token = token
        self._closing = False
        self._reconnect_lock = asyncio.Lock()

    def workspace(self, workspace_id: str, generation: int = 1, session: str = "default") -> Workspace:
        return Workspace(self, workspace_id, generation, session)

    async def _stream(self, action: str, data: dict, context: dict | None) -> AsyncIterator[dict]:
        conn = await self._connection()
        frames = conn.stream(action, data, context, self.timeout)
        try:
            async for frame in frames:
                yield frame
        finally:
            await frames.aclose()

    async def _connection(self) -> _Connection:
        """The connection, opened again when it dropped (nothing was in flight on it for
        the caller asking now)."""
        async with self._reconnect_lock:
            if self._conn.closed and not self._closing:
                self._conn = await _open(self.url, self.token, self.instance)
            return self._conn

    async def _request(self, action: str, data: dict, context: dict | None) -> dict:
        """One call. A call that changes nothing is sent again once on a new connection
        when the connection drops under it; any other raises ConnectionLost."""
        conn = await self._connection()
        try:
            return await conn.call(action, data, context, self.timeout)
        except ConnectionLost:
            if action not in SAFE_TO_RETRY or self._closing:
                raise
        conn = await self._connection()
        return await conn.call(action, data, context, self.timeout)

    # Host-control (no workspace context).
    async def health(self) -> dict:
        return await self._request("box_health", {}, None)

    async def backend_info(self) -> dict:
        return await self._request("box_get_backend_info", {}, None)

    async def put_entitlement(self, snapshot: dict) -> dict:
        return await self._request("box_put_workspace_entitlement", snapshot, None)

    async def upsert_grant(self, grant: dict) -> dict:
        return await self._request("box_upsert_sandbox_admission_grant", grant, None)

    async def revoke_grant(self, revocation: dict) -> dict:
        return await self._request("box_revoke_sandbox_admission_grant", revocation, None)

    async def upload(self, data: bytes, key: str | None = None) -> str:
        """Uploads ``data`` with ``__file_chunk`` (16 KiB per chunk) into this connection's
        transfer folder; returns the file key a skill action (``box_install_skill_zip``,
        ``box_preview_skill_zip``) names it by. The upload lives as long as the connection."""
        key = key or f"upload-{os.urandom(8).hex()}.zip"
        chunk = 16384
        amount = max(1, -(-len(data) // chunk))
        conn = await self._connection()
        for i in range(amount):
            piece = data[i * chunk:(i + 1) * chunk]
            await conn.call("__file_chunk", {"file_key": key, "chunk_index": i, "chunk_amount": amount,
                                             "chunk_base64": base64.b64encode(piece).decode()}, None, self.timeout)
        return key

    async def list_all_sessions(self, limit: int = 1000) -> dict:
        return await self._request("box_list_all_sessions", {"limit": limit}, None)

    async def close(self) -> None:
        self._closing = True
        await self._conn.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


async def _open(url: str, token: str | None, instance: str) -> _Connection:
    headers = {INSTANCE_HEADER: instance}
    if token:
        headers[TOKEN_HEADER] = token
    try:
        ws = await websockets.connect(url, additional_headers=headers, max_size=None)
    except websockets.exceptions.InvalidStatus as e:
        code = e.response.status_code
        if code == 401:
            raise BoxError(f"boxd refused the connection (HTTP 401): a wrong control token, or an instance id "
                           f"({instance}) other than the one boxd pinned") from e
        raise BoxError(f"boxd refused the connection (HTTP {code})") from e
    except (OSError, EOFError, asyncio.TimeoutError, websockets.exceptions.WebSocketException) as e:
        # Refused, reset, or closed mid-handshake (a boxd going away): not reachable now.
        raise ConnectionLost(f"boxrt: cannot reach boxd at {url}: {e}") from e
    return _Connection(ws)


async def connect(url: str = "ws://127.0.0.1:5410", token: str | None = None, instance: str = "boxrt-python",
                  timeout: float = 300) -> Client:
    """Opens a connection to boxd (``url`` without a path gets ``/rpc/ws``). ``token`` is
    boxd's control token (default: ``LANGBOT_BOX_CONTROL_TOKEN``); ``instance`` the
    instance id to present (boxd pins the first one that connects). A connection that
    drops is opened again by the next call; a call that changes nothing (health, status,
    session, process and file reads) is sent again once when it drops under it."""
    if token is None:
        token = os.environ.get("LANGBOT_BOX_CONTROL_TOKEN") or None
    if url.count("/") < 3:
        url = url.rstrip("/") + "/rpc/ws"
    return Client(await _open(url, token, instance), instance, timeout, url, token)
