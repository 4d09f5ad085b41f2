"""The LanceDB vector table: one row per chunk (chunk id, note key, content hash, vector).
LanceDB and pyarrow are imported here and nowhere else.

The embedder's id and dimension are written into the table's schema metadata; opening the table
with another embedder is refused. Vectors are stored as float16 by default (half the disk, and
LanceDB searches them). Search is an exact scan with the filter applied before ranking, so a
filtered query never loses a correct result to approximation.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa

from .errors import EmbedderMismatchError

log = logging.getLogger(__name__)
TABLE = "chunks"


def sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def in_list(column: str, values: set[str] | list[str]) -> str:
    return f"{column} IN ({', '.join(sql_str(v) for v in sorted(values))})"


class Vectors:
    def __init__(self, directory: Path, embedder_id: str, dim: int, dtype: str = "float16"):
        directory.mkdir(parents=True, exist_ok=True)
        self.db = lancedb.connect(str(directory))
        self.dim = dim
        self.np_dtype = np.float16 if dtype == "float16" else np.float32
        pa_type = pa.float16() if dtype == "float16" else pa.float32()
        self.schema = pa.schema(
            [
                pa.field("chunk", pa.string()),
                pa.field("note", pa.string()),
                pa.field("hash", pa.string()),
                pa.field("vector", pa.list_(pa_type, dim)),
            ],
            metadata={"embedder": embedder_id, "dim": str(dim), "dtype": dtype},
        )
        if TABLE in self.db.list_tables().tables:
            self.table = self.db.open_table(TABLE)
            meta = {k.decode(): v.decode() for k, v in (self.table.schema.metadata or {}).items()}
            if meta.get("embedder") != embedder_id or meta.get("dim") != str(dim):
                raise EmbedderMismatchError(
                    f"the vector index was built with embedder {meta.get('embedder')} "
                    f"({meta.get('dim')}-d), but {embedder_id} ({dim}-d) is configured; "
                    f"run `vaultmem index --rebuild` to re-embed every note"
                )
        else:
            self.table = self.db.create_table(TABLE, schema=self.schema)

    def count(self) -> int:
        return self.table.count_rows()

    def vectors_for_hashes(self, hashes: set[str]) -> dict[str, np.ndarray]:
        """Stored vectors by content hash, so unchanged text is never embedded twice."""
        if not hashes:
            return {}
        got = (
            self.table.search()
            .where(in_list("hash", hashes))
            .select(["hash", "vector"])
            .limit(len(hashes) * 4 + 16)
            .to_arrow()
        )
        out: dict[str, np.ndarray] = {}
        for h, v in zip(got["hash"].to_pylist(), got["vector"].to_numpy(zero_copy_only=False)):
            out[h] = np.asarray(v, dtype=np.float32)
        return out

    def replace(self, delete_notes: set[str], rows: list[tuple[str, str, str, np.ndarray]]) -> None:
        """Remove every chunk of `delete_notes`, then add `rows` (chunk, note, hash, vector)."""
        if delete_notes:
            self.table.delete(in_list("note", delete_notes))
        if rows:
            mat = np.stack([r[3] for r in rows]).astype(self.np_dtype)
            flat = pa.array(mat.ravel())
            batch = pa.table(
                {
                    "chunk": [r[0] for r in rows],
                    "note": [r[1] for r in rows],
                    "hash": [r[2] for r in rows],
                    "vector": pa.FixedSizeListArray.from_arrays(flat, self.dim),
                },
                schema=self.schema,
            )
            self.table.add(batch)

    def search(self, vector: np.ndarray, limit: int, allow: set[str] | None = None,
               deny: set[str] | None = None) -> list[tuple[str, str, float]]:
        """(chunk id, note key, cosine similarity), best first; exact, filter first."""
        if allow is not None and not allow:
            return []
        q = self.table.search(np.asarray(vector, dtype=np.float32)).distance_type("cosine")
        where = []
        if allow is not None:
            where.append(in_list("note", allow))
        if deny:
            where.append("NOT (" + in_list("note", deny) + ")")
        if where:
            q = q.where(" AND ".join(where), prefilter=True)
        got = q.select(["chunk", "note", "_distance"]).limit(limit).to_arrow()
        return [
            (c, n, 1.0 - float(d))
            for c, n, d in zip(got["chunk"].to_pylist(), got["note"].to_pylist(), got["_distance"].to_pylist())
        ]

    def optimize(self) -> None:
        """Compact fragments and drop old versions (deletes leave both behind)."""
        self.table.optimize(cleanup_older_than=timedelta(seconds=0))
