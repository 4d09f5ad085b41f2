"""The thin client of the daemon's socket: find the socket, send one JSON request, read one
JSON response. Standard library only, so that `vaultmem query` through a running daemon
starts and answers in milliseconds. Nothing here opens an index."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any


class DaemonUnavailable(Exception):
    """No daemon answers on the socket (not running, or a stale socket file)."""


def default_socket_path() -> str:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "vaultmem", "vaultmem.sock")
    return os.path.join("/tmp", f"vaultmem-{os.getuid()}", "vaultmem.sock")


def socket_path(flag: str | None = None, configured: str = "") -> str:
    """--socket > $VAULTMEM_SOCKET > config > $XDG_RUNTIME_DIR/vaultmem/vaultmem.sock."""
    return os.path.expanduser(flag or os.environ.get("VAULTMEM_SOCKET") or configured or default_socket_path())


# Said with a query's answer while the daemon's start-up reconcile still runs ("indexing": true).
STILL_INDEXING = ("the daemon is still reading the vaults at start-up: notes it has not reached yet are missing "
                  "from these results")

# A Unix socket's address holds 108 bytes on Linux (104 on macOS), the last one a NUL.
MAX_SOCKET_PATH = 107


def socket_problem(path: str) -> str | None:
    """Why no socket can be at `path` (it is too long to bind or connect to), or None."""
    n = len(os.fsencode(path))
    if n <= MAX_SOCKET_PATH:
        return None
    return (f"the socket path {path} is {n} bytes, longer than the {MAX_SOCKET_PATH} a Unix socket allows: "
            "set --socket or VAULTMEM_SOCKET to a shorter path")


class Client:
    def __init__(self, path: str, timeout: float = 60.0):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        deadline = time.monotonic() + min(timeout, 10.0)
        while True:
            try:
                self.sock.connect(path)
                break
            except BlockingIOError:  # the daemon's accept queue is full: it is busy, not gone
                if time.monotonic() > deadline:
                    self.sock.close()
                    raise DaemonUnavailable(f"the daemon at {path} is not accepting connections") from None
                time.sleep(0.005)
            except OSError as err:
                self.sock.close()
                raise DaemonUnavailable(f"no daemon at {path} ({err.strerror or err})") from None
        self._buf = b""

    def request(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.sock.sendall(json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n")
        while b"\n" not in self._buf:
            data = self.sock.recv(1 << 20)
            if not data:
                raise DaemonUnavailable(f"the daemon at {self.path} closed the connection")
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call(path: str, obj: dict[str, Any], timeout: float = 600.0) -> dict[str, Any]:
    with Client(path, timeout) as c:
        return c.request(obj)
