"""What a request asks for: a query built from options given by the CLI, a batch line or a
socket request, and the checks every request field goes through (a wrong type is a UsageError,
never a crash). Standard library only: the thin client imports this, and nothing heavy."""

from __future__ import annotations

import json
import os
import re
import time
import unicodedata
from typing import Any, NamedTuple, overload

from .errors import UsageError


class Query(NamedTuple):
    text: str
    k: int = 10
    tags: tuple[str, ...] = ()
    any_tags: bool = False
    kinds: tuple[str, ...] = ()
    topic: str | None = None
    vaults: tuple[str, ...] = ()
    path_glob: str | None = None
    history: bool = False
    mode: str = "hybrid"
    explain: bool = False
    half_life_days: float | None = None
    as_of: float | None = None  # seconds since the epoch: answer as the vault stood then
    task: str | None = None  # attributes the hits to this task in the usage records
    record: bool = True  # count the hits as retrieved
    section_chars: int = 0  # > 0: each hit carries its matching section, clipped to this
    min_relevance: float = 0.0  # hits less likely than this to answer the query are dropped
    since: float | None = None  # only notes written (date, else mtime) at or after this
    where: tuple[tuple[str, str], ...] = ()  # other frontmatter keys: (key, value) pairs, all must hold
    until: float | None = None  # ...and before this



# option names accepted in a request, with their aliases
OPTIONS = ("text", "k", "tags", "tag", "any_tags", "kinds", "kind", "topic", "vaults", "vault", "path",
           "history", "mode", "explain", "half_life", "as_of", "task", "record",
           "section_chars", "since", "until", "where", "min_relevance")


def check_unicode(req: dict) -> None:
    """Every string in the request is Unicode text. JSON can spell a lone surrogate ("\\udcff"),
    and so do bytes that are no UTF-8 on a command line; either failed only when the text was
    written somewhere (a catalog lookup, a note), as an internal error."""
    try:
        json.dumps(req, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        bad = err.object[err.start]
        raise UsageError(f"the request holds {bad!r}, half of a surrogate pair: not Unicode text") from None


@overload
def text_field(req: dict, key: str, required: str, one_line: bool = False) -> str: ...
@overload
def text_field(req: dict, key: str, required: None = None, one_line: bool = False) -> str | None: ...
def text_field(req: dict, key: str, required: str | None = None, one_line: bool = False) -> str | None:
    """A string field (None when absent; `required` is the error if it must be there)."""
    value = req.get(key)
    if value is None or value == "":
        if required:
            raise UsageError(required)
        return None
    if not isinstance(value, str):
        raise UsageError(f"{key} must be a string, not {type(value).__name__}")
    if "\x00" in value or (one_line and any(c in value for c in "\r\n")):
        raise UsageError(f"{key} must be {'one line of ' if one_line else ''}text without NUL characters")
    return value


def list_field(req: dict, key: str) -> list[str]:
    """A field that is one string or a list of strings."""
    value = req.get(key)
    if value is None or value == "" or value == []:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) and "\x00" not in i for i in items):
        raise UsageError(f"{key} must be a string or a list of strings")
    return [i for i in items if i.strip()]


def number_field(req: dict, key: str, lo: float, hi: float) -> float | None:
    value = req.get(key)
    if value is None or value == "":
        return None
    try:
        n = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        n = float("nan")
    if not lo <= n <= hi:
        raise UsageError(f"{key} must be a number from {lo:g} to {hi:g}, not {value!r}")
    return n


_UNIT_SECONDS = {"m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400,
                 "w": 7 * 86400, "week": 7 * 86400, "mo": 30 * 86400, "month": 30 * 86400,
                 "y": 365 * 86400, "year": 365 * 86400}
_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+?)s?")
MOMENT_HELP = "an ISO date or datetime (2026-03-01, 2026-03-01T12:00), or today, yesterday, 3d, 2 weeks ago"


def span_seconds(text: str) -> float | None:
    """A span of time as seconds: '90m', '36h', '3d', '2w', '6mo', '1y', '2 weeks' (a month is
    30 days, a year 365); None when `text` is not one."""
    m = _SPAN.fullmatch(text.strip().lower())
    if m is None or m.group(2) not in _UNIT_SECONDS:
        return None
    return float(m.group(1)) * _UNIT_SECONDS[m.group(2)]


def parse_half_life(value: Any) -> float | None:
    """Days, as 90, '90', '90d', '12w', '6mo' or '1y' (any span `span_seconds` reads)."""
    if value is None or value == "":
        return None
    v = str(value).strip().lower()
    try:
        days = float(v)
    except ValueError:
        seconds = span_seconds(v.removeprefix("-"))
        if seconds is None:
            raise UsageError(f"half-life {value!r}: give days, e.g. 90 or 90d or 12w") from None
        days = (-seconds if v.startswith("-") else seconds) / 86400
    if days <= 0:
        raise UsageError("half-life must be positive")
    return days


def parse_moment(value: Any, end_of_day: bool = True, now: float | None = None) -> float | None:
    """A moment as seconds since the epoch, for `--as-of`, `--since` and `--until`: an ISO date
    or datetime, `now`, `today`, `yesterday` (your calendar's day), or a span back from now
    (`90m`, `36h`, `3d`, `2w`, `6mo`, `1y`, `2 weeks ago`; a month is 30 days). A date alone
    means the end of that day (notes dated that day count), or its start with
    `end_of_day=False`; naive values are UTC, as note dates are."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    import datetime as dt  # here: most queries name no moment, and every client process imports this module

    s = str(value).strip()
    now = time.time() if now is None else now
    word = s.lower()
    if word == "now":
        return now
    if word in ("today", "yesterday"):
        day = dt.datetime.fromtimestamp(now).date() - dt.timedelta(days=int(word == "yesterday"))
        s = day.isoformat()
    elif (back := span_seconds(re.sub(r"\s+ago$", "", word))) is not None:
        return now - back
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    try:
        if len(s) == 10:
            day = dt.date.fromisoformat(s)
            moment = dt.datetime(day.year, day.month, day.day) + dt.timedelta(days=int(end_of_day))
        else:
            moment = dt.datetime.fromisoformat(s)
    except ValueError:
        raise UsageError(f"date {value!r}: give {MOMENT_HELP}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.timestamp()


def _int(v: Any, name: str, lo: int, hi: int) -> int:
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a number, not {v!r}") from None
    if not lo <= n <= hi:
        raise UsageError(f"{name} must be between {lo} and {hi}")
    return n


def _tuple(v: Any) -> tuple[str, ...]:
    """A filter's values; blank ones are no filter (`--kind "$KIND"` with KIND unset, an
    agent's `"kind": ""`), as an empty --topic is, not a filter that nothing passes."""
    items = v if isinstance(v, (list, tuple)) else [v]
    return tuple(str(x) for x in items if x is not None and str(x).strip())


def build_query(opts: dict[str, Any], default_k: int, default_mode: str,
                known_vaults: list[tuple[str, str]]) -> Query:
    """A Query from an options dict (unknown keys are refused). `known_vaults` are
    (name, root) pairs; a vault may be named by either."""
    unknown = set(opts) - set(OPTIONS) - {"op", "state_dir", "id"}
    if unknown:
        raise UsageError(f"unknown query option(s): {', '.join(sorted(unknown))}")
    text = opts.get("text")
    if not isinstance(text, str):
        raise UsageError("a query needs 'text' (a string)")
    k = _int(opts.get("k") or default_k, "k", 1, 1000)
    mode = opts.get("mode") or default_mode
    if mode not in ("hybrid", "text", "vector"):
        raise UsageError(f"mode must be hybrid, text or vector, not {mode!r}")
    vaults = []
    for v in list_field(opts, "vaults") or list_field(opts, "vault"):
        real = os.path.realpath(os.path.expanduser(v))
        names = [name for name, root in known_vaults if name == unicodedata.normalize("NFC", v) or root == real]
        if not names:
            known = ", ".join(n for n, _ in known_vaults) or "none"
            raise UsageError(f"vault {v}: not an indexed vault (known: {known})")
        vaults.extend(names)
    topic = opts.get("topic")
    for key in ("topic", "path", "task"):
        if opts.get(key) is not None and not isinstance(opts[key], str):
            raise UsageError(f"{key} must be a string")
    since, until = parse_moment(opts.get("since"), end_of_day=False), parse_moment(opts.get("until"))
    if since is not None and until is not None and since > until:
        raise UsageError(f"since {opts['since']} is after until {opts['until']}: no note can be in that range")
    return Query(
        text=text, k=k, tags=_tuple(opts.get("tags") or opts.get("tag")), any_tags=bool(opts.get("any_tags")),
        kinds=_tuple(opts.get("kinds") or opts.get("kind")), topic=topic if topic and topic.strip() else None,
        vaults=tuple(vaults), path_glob=opts.get("path") or None, history=bool(opts.get("history")),
        mode=mode, explain=bool(opts.get("explain")), half_life_days=parse_half_life(opts.get("half_life")),
        as_of=parse_moment(opts.get("as_of")), task=str(opts["task"]) if opts.get("task") else None,
        record=opts.get("record", True) is not False,
        section_chars=_int(opts.get("section_chars") or 0, "section_chars", 0, 100_000),
        min_relevance=number_field(opts, "min_relevance", 0.0, 1.0) or 0.0,
        since=since, until=until,
        where=tuple(_where(w) for w in list_field(opts, "where")),
    )


def _where(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"where {item!r}: write KEY=VALUE (a frontmatter key and its value)")
    return key.strip(), value.strip()


def phrase_absent(phrases: list[str]) -> str:
    """What is said when no note holds a query's quoted phrase (the answer is empty)."""
    quoted = ", ".join(f'"{p}"' for p in phrases)
    return (f"no note holds the exact phrase {quoted} (case, width and accents aside, English word forms alike); "
            "search without the quotes to find the words anywhere")
