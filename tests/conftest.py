"""Shared fixtures: small vaults written by the tests themselves, and settings that point a
real index (Tantivy, LanceDB, the bundled embedder) at a temp state dir."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vaultmem.config import resolve
from vaultmem.index import VaultIndex
from vaultmem.search import Query, Searcher

ROOT = Path(__file__).resolve().parent.parent


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


def run_cli(*args: str, input: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.pop("VAULTMEM_CONFIG", None)
    e["XDG_CONFIG_HOME"] = "/nonexistent-vaultmem-test"
    e["VAULTMEM_SOCKET"] = "/nonexistent-vaultmem-test/vaultmem.sock"  # no daemon unless a test starts one
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "vaultmem.cli", *args], capture_output=True, text=True,
                          input=input, env=e, cwd=ROOT, timeout=300)
