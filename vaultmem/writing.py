"""Writing files safely, and the only code that writes into a vault, and only when the user
asks: a new note for `vaultmem remember`, a deleted file for `vaultmem forget --delete`, and,
when the user turned `mark_superseded` on, one frontmatter line (`set_frontmatter_key`,
`rewrite_note`). Everything else in vaultmem reads notes and never changes them. vaultmem's
own files outside the index (inventory reports, the Claude Code settings entry it installs,
the model table the daemon maps) are replaced whole with `replace_file`.

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
import stat
import tempfile
import time
import unicodedata
from pathlib import Path
from collections.abc import Sequence
from typing import BinaryIO, Callable

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


def render(topic: str, body: str, *, tags: Sequence[str] = (), kind: str | None = None,
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
        os.fchmod(fd, 0o600)  # the user's alone, as the rest of what vaultmem writes (private.py)
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


_DATE_LINE = re.compile(r"(?m)^date: .*\n")


def same_note(directory: Path, stem: str, text: str) -> Path | None:
    """A note `write_new(directory, stem, text)` wrote already (`stem.md`, `stem-2.md`, ...) with
    the same text but for its date line: a retry of a `remember` whose note was written while
    its indexing failed (a full disk) must not leave a second copy."""
    want = _DATE_LINE.sub("", text, count=1)
    try:
        names = [e.name for e in os.scandir(directory) if e.is_file(follow_symlinks=False)]
    except OSError:
        return None
    for name in sorted(names):
        if name == f"{stem}.md" or re.fullmatch(re.escape(stem) + r"-\d+\.md", name):
            try:
                have = (directory / name).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if _DATE_LINE.sub("", have, count=1) == want:
                return directory / name
    return None


def sweep_temp(directory: Path, older_than: float = STALE_TEMP_SECONDS) -> list[Path]:
    """Remove the temp files a killed writer left in `directory` (only names vaultmem makes,
    only ones older than any write takes); returns what was removed."""
    removed: list[Path] = []
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


def replace_file(path: Path, content: str | bytes | Callable[[BinaryIO], object]) -> None:
    """Replace `path` whole with `content` (text, bytes, or a function that writes to the open
    file), atomically: temp file beside it, fsync, rename, fsync of the directory. Readers see
    the old file or the new one, never a part. A symlink (a dotfiles checkout's settings file)
    stays a symlink: its target is replaced. An existing file keeps its mode; a new one is
    private (0600)."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = None
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=TEMP_SUFFIX)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content.encode("utf-8") if isinstance(content, str) else content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


_FENCE = re.compile(r"-{3,}[ \t]*")  # python-frontmatter's YAML boundary: a line of 3+ dashes


def set_frontmatter_key(data: bytes, key: str, value: str | None) -> bytes | None:
    """A note's bytes with the top-level frontmatter `key` set to the string `value`, or removed
    (`value` None); every other byte stays as it was. A note without frontmatter gets a block of
    that one key, and loses the block again when the key is removed. None when that cannot be
    done safely: not UTF-8, frontmatter that is not plain YAML at the very start (TOML, JSON,
    indented) or does not parse. The result is parsed back and must carry `value`, the same
    other keys and the same body, or None is returned."""
    import yaml

    from .notes import split_frontmatter

    bom = b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b""
    try:
        text = data[len(bom):].decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.splitlines(keepends=True)
    nl = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    line = yaml.safe_dump({key: value}, allow_unicode=True, width=1_000_000).rstrip("\n") + nl
    own = re.compile(re.escape(key) + r"[ \t]*:")
    if lines and _FENCE.fullmatch(lines[0].rstrip("\r\n")):
        end = next((j for j in range(1, len(lines)) if _FENCE.fullmatch(lines[j].rstrip("\r\n"))), None)
        if end is None:
            return None
        mine = []  # our key's line and its continuation lines (a nested or multi-line value)
        for j in range(1, end):
            if own.match(lines[j]):
                mine.append(j)
            elif mine and mine[-1] == j - 1 and lines[j][:1] in (" ", "\t"):
                mine.append(j)
        keep = [ln for j, ln in enumerate(lines[1:end], 1) if j not in mine]
        if value is None:
            head = [] if not keep else [lines[0], *keep, lines[end]]  # a block of ours alone goes
        else:
            at = mine[0] - 1 if mine else len(keep)
            head = [lines[0], *keep[:at], line, *keep[at:], lines[end]]
        new = "".join(head) + "".join(lines[end + 1 :])
    else:
        if split_frontmatter(text.replace("\r\n", "\n"))[2] != 1:
            return None  # frontmatter of another kind (TOML, JSON, indented YAML): not ours to edit
        if value is None:
            return data
        new = "---" + nl + line + "---" + nl + text
    old_meta, old_body = _parsed(text)
    new_meta, new_body = _parsed(new)
    if old_meta is None or new_meta is None:
        return None
    old_meta.pop(key, None)
    got = new_meta.pop(key, None)
    if got != value or new_meta != old_meta or new_body != old_body:
        return None
    return bom + new.encode("utf-8")


def _parsed(text: str) -> tuple[dict | None, str]:
    """(frontmatter, body) as the indexer reads them; the body without the newline that ends
    the closing fence. Frontmatter that does not parse cleanly comes back as None."""
    from .notes import split_frontmatter

    meta, body, first_line, errors = split_frontmatter(text.replace("\r\n", "\n"))
    if first_line > 1 and body.startswith("\n"):
        body = body[1:]
    return (None if errors else meta), body


def not_rewritable(st: os.stat_result) -> str | None:
    """Why a note with this lstat must not be replaced by rewrite_note, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "it is a symlink"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_nlink != 1:
        return "it has other hard links, which a replacement would split off"
    if st.st_uid != os.getuid():
        return "it belongs to another user"
    return None


def rewrite_note(path: Path, expect: bytes, new: bytes) -> bool:
    """Replace the note at `path`, which must still hold exactly `expect`, with `new`:
    atomically (temp file beside it, fsync, rename), keeping its mode and its access and
    modification times (an undated topic chain is ordered by mtime). False, and nothing
    written, when the file changed meanwhile or is `not_rewritable`. The caller fsyncs the
    directories once for a batch (`sync_dirs`); until then a crash may undo a rename, never
    tear a note."""
    try:
        st = os.lstat(path)
        if not_rewritable(st):
            return False
        with open(path, "rb") as f:
            if f.read(len(expect) + 1) != expect:
                return False
    except OSError:
        return False
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=TEMP_SUFFIX)
    try:
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
        with os.fdopen(fd, "wb") as f:
            f.write(new)
            f.flush()
            os.fsync(f.fileno())
        os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns))
        now = os.lstat(path)
        if (now.st_ino, now.st_size, now.st_mtime_ns) != (st.st_ino, st.st_size, st.st_mtime_ns):
            raise FileExistsError  # written to since we read it: leave it to the next pass
        os.replace(name, path)
    except OSError:  # FileExistsError included
        Path(name).unlink(missing_ok=True)
        return False
    return True


def sync_dirs(directories: set[Path]) -> None:
    for d in directories:
        _fsync_dir(d)


def delete(path: Path) -> None:
    os.unlink(path)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
