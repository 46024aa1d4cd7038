"""boxrt: a Python client of boxd, boxrt's multi-tenant sandbox runtime.

    client = await boxrt.connect("ws://127.0.0.1:5410", token=..., instance="my-host")
    ws = client.workspace("w1")
    result = await ws.exec("echo hi")
    async for chunk in ws.exec_stream("make"):
        print(chunk.data, end="")
    await ws.files.write("/workspace/a.py", "print(1)")

``boxrt.sync.connect`` gives the same API without ``await``."""

from ._client import (Client, ExecResult, ExecStream, FileEntry, Files, OutputChunk, Processes, ProcessStdio,
                      Sessions, Workspace, connect)
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors

__version__ = "0.9.0"
__all__ = ["connect", "Client", "Workspace", "Files", "Sessions", "ExecResult", "ExecStream", "OutputChunk",
           "FileEntry", "Processes", "ProcessStdio", *_errors]
