"""Where answers come from: the daemon over its socket when one serves this index, else the
index opened in this process (ops.LocalContext). Used by the CLI, the MCP server and the hooks;
the daemon path imports only the standard library, the engines load only for the local path.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from .client import Client, DaemonUnavailable, UntrustedSocket, socket_path, socket_problem
from .config import Settings
from .errors import UsageError, VaultmemError, exit_code_of
from .query import check_unicode

if TYPE_CHECKING:  # the in-process index is imported only when it answers
    from . import ops

# never tried again in this process when the daemon does not answer in time: it may still do them
WRITES_OPS = {"remember", "forget", "feedback", "shown"}


class DaemonError(VaultmemError):
    """An error the daemon answered with; keeps its exit-code meaning."""

    def __init__(self, response: dict):
        super().__init__(response.get("error") or "the daemon answered with an error")
        self.exit_code = exit_code_of(str(response.get("code")))


# How long an answer of the daemon is waited for before the client answers in-process (reads)
# or fails (writes: they may wait for the writer, busy with a first index of thousands of notes).
PING_SECONDS = 5.0
READ_SECONDS = 30.0
WRITE_SECONDS = 3600.0
LONG_OPS = {"reindex"}  # answered when done: no bound


class Backend:
    """The daemon over its socket when one serves this index, else the index in this process."""

    def __init__(self, settings: Settings, socket: str | None = None, no_daemon: bool = False,
                 explicit_state_dir: bool = False, quiet: bool = False, patience: float = 1.0):
        """`explicit_state_dir`: the user chose the state dir, so a daemon serving another one
        must not answer. `quiet`: do not say on stderr that the answer is in-process.
        `patience` scales how long the daemon's answers are waited for (a hook, which must
        answer within a few seconds, waits a fifth as long)."""
        self.patience = patience
        self.settings = settings
        self.client: Client | None = None
        self.local: ops.LocalContext | None = None
        self.note = ""  # said once the local index is open, so an error stays one line
        self.quiet = quiet
        self.socket = socket_path(socket, settings.daemon.socket, settings.state_dir)
        self.state_dir = str(settings.state_dir) if explicit_state_dir else None
        if no_daemon:
            return
        if problem := socket_problem(self.socket):
            self.note = f"vaultmem: {problem}; answering in-process"
            return
        try:
            self.client = Client(self.socket, timeout=PING_SECONDS * patience)
            probe = self.client.request({"op": "ping", "state_dir": self.state_dir})
        except UntrustedSocket as err:
            self.client = None
            self.note = f"vaultmem: {err}; answering in-process"
            return
        except DaemonUnavailable as err:
            if self.client is not None:
                self.client.close()
                self.client = None
                self.note = f"vaultmem: {err}; answering in-process"
            else:
                self.note = f"vaultmem: no daemon at {self.socket}; answering in-process"
            return
        if not probe.get("ok"):
            self.note = (f"vaultmem: the daemon at {self.socket} serves another index ({probe.get('error')}); "
                         "answering in-process")
            self.client.close()
            self.client = None
            return
        theirs, mine = probe.get("state_dir"), str(settings.state_dir)
        if theirs and theirs != mine:  # another HOME's daemon, say, of the same user
            if (settings.state_dir / "catalog.sqlite3").is_file():  # this shell has an index of its own
                self.note = (f"vaultmem: the daemon at {self.socket} keeps {theirs}, not {mine}; answering "
                             f"in-process from {mine}")
                self.client.close()
                self.client = None
            elif not quiet:
                print(f"vaultmem: answered by the daemon at {self.socket}, which keeps {theirs} ({mine} has no "
                      "index)", file=sys.stderr)

    def request(self, req: dict) -> dict:
        check_unicode(req)  # before it is sent: the client could not even encode it
        if self.client is not None:
            op = req.get("op")
            reads = op not in LONG_OPS and op not in WRITES_OPS
            timeout = None if op in LONG_OPS else (READ_SECONDS if reads else WRITE_SECONDS) * self.patience
            try:
                out = self.client.request({**req, "state_dir": self.state_dir}, timeout=timeout)
            except DaemonUnavailable as err:
                if not reads:
                    raise VaultmemError(str(err)) from None
                self.client.close()
                self.client = None  # a read is answered here instead, and said so
                self.note = f"vaultmem: {err}; answering in-process"
                return self._local(req)
            if not out.get("ok"):
                raise DaemonError(out)
            return out
        return self._local(req)

    def _local(self, req: dict) -> dict:
        from . import logs, ops

        logs.ready()  # what opening the index may log is said as the command line asked

        op = req["op"]
        if op not in ops.OPS:
            raise UsageError(f"unknown op {op}")
        if self.local is None:
            self.local = ops.LocalContext(self.settings, on_open=self._say_local)
        if op in ops.WRITES:
            self.local.open(True)
        return ops.OPS[op](self.local, req)

    @property
    def via_daemon(self) -> bool:
        return self.client is not None

    def _say_local(self) -> None:
        if self.note and not self.quiet:
            print(self.note, file=sys.stderr)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.local is not None:
            self.local.close()
