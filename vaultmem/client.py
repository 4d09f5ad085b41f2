"""The thin client of the daemon's socket: find the socket, send one JSON request, read one
JSON response. Standard library only, so that `vaultmem query` through a running daemon
starts and answers in milliseconds. Nothing here opens an index.

A client sends nothing to a socket it cannot trust (private.py): its directory must be the
user's own, and the process that answers must run as the user."""

from __future__ import annotations

import _socket  # the socket module's C half (its socket type, constants): see Client
import json
import os
import time
from typing import Any

from . import private


class DaemonUnavailable(Exception):
    """No daemon answers on the socket (not running, or a stale socket file)."""


class UntrustedSocket(DaemonUnavailable):
    """A socket this user must not talk to (another user's directory or process); nothing was
    sent."""


def default_socket_path() -> str:
    """$XDG_RUNTIME_DIR/vaultmem/vaultmem.sock, or the same under /run/user/UID when the variable
    is not set (cron, su, ssh without pam_systemd) but the directory is there; else under
    $XDG_STATE_HOME/vaultmem/run (~/.local/state): never a directory others can write, as /tmp."""
    runtime = private.runtime_dir()
    if runtime:
        return os.path.join(runtime, "vaultmem", "vaultmem.sock")
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "vaultmem", "run", "vaultmem.sock")


# The daemon says in its state dir where it listens, so that a client of that state dir finds it
# from any shell, whatever socket its environment would have chosen.
DAEMON_RECORD = "daemon.json"


def daemon_record(state_dir: str | os.PathLike) -> dict[str, Any] | None:
    """What the daemon of `state_dir` wrote of itself ({"pid", "socket"}), when the state dir is
    this user's and the record is there; else None."""
    if private.dir_problem(state_dir, "the state directory"):
        return None
    try:
        fd = os.open(os.path.join(state_dir, DAEMON_RECORD), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_uid != os.getuid():
                return None
            record = json.loads(f.read(65536))
    except (OSError, ValueError):
        return None
    ok = isinstance(record, dict) and isinstance(record.get("socket"), str) and isinstance(record.get("pid"), int)
    return record if ok else None


def socket_path(flag: str | None = None, configured: str = "", state_dir: str | os.PathLike | None = None) -> str:
    """--socket > $VAULTMEM_SOCKET > config > where the daemon of `state_dir` says it listens >
    default_socket_path()."""
    chosen = flag or os.environ.get("VAULTMEM_SOCKET") or configured
    if not chosen and state_dir is not None:
        chosen = str((daemon_record(state_dir) or {}).get("socket") or "")
    return os.path.expanduser(chosen or default_socket_path())


# Said with a query's answer ("incomplete") while the daemon rebuilds the index.
REBUILDING = ("the daemon is rebuilding the index (`vaultmem index --rebuild`): notes it has not read again yet are "
              "missing from these results; `vaultmem status` shows how far it is")
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
        """Connect to the daemon at `path`; `timeout` bounds each wait for its answer. Raises
        UntrustedSocket, before a byte is sent, when the socket's directory is not the user's or
        the answering process is another user's."""
        self.path = path
        if problem := private.socket_problem(path):
            raise UntrustedSocket(f"vaultmem does not talk to {path}: {problem}")
        # the C socket type: all a client does with one (connect, sendall, recv, the peer's
        # credentials); importing the `socket` module, which makes its enums, cost 3-4 ms of
        # every fresh `vaultmem query` and hook (python -c: 20.7 ms with `_socket`, 23.8 ms)
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
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
        if problem := private.peer_problem(self.sock, path):
            self.sock.close()
            raise UntrustedSocket(f"vaultmem does not talk to {path}: {problem}")
        self._buf = b""

    def request(self, obj: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Send one request, read its answer; `timeout` (default: the connection's) bounds the
        wait, after which DaemonUnavailable says the daemon did not answer (a daemon stopped
        with SIGSTOP still accepts connections: the kernel queues them)."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            self.sock.sendall(json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n")
            while b"\n" not in self._buf:
                data = self.sock.recv(1 << 20)
                if not data:
                    raise DaemonUnavailable(f"the daemon at {self.path} closed the connection")
                self._buf += data
        except TimeoutError:  # socket.timeout, since Python 3.10
            raise DaemonUnavailable(f"the daemon at {self.path} did not answer within {self.sock.gettimeout():g} s "
                                    "(stopped, or stuck? `vaultmem status` tells)") from None
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
