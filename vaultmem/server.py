"""The daemon's Unix socket: where it listens and who may talk to it. Requests are JSON lines,
answered one by one on each connection by `handle_line` (the daemon's dispatch); a connection
from another uid is refused (SO_PEERCRED), as is a request line over [daemon] max_request_bytes,
and no more than [daemon] max_clients connections are served at once.

The socket is made 0600 in a directory that must be this user's own (private.py); where it
listens is written to the state dir (daemon.json) for clients whose environment would look
elsewhere. Nothing here reads the index: what a request means is daemon.py's and ops.py's.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import socketserver
import stat
import threading
from pathlib import Path
from typing import Any, Callable

from . import private
from .client import DAEMON_RECORD, Client, DaemonUnavailable, daemon_record
from .config import Settings
from .errors import VaultmemError
from .writing import replace_file

log = logging.getLogger("vaultmem.daemon")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 512  # listen backlog: bursts of connections wait instead of failing

    def __init__(self, path: str, settings: Settings, handle_line: Callable[[bytes], dict]):
        self.settings = settings
        self.handle_line = handle_line
        self.slots = threading.BoundedSemaphore(settings.daemon.max_clients)
        super().__init__(path, _Connection)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        try:
            uid = private.peer_uid(request)
        except OSError:
            return False
        if uid is not None and uid != os.getuid():
            log.warning("refused a connection from uid %d", uid)
            return False
        return True


class _Connection(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        cfg = server.settings.daemon
        sock: socket.socket = self.request
        sock.settimeout(cfg.client_idle_seconds)
        if not server.slots.acquire(timeout=cfg.client_idle_seconds):
            self._send(sock, {"ok": False, "code": "busy", "error": "too many clients; try again"})
            return
        try:
            buf = b""
            while True:
                try:
                    data = sock.recv(65536)
                except (socket.timeout, OSError):
                    return  # stalled or gone
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if len(line) > cfg.max_request_bytes:
                        buf = line  # answered below, like a line still arriving
                        break
                    if line.strip() and not self._send(sock, server.handle_line(line)):
                        return
                if len(buf) > cfg.max_request_bytes:
                    self._send(sock, {"ok": False, "code": "too_large",
                                      "error": f"request over {cfg.max_request_bytes} bytes"})
                    self._discard(sock)
                    return
        finally:
            server.slots.release()

    @staticmethod
    def _discard(sock: socket.socket) -> None:
        """Close our side, then drop what the client still sends (briefly, boundedly), so the
        kernel does not reset the connection before the client reads our answer."""
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(1.0)
            for _ in range(256):
                if not sock.recv(65536):
                    break
        except OSError:
            pass

    @staticmethod
    def _send(sock: socket.socket, obj: dict) -> bool:
        try:
            sock.sendall(json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8") + b"\n")
            return True
        except OSError:
            return False


class SocketServer:
    """The listening socket at `path`, serving `handle_line` on a thread of its own."""

    def __init__(self, settings: Settings, path: str, handle_line: Callable[[bytes], dict]):
        self.settings = settings
        self.path = path
        self.handle_line = handle_line
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def bind(self, started: float) -> None:
        """Listen on the socket: in a directory made 0700 when vaultmem makes it; one that is
        there already must be this user's real directory that no one else can write, and its
        mode is left as it is (a team directory, the home directory). Then say in the state dir
        where this daemon listens (daemon.json), for clients whose shell would look elsewhere."""
        directory = Path(os.path.dirname(os.path.abspath(self.path)))
        private.make_dirs(directory)
        if problem := private.dir_problem(directory, "the socket's directory"):
            raise private.NotPrivateError(f"{problem}: choose a socket in a directory of your own (--socket)")
        if os.path.lexists(self.path):
            st = os.lstat(self.path)
            if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
                raise private.NotPrivateError(f"{self.path} is there and is not a socket of yours; "
                                              "move it away or choose another --socket")
            try:
                Client(self.path, timeout=2).close()
            except DaemonUnavailable:
                os.unlink(self.path)  # left behind by a daemon that died
            else:
                raise VaultmemError(f"a daemon already answers on {self.path}")
        old = os.umask(0o177)
        try:
            self._server = _Server(self.path, self.settings, self.handle_line)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        at = dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(timespec="seconds")
        record = {"pid": os.getpid(), "socket": os.path.abspath(self.path), "started": at}
        replace_file(self.settings.state_dir / DAEMON_RECORD, json.dumps(record) + "\n")

    def serve(self) -> None:
        """Answer requests from now on (a thread of its own)."""
        assert self._server is not None
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="vaultmem-socket", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop answering, take the socket away, and daemon.json unless another daemon has
        written it since."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        try:
            os.unlink(self.path)
        except OSError:
            pass
        if (daemon_record(self.settings.state_dir) or {}).get("pid") == os.getpid():
            (self.settings.state_dir / DAEMON_RECORD).unlink(missing_ok=True)
