"""From a file's bytes to a `Note`: decode, split off and read the frontmatter, normalise its
keys, cut the body into heading-aware `Chunk`s, and pull out a preview and entities.

Pure functions over bytes and strings: nothing here touches the index, the embedder or the disk
(the scanner reads the file; this module only interprets it). A file that cannot be a note raises
`Unreadable` with a reason a user can act on; malformed frontmatter never does: the body is
indexed and the error is recorded on the note.

About 730 lines, because a note comes in many shapes (YAML, TOML or broken frontmatter, legacy
encodings, tags written five ways, dates in any format, `@imports`, fenced code among headings),
read in one pass; every function is pure, and test_notes.py covers each shape.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

import frontmatter
import yaml

from . import redact
from .agents import is_other_agents_rules
from .text import STOP_WORDS, normalize


class Unreadable(Exception):
    """The file is not a note we can index (binary, not UTF-8, too large, ...)."""


@dataclass(frozen=True)
class Chunk:
    ord: int
    heading: str  # heading path: "CLAUDE.md › Testing › Commands"
    line_start: int  # 1-based, inclusive, in the file (frontmatter counted)
    line_end: int
    text: str


@dataclass(frozen=True)
class Note:
    vault: str
    path: str  # POSIX, relative to the vault root
    topic: str | None
    tags: tuple[str, ...]
    kind: str
    date: str | None  # ISO form as normalised from the frontmatter
    date_ts: float | None  # seconds since the epoch (naive dates taken as UTC)
    importance: float
    supersedes: tuple[str, ...]
    entities: tuple[str, ...]
    summary: str
    preview: str
    meta: dict[str, Any]
    errors: tuple[str, ...]
    chunks: tuple[Chunk, ...] = field(default_factory=tuple)
    secrets: tuple[tuple[int, str], ...] = ()  # (line, kind) of likely secrets, masked in all of the above
    imports: tuple[str, ...] = ()  # `@path` imports as written (imports.py follows those of CLAUDE.md)

    @property
    def key(self) -> str:
        return note_key(self.vault, self.path)


def note_key(vault: str, path: str) -> str:
    return f"{vault}:{path}"


# Bump when parsing, chunking, index_text, embed_text or what the full-text index keeps of them
# change: every note is then re-read (vectors of unchanged text are still reused by content hash).
PIPELINE_VERSION = 23  # 23: secrets masked by the name of their key too (redact.py)

CLAUDE_KEYS = {"name", "description", "type"}
# Keys vaultmem interprets; every other frontmatter key is kept and shown as it is (`extra`).
KNOWN_KEYS = ({"topic", "tags", "tag", "kind", "date", "importance", "supersedes", "entities", "metadata", "id",
               "superseded_by"}  # written by vaultmem itself (mark_superseded), never read as a rule
              | CLAUDE_KEYS)


def extra_keys(meta: dict[str, Any]) -> dict[str, Any]:
    """The frontmatter keys vaultmem does not interpret, with their values."""
    return {k: v for k, v in meta.items() if k not in KNOWN_KEYS}


# ---------------------------------------------------------------- decoding and frontmatter


def decode(data: bytes) -> tuple[str, str | None]:
    """(text, what was not as it should be). UTF-8 (a BOM is dropped), or UTF-16 when a BOM says
    so: Windows "Unicode" text, which PowerShell's `>` writes. Otherwise a NUL byte means a
    binary file. Other bytes are read as well as they can be (_not_utf8), or refused."""
    problem = None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as err:
            raise Unreadable(f"binary file, or not UTF-16 though it starts like it (offset {err.start})") from err
        if "\x00" in text:
            raise Unreadable("binary file (NUL characters)")
    else:
        if b"\x00" in data[:8192]:
            raise Unreadable("binary file (NUL bytes)")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            text, problem = _not_utf8(data, err.start)
    return text.replace("\r\n", "\n").replace("\r", "\n"), problem


_ESCAPED = re.compile("[\udc80-\udcff]+")  # bytes that are no UTF-8, as surrogateescape keeps them


def _not_utf8(data: bytes, first: int) -> tuple[str, str]:
    """A note that is not UTF-8 (invalid from byte `first`), read as well as it can be, with
    what was done; or Unreadable. A Japanese or Korean note in its legacy encoding is decoded
    whole (_legacy_cjk). Otherwise single stray bytes are read as Windows-1252: what a paste
    from a Word document or an old Windows editor leaves (’ “ é as one byte each), and what a
    Latin-1 note is throughout ("Größe": now and then two in a row); one such byte made a whole
    note unsearchable. Runs of four or more, or mostly of two and three, are another multi-byte
    encoding (GBK, Big5: every hanzi is two such bytes) or no text at all, and are refused: read
    byte by byte they would be indexed as nonsense."""
    legacy = _legacy_cjk(data)
    if legacy is not None:
        return legacy[0], f"not UTF-8: read as {legacy[1]}"
    text = data.decode("utf-8-sig", errors="surrogateescape")
    stray = _ESCAPED.findall(text)
    if max(map(len, stray), default=0) > 3 or sum(map(len, stray)) > 1.5 * len(stray):
        raise Unreadable(f"not UTF-8 (invalid bytes from offset {first}: another encoding, or not text; "
                         "`iconv -f ENCODING -t UTF-8` converts a note)")
    text = _ESCAPED.sub(lambda m: bytes(ord(c) - 0xDC00 for c in m.group(0)).decode("cp1252", errors="replace"), text)
    return text, f"not UTF-8: {len(stray)} byte(s) from offset {first} read as Windows-1252"


# kana, kanji, Japanese punctuation and full-width letters; not half-width katakana, which is
# what Latin-1 capitals (Ä, Ö, Ü) decode to as Shift_JIS
_JAPANESE = re.compile("[\u3000-\u30ff\u4e00-\u9fff\uff01-\uff5e]")
_KANA = re.compile("[\u3041-\u30ff]")
_HANGUL = re.compile("[\uac00-\ud7a3]")


def _legacy_cjk(data: bytes) -> tuple[str, str] | None:
    """(text, encoding) when `data` decodes strictly as Shift_JIS, EUC-JP or EUC-KR into what
    reads as Japanese (kana, kanji and their punctuation, with some kana: Japanese text never
    lacks it) or Korean (hangul). Bytes of other text decode into these encodings too, but as
    scattered kanji, half-width katakana or private-use characters, which the test refuses.
    EUC-KR proper, not Windows' cp949: cp949's added syllables take ASCII letters as second
    bytes, and a Shift_JIS "テスト" read as cp949 is three such syllables."""
    for codec, name, script, needs in (("cp932", "Shift_JIS", _JAPANESE, _KANA),
                                       ("euc_jp", "EUC-JP", _JAPANESE, _KANA),
                                       ("euc_kr", "EUC-KR", _HANGUL, _HANGUL)):
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        wide = sum(1 for c in text if ord(c) > 0x7F)
        if wide and needs.search(text) and len(script.findall(text)) >= 0.9 * wide:
            return text, name
    return None


class _TomlHandler(frontmatter.default_handlers.BaseHandler):
    """`+++` TOML frontmatter read with the standard library's tomllib (python-frontmatter's
    own TOML handler needs the third-party `toml` package and is absent without it)."""

    FM_BOUNDARY = re.compile(r"^\+{3,}\s*$", re.MULTILINE)
    START_DELIMITER = END_DELIMITER = "+++"

    def load(self, fm: str, **kwargs: object) -> Any:
        return tomllib.loads(fm)


HANDLERS = [frontmatter.default_handlers.YAMLHandler(), frontmatter.default_handlers.JSONHandler(), _TomlHandler()]
MAX_META_VALUES = 50_000  # values a frontmatter may hold once its aliases are expanded


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML's safe loader, refusing a document whose aliases make it larger than
    MAX_META_VALUES values or refer to itself: nine lines of nested aliases (a "billion
    laughs") expand to 387 million strings, and turning that into a note took the writer
    hours; a self-reference never ended. libyaml's parser when PyYAML has it (its wheels do):
    the pure-Python one was a third of the time of reading a note."""

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None and _expanded_size(node, {}, set()) > MAX_META_VALUES:
            raise yaml.YAMLError(f"its aliases expand it to more than {MAX_META_VALUES:,} values")
        return node


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_: set[int]) -> int:
    """Values under `node` with every alias expanded, counted once per distinct node."""
    if id(node) in sizes:
        return sizes[id(node)]
    if id(node) in open_:
        raise yaml.YAMLError("an alias refers to a value that contains it (a loop)")
    open_.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    total = 1
    for child in children:
        total += _expanded_size(child, sizes, open_)
        if total > MAX_META_VALUES:  # enough to refuse it; counting on could take as long
            break
    open_.discard(id(node))
    sizes[id(node)] = total
    return total


# Cursor's rule files hold `key: text` lines that look like YAML and are not: its own docs write
# `globs: **/*.ts, **/*.tsx`, unquoted (a YAML alias). Read line by line, as Cursor reads them,
# and not called malformed; so are the other agents' rule files (imports.is_other_agents_rules).
NOT_YAML_SUFFIXES = (".mdc",)


def split_frontmatter(text: str, yaml_only: bool = True) -> tuple[dict[str, Any], str, int, list[str]]:
    """Return (metadata, body, body_first_line (1-based), errors). `yaml_only=False`: frontmatter
    that does not parse as YAML is read line by line without an error (NOT_YAML_SUFFIXES)."""
    lead = len(text) - len(text.lstrip())
    stripped = text[lead:]
    handler = frontmatter.detect_format(stripped, HANDLERS)
    if handler is None:
        return {}, text, 1, []
    try:
        fm, content = handler.split(stripped)
    except ValueError:  # an opening fence with no closing one: it is all body
        return {}, text, 1, []
    body_start = len(text) - len(content)
    first_line = text.count("\n", 0, body_start) + 1
    errors: list[str] = []
    try:
        meta = handler.load(fm, Loader=_Loader) if isinstance(handler, frontmatter.default_handlers.YAMLHandler) else handler.load(fm)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        if yaml_only:
            errors.append(f"malformed frontmatter{where}: {problem}; read it line by line")
        meta = _lenient_meta(fm)
    except Exception as err:  # JSON/TOML handlers raise their own error types
        errors.append(f"malformed frontmatter: {err}")
        meta = _lenient_meta(fm)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        errors.append("frontmatter is not a mapping; ignored")
        meta = {}
    return meta, content, first_line, errors


def _lenient_meta(fm: str) -> dict[str, Any]:
    """Salvage what YAML that does not parse still says, entry by entry: each top-level
    `key:` line with the indented or `- ` lines under it is read as YAML on its own, so one bad
    line (an unquoted ': ' in a description) costs only its own value, which is then kept as
    the line's text. A block list of tags or a nested `metadata:` elsewhere survives."""
    meta: dict[str, Any] = {}
    entries: list[list[str]] = []
    for line in fm.splitlines():
        if re.match(r"^[A-Za-z_][\w-]*:(\s|$)", line):
            entries.append([line])
        elif entries and (line[:1] in (" ", "\t", "-") or not line.strip()):
            entries[-1].append(line)
    for lines in entries:
        key, raw = lines[0].split(":", 1)
        try:
            parsed = yaml.load("\n".join(lines), Loader=_Loader)
        except Exception:  # what failed the whole may fail here too: a YAMLError, or a
            parsed = None  # ValueError from a timestamp like 2025-13-45; the text is kept below
        if isinstance(parsed, dict) and list(parsed) == [key]:
            meta[key] = parsed[key]
            continue
        value = raw.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        meta[key] = value
    return meta


# ---------------------------------------------------------------- normalising keys


def parse_tags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    # a string may be a flow list YAML could not read ("[ops, deploy" in broken frontmatter)
    items = value if isinstance(value, (list, tuple)) else re.split(r"[,\s]+", str(value).strip().strip("[]"))
    out: list[str] = []
    for item in items:
        tag = str(item).strip().lstrip("#").strip()
        if tag and tag not in out:
            out.append(tag)
    return tuple(out)


# Inline tags as Obsidian reads them: `#` at a line start or after white space, then letters,
# digits, `_`, `-` and `/` (nested tags: #project/alpha), at least one of them a letter (#123 is
# an issue number); not in code, not a heading (`# Title`), not a URL's or a link's anchor.
INLINE_TAG = re.compile(r"(?:^|(?<=\s))#([\w/-]*[^\W\d_][\w/-]*)")
MAX_INLINE_TAGS = 64


def note_tags(declared: tuple[str, ...], body: str) -> tuple[str, ...]:
    """The frontmatter's tags, then the body's inline tags, each once (case folded, as
    Obsidian and the tag filter compare them)."""
    out: list[str] = []
    seen: set[str] = set()
    for tag in declared:
        if (key := normalize(tag)) not in seen:
            seen.add(key)
            out.append(tag)
    inline = 0
    for line in _prose_lines(body, "#"):
        for m in INLINE_TAG.finditer(line):
            tag = m.group(1).strip("/")
            key = normalize(tag)
            if tag and key not in seen:
                seen.add(key)
                out.append(tag)
                inline += 1
                if inline == MAX_INLINE_TAGS:
                    return tuple(out)
    return tuple(out)


def parse_list(value: Any) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return tuple(s for s in (str(i).strip() for i in items) if s)


def parse_date(value: Any) -> tuple[str | None, float | None]:
    """Accept a date, a datetime, or any ISO string (also with '/' or 'Z'). Naive is UTC."""
    if value is None or value == "":
        return None, None
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        moment = dt.datetime(value.year, value.month, value.day)
    else:
        s = str(value).strip().replace("/", "-")
        if s.endswith(("Z", "z")):
            s = s[:-1] + "+00:00"
        try:
            moment = dt.datetime.fromisoformat(s)
        except ValueError:
            m = re.match(r"^(\d{4})-(\d{1,2})-(\d{1,2})", s)
            if not m:
                raise ValueError(f"date {value!r} is not an ISO date") from None
            try:
                moment = dt.datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            except ValueError as err:  # 2025-13-45
                raise ValueError(f"date {value!r} is no day of the calendar ({err})") from None
    aware = moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)
    text = moment.isoformat() if (moment.hour or moment.minute or moment.second or moment.tzinfo) else moment.date().isoformat()
    return text, aware.timestamp()


# When a note was written, where it has no `date`: the keys other tools write for it (Obsidian
# templates and its Linter, Hugo, Jekyll), the last edit before the creation. Without any, the
# file's modification time orders a topic chain (supersession.py).
DATE_FALLBACK_KEYS = ("updated", "modified", "date modified", "lastmod", "last_modified_at", "created",
                      "date created")


def note_date(meta: dict[str, Any], declared: Any, errors: list[str]) -> tuple[str | None, float | None]:
    """The note's date: `declared` (its `date`), else the first fallback key that reads as an
    ISO date. A `date` that does not read is a recorded error; another tool's key that does not
    (the Linter's "Wednesday, March 4th 2026") is its own business and passed over quietly."""
    problem = None
    try:
        date, date_ts = parse_date(declared)
    except ValueError as err:
        problem, date, date_ts = str(err), None, None
    used = "date"
    for key in DATE_FALLBACK_KEYS if date is None else ():
        try:
            date, date_ts = parse_date(meta.get(key))
        except ValueError:
            continue
        if date is not None:
            used = key
            break
    if problem:
        errors.append(f"{problem}; the note counts as undated" if date is None else f"{problem}; its {used!r} is used")
    return date, date_ts


def date_source(meta: dict[str, Any], date_ts: float | None) -> str:
    """Which frontmatter key gave a note its date `date_ts` (`date`, or a fallback key), or
    "mtime" when it has none and the file's modification time orders it."""
    if date_ts is not None:
        for key in ("date", *DATE_FALLBACK_KEYS):
            try:
                if parse_date(meta.get(key))[1] == date_ts:
                    return key
            except ValueError:
                continue
    return "mtime"


def _plain(value: Any) -> Any:
    """Frontmatter values made JSON-safe (dates to ISO strings)."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


# ---------------------------------------------------------------- entities

WIKILINK = re.compile(r"\[\[([^\]|#\n]+)(?:[#|][^\]\n]*)?\]\]")
HASHTAG = re.compile(r"(?<![\w&#/])#([^\W\d_][\w/-]*)")
BACKTICK = re.compile(r"(?<!`)`([^`\s]{2,64})`(?!`)")
CAPNAME = re.compile(r"\b([A-Z][a-z]+[A-Za-z]*(?:\s+[A-Z][a-z]+[A-Za-z]*)*)\b")
MAX_ENTITIES = 64


def extract_entities(text: str, declared: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Entity names, most frequent first: declared ones, [[wikilinks]], #tags, `identifiers`,
    and capitalised names (single capitalised stop words such as 'The' are not names)."""
    counts: dict[str, int] = {}
    display: dict[str, str] = {}

    def add(name: str, weight: int = 1) -> None:
        name = name.strip().strip(".,;:()[]{}<>\"'")
        key = normalize(name)
        if len(key) < 2 or key in STOP_WORDS:
            return
        counts[key] = counts.get(key, 0) + weight
        display.setdefault(key, name)

    for name in declared:
        add(name, 1000)
    for m in WIKILINK.finditer(text):
        add(m.group(1), 3)
    for m in HASHTAG.finditer(text):
        add(m.group(1), 2)
    for m in BACKTICK.finditer(text):
        add(m.group(1), 2)
    for m in CAPNAME.finditer(text):
        words = m.group(1).split()
        while words and normalize(words[0]) in STOP_WORDS:
            words = words[1:]
        if words and len("".join(words)) >= 3:
            add(" ".join(words))
    ranked = sorted(counts, key=lambda k: (-counts[k], k))[:MAX_ENTITIES]
    return tuple(display[k] for k in ranked)


# ---------------------------------------------------------------- imports

# Claude Code's memory imports: `@path` at the start of a line or after white space, outside
# code spans and fenced blocks; a backslash escapes a space in the path.
IMPORT = re.compile(r"(?:^|(?<=\s))@((?:[^\s\\]|\\ )+)")
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1")
MAX_IMPORTS = 256


def _prose_lines(body: str, mark: str):
    """The body's lines that hold `mark` outside fenced blocks, their code spans blanked: where
    `@imports` and inline `#tags` are read (code is neither)."""
    in_fence: str | None = None
    for line in body.split("\n"):
        in_fence, fence = _fence(in_fence, line)
        if not (in_fence or fence) and mark in line:
            yield CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line)


def find_imports(body: str) -> tuple[str, ...]:
    """The paths a note's `@path` imports name, as written, in order, each once. Trailing
    punctuation of the sentence is not part of the path (`see @AGENTS.md.`). Which of them are
    files, and where, is for imports.py to say."""
    found: list[str] = []
    for line in _prose_lines(body, "@"):
        for m in IMPORT.finditer(line):
            path = m.group(1).replace("\\ ", " ").rstrip(".,;:!?)]}>\"'*_")
            if path and path[0] not in "@#" and path not in found:
                found.append(path)
                if len(found) == MAX_IMPORTS:
                    return tuple(found)
    return tuple(found)


# ---------------------------------------------------------------- chunking

# a closing run of #s counts only after white space (CommonMark): `# Notes on C#` keeps its `#`
ATX = re.compile(r"^(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
# A setext heading: one line of text underlined with = (level 1) or - (level 2), as pandoc and
# other converters write them. Taken only under a one-line paragraph that is no list item, quote,
# table row or HTML, so that a --- under a run of text stays what its writer most likely meant.
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
NOT_SETEXT_TEXT = re.compile(r"^(?: {4}|\t|[ \t]*(?:[-*+>|<]|\d+[.)])(?:[ \t]|$))")


def _fence(open_: str | None, line: str) -> tuple[str | None, bool]:
    """(the code fence open after `line`, given the one open before it; whether `line` is a
    fence line). A fence closes only with the marker that opened it."""
    fence = FENCE.match(line)
    if not fence:
        return open_, False
    return (None if open_ == fence.group(1) else (open_ or fence.group(1))), True


def _heading(lines: list[str], i: int) -> tuple[int, str] | None:
    """(level, text) when line i, outside code, starts a heading: ATX, or setext (SETEXT)."""
    line = lines[i]
    if m := ATX.match(line):
        return len(m.group(1)), m.group(2).strip()
    if (i + 1 < len(lines) and line.strip() and (i == 0 or not lines[i - 1].strip())
            and not NOT_SETEXT_TEXT.match(line) and not SETEXT.match(line) and (m := SETEXT.match(lines[i + 1]))):
        return (1 if m.group(1)[0] == "=" else 2), line.strip()
    return None


def _heading_only(text: str) -> bool:
    lines = text.split("\n")
    if len(lines) == 1:
        return bool(ATX.match(text))
    return len(lines) == 2 and bool(SETEXT.match(lines[1])) and _heading(lines, 0) is not None


def chunk_body(body: str, first_line: int, title: str, max_chars: int) -> list[Chunk]:
    """Cut at headings (not inside code fences); each chunk carries its heading path and its
    1-based line range in the file. Sections longer than max_chars are split at blank lines,
    and single paragraphs longer than that at line ends."""
    lines = body.split("\n")
    sections: list[tuple[str, int, list[str]]] = []  # (heading path, first index, lines)
    stack: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    in_fence: str | None = None
    path = title
    for i, line in enumerate(lines):
        in_fence, fence = _fence(in_fence, line)
        head = None if in_fence or fence else _heading(lines, i)
        if head:
            if current:
                sections.append((path, start, current))
            level, name = head
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, name))
            names = [h for _, h in stack]
            if names and normalize(names[0]) in (normalize(title), normalize(title.rsplit(".", 1)[0])):
                names = names[1:]  # "# CLAUDE.md" under CLAUDE.md says nothing new
            path = " › ".join([title] + names)
            current, start = [line], i
        else:
            current.append(line)
    if current:
        sections.append((path, start, current))

    chunks: list[Chunk] = []
    for heading, begin, sec_lines in sections:
        for offset, piece in _split_section(sec_lines, max_chars):
            text = "\n".join(piece).strip("\n")
            if not text.strip() or (len(sections) > 1 and _heading_only(text)):
                continue  # blank, or a heading with nothing under it
            lead = next(j for j, ln in enumerate(piece) if ln.strip())
            trail = max(j for j, ln in enumerate(piece) if ln.strip())
            chunks.append(Chunk(
                ord=len(chunks), heading=heading,
                line_start=first_line + begin + offset + lead,
                line_end=first_line + begin + offset + trail,
                text=text,
            ))
    return chunks


def _split_section(lines: list[str], max_chars: int) -> list[tuple[int, list[str]]]:
    if sum(len(ln) + 1 for ln in lines) <= max_chars:
        return [(0, lines)]
    # paragraphs: runs of lines separated by blank lines (a blank line ends a paragraph)
    paras: list[tuple[int, list[str]]] = []
    cur: list[str] = []
    cur_start = 0
    for i, ln in enumerate(lines):
        if not cur:
            cur_start = i
        cur.append(ln)
        if not ln.strip():
            paras.append((cur_start, cur))
            cur = []
    if cur:
        paras.append((cur_start, cur))
    # paragraphs that alone are too long are cut at line ends, and lines too long (a paragraph
    # an editor soft-wraps, a pasted log) within the line; its pieces all have its line number
    units: list[tuple[int, list[str]]] = []
    for start, para in paras:
        if sum(len(ln) + 1 for ln in para) <= max_chars:
            units.append((start, para))
        else:
            units.extend((start + j, [piece]) for j, ln in enumerate(para) for piece in _cut_line(ln, max_chars))
    out: list[tuple[int, list[str]]] = []
    acc: list[str] = []
    acc_start = last = -1
    size = 0
    for start, unit in units:
        usize = sum(len(ln) + 1 for ln in unit)
        if acc and (size + usize > max_chars or start == last):  # two pieces of one line never join
            out.append((acc_start, acc))
            acc, size = [], 0
        if not acc:
            acc_start = start
        acc = acc + unit
        size += usize
        last = start
    if acc:
        out.append((acc_start, acc))
    return out


def _cut_line(line: str, max_chars: int) -> list[str]:
    """`line` in pieces of at most max_chars, each cut after the last space or sentence end in
    its second half, or at max_chars in text that has neither there."""
    pieces = []
    while len(line) > max_chars:
        window = line[:max_chars]
        cut = max(window.rfind(c) for c in " \t。．！？") + 1
        if cut <= max_chars // 2:
            cut = max_chars
        pieces.append(line[:cut])
        line = line[cut:]
    pieces.append(line)
    return pieces


# ---------------------------------------------------------------- the note


def parse_note(vault: str, path: str, data: bytes, *, chunk_chars: int = 1500,
               preview_chars: int = 500) -> Note:
    """Interpret one file's bytes. Raises Unreadable for files that are not text notes.
    Likely secrets are masked before anything else reads the text (see redact.py)."""
    text, problem = decode(data)
    found = redact.find(text)
    text = redact.mask(text, found)
    meta, body, first_line, errors = split_frontmatter(
        text, yaml_only=not (path.endswith(NOT_YAML_SUFFIXES) or is_other_agents_rules(path)))
    if problem:
        errors.insert(0, problem)
    meta = {str(k): v for k, v in meta.items()}
    nested: dict = meta["metadata"] if isinstance(meta.get("metadata"), dict) else {}

    def pick(key: str) -> Any:
        value = meta.get(key)
        if value in (None, "") and key in CLAUDE_KEYS:
            value = nested.get(key)
        return value

    topic = pick("topic") or pick("name")
    topic = str(topic).strip() if topic not in (None, "") else None
    kind = str(pick("kind") or pick("type") or "knowledge").strip().lower() or "knowledge"
    summary = str(pick("description") or "").strip()
    date, date_ts = note_date(meta, pick("date"), errors)
    importance = 0.5
    if pick("importance") not in (None, ""):
        try:
            importance = min(1.0, max(0.0, float(pick("importance"))))
        except (TypeError, ValueError):
            errors.append(f"importance {pick('importance')!r} is not a number; using 0.5")
    stripped_body = body.strip()
    preview = stripped_body[:preview_chars]
    title = path.rsplit("/", 1)[-1]
    chunks = chunk_body(body, first_line, title, chunk_chars)
    if not chunks and summary:
        chunks = [Chunk(0, title, 1, max(1, first_line - 1), summary)]
    # Obsidian's `aliases` are other names of what the note is about: a query naming one finds it
    # (`tag` and `alias`: the singular keys Obsidian still reads from older notes)
    entities = extract_entities(body, parse_list(pick("entities")) + parse_list(pick("aliases"))
                                + parse_list(pick("alias")))
    return Note(
        vault=vault,
        path=path,
        topic=topic,
        tags=note_tags(parse_tags(pick("tags")) + parse_tags(pick("tag")), body),
        kind=kind,
        date=date,
        date_ts=date_ts,
        importance=importance,
        supersedes=parse_list(pick("supersedes")),
        entities=entities,
        summary=summary,
        preview=preview or summary[:preview_chars],
        meta=_plain(meta),
        errors=tuple(errors),
        chunks=tuple(chunks),
        secrets=tuple((f.line, f.kind) for f in found),
        imports=find_imports(body),
    )


def index_text(note: Note, chunk: Chunk) -> str:
    """What the full-text index reads for a chunk: its heading path and text; the first chunk
    also carries the note's topic and summary so that a note is found by what it is about."""
    return _index_text(chunk.heading, chunk.ord, chunk.text, note.topic, note.summary)


def _index_text(heading: str, ord: int, text: str, topic: str | None, summary: str | None) -> str:
    head = heading
    if ord == 0:
        extra = " ".join(x for x in (topic or "", summary or "") if x)
        if extra:
            head = f"{head}\n{extra}"
    return f"{head}\n{text}"


# Markdown markup a sentence encoder reads as words: bold/underline markers, backticks, and a
# link's target (its text stays). Heading markers stay: dropping them too cost JSQuAD.
_EMPHASIS = re.compile(r"\*\*|__|`")
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")


def embed_text(note: Note, chunk: Chunk) -> str:
    """What the embedder reads for a chunk (policy in one place; measured with bench/eval.py).
    The full-text index's text (dropping the file name, topic and headings lowered LoCoMo
    vector R@5 from 0.601 to 0.573, since headings carry names and dates) without the markup
    in _EMPHASIS and _LINK: vector R@5 LoCoMo turns 0.618 -> 0.642, session 0.747 -> 0.786,
    JSQuAD 0.853 unchanged; hybrid 0.897 -> 0.896, 0.955 -> 0.959, 0.970 unchanged."""
    return _LINK.sub(r"\1", _EMPHASIS.sub("", index_text(note, chunk)))


def embed_text_of(heading: str, ord: int, text: str, topic: str | None, summary: str | None) -> str:
    """embed_text from what the catalog keeps of a chunk and its note (the vectors filled in
    after a first index that made text search ready first)."""
    return _LINK.sub(r"\1", _EMPHASIS.sub("", _index_text(heading, ord, text, topic, summary)))


def content_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
