"""Writing files safely, and the only code that writes into a vault, and only when the user
asks: a new note for `vaultmem remember`, a deleted file for `vaultmem forget --delete`.
Everything else in vaultmem reads notes and never changes them. vaultmem's own files outside
the index (inventory reports, the Claude Code settings entry it installs) are replaced whole
with `replace_file`.

New notes are written atomically and never over an existing file: the text goes to a temp file
in the target directory, is fsynced, then hard-linked to its final name (which fails if the
name exists, so a concurrent writer is never overwritten), the temp name is removed and the
directory fsynced. A writer killed in between leaves a hidden temp file, never a half note; the
next write into that directory removes such leftovers once they are an hour old.
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import os
import re
import tempfile
import time
import unicodedata
from pathlib import Path

log = logging.getLogger(__name__)

SLUG_CHARS = 60
TEMP_SUFFIX = ".vaultmem-tmp"  # a hidden `.<stem>.<random>.vaultmem-tmp`: ours, and never a note
STALE_TEMP_SECONDS = 3600  # no write takes this long; an older temp file was left by a crash


def slug(topic: str) -> str:
    """A readable file-name stem from a topic in any language: letters and digits of every
    script kept, everything else (slashes, dots, spaces, punctuation) folded to single dashes."""
    s = unicodedata.normalize("NFKC", topic).casefold()
    s = re.sub(r"[^\w]+|_+", "-", s).strip("-")
    s = s[:SLUG_CHARS].rstrip("-")
    return s or "note"


def render(topic: str, body: str, *, tags: list[str] = (), kind: str | None = None,
           importance: float | None = None, when: dt.datetime | None = None) -> str:
    """The text of a new note: YAML frontmatter (topic, date with time zone, kind, tags,
    importance) and the body, ending in a newline."""
    import yaml  # only remember needs it; replace_file is used by light client paths

    when = when or dt.datetime.now().astimezone()
    head = yaml.safe_dump({"topic": topic}, allow_unicode=True, width=10_000).strip()
    lines = ["---", head, f"date: {when.replace(microsecond=0).isoformat()}"]
    if kind:
        lines.append(yaml.safe_dump({"kind": kind}, allow_unicode=True).strip())
    if tags:
        lines.append(yaml.safe_dump({"tags": list(tags)}, allow_unicode=True, default_flow_style=True,
                                    width=10_000).strip().strip("{}"))
    if importance is not None:
        lines.append(f"importance: {importance:g}")
    lines.append("---")
    return "\n".join(lines) + "\n" + body.strip("\n") + "\n"


def write_new(directory: Path, stem: str, text: str) -> Path:
    """Write `text` to `directory/stem.md` (or `stem-2.md`, `stem-3.md`, ... if taken),
    atomically and without ever replacing a file. Returns the path written."""
    directory.mkdir(parents=True, exist_ok=True)
    sweep_temp(directory)
    fd, name = tempfile.mkstemp(dir=directory, prefix=f".{stem[:40]}.", suffix=TEMP_SUFFIX)
    tmp = Path(name)
    try:
        os.fchmod(fd, 0o644 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        for n in range(1, 10_000):
            target = directory / (f"{stem}.md" if n == 1 else f"{stem}-{n}.md")
            try:
                os.link(tmp, target)
            except FileExistsError:
                continue
            except OSError as err:
                if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                    raise
                if target.exists():  # a file system without hard links: check, then rename
                    continue
                os.rename(tmp, target)
            _fsync_dir(directory)
            return target
        raise FileExistsError(f"no free file name for {stem} in {directory}")
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def sweep_temp(directory: Path, older_than: float = STALE_TEMP_SECONDS) -> list[Path]:
    """Remove the temp files a killed writer left in `directory` (only names vaultmem makes,
    only ones older than any write takes); returns what was removed."""
    removed = []
    cutoff = time.time() - older_than
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for e in entries:
        if not (e.name.startswith(".") and e.name.endswith(TEMP_SUFFIX)):
            continue
        try:
            if e.is_file(follow_symlinks=False) and e.stat(follow_symlinks=False).st_mtime < cutoff:
                os.unlink(e.path)
                removed.append(Path(e.path))
        except OSError:
            continue
    if removed:
        log.info("removed %d temp file(s) left by an interrupted write in %s", len(removed), directory)
    return removed


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def replace_file(path: Path, text: str) -> None:
    """Replace `path` whole with `text`, atomically: temp file beside it, fsync, rename, fsync
    of the directory. Readers see the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def delete(path: Path) -> None:
    os.unlink(path)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
