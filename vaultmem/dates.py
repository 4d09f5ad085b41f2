"""Dates named in a query ("on 25 May, 2022", "in November 2022", "2023-05-08", "2023年5月",
"2023년 5월 25일"), as time spans, so that notes dated inside them rank higher. Notes carry
dates (frontmatter `date`); people ask about them by date. Standard library only.

A day is its own 24 hours, a month or a year its whole span; naive dates are UTC, as note dates
are (notes.parse_date). Relative dates ("last week") are not resolved: they depend on when the
note was written, which the query does not know.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"

PATTERNS = [
    re.compile(rf"\b{_YEAR}-(?P<m>[01]?\d)-(?P<d>[0-3]?\d)\b"),  # 2023-05-08
    re.compile(rf"{_YEAR}\s*[年년]\s*(?P<m>[01]?\d)\s*[月월](?:\s*(?P<d>[0-3]?\d)\s*[日일])?"),  # 2023年5月8日
    re.compile(rf"(?i)\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b"),  # 25 May, 2022 / 8th of May 2023
    re.compile(rf"(?i)\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b"),  # May 25, 2023
    re.compile(rf"(?i)\b{_MONTH},?\s+{_YEAR}\b"),  # November 2022
    re.compile(rf"(?i)\b(?:in|of|since|during|year)\s+{_YEAR}\b"),  # in 2024
    re.compile(rf"{_YEAR}\s*[年년](?!\s*[01]?\d\s*[月월])"),  # 2024年
]


@dataclass(frozen=True)
class Span:
    start: float  # seconds since the epoch, inclusive
    end: float  # exclusive
    unit: str  # "day" | "month" | "year"


def _span(year: int, month: int | None, day: int | None) -> Span | None:
    try:
        if day:
            start = dt.datetime(year, month or 1, day, tzinfo=dt.timezone.utc)
            return Span(start.timestamp(), (start + dt.timedelta(days=1)).timestamp(), "day")
        if month:
            start = dt.datetime(year, month, 1, tzinfo=dt.timezone.utc)
            end = dt.datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=dt.timezone.utc)
            return Span(start.timestamp(), end.timestamp(), "month")
        start = dt.datetime(year, 1, 1, tzinfo=dt.timezone.utc)
        return Span(start.timestamp(), dt.datetime(year + 1, 1, 1, tzinfo=dt.timezone.utc).timestamp(), "year")
    except ValueError:  # 31 February and the like
        return None


def spans(text: str) -> list[Span]:
    """The dates a query names, most precise reading of each stretch of text first."""
    out: list[Span] = []
    taken: list[tuple[int, int]] = []
    for pattern in PATTERNS:
        for m in pattern.finditer(text):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue  # already read as a more precise date
            g = m.groupdict()
            year = int(g["year"])
            month = int(g["m"]) if g.get("m") else MONTHS.get((g.get("month") or "").lower())
            day = int(g["d"]) if g.get("d") else int(g["day"]) if g.get("day") else None
            span = _span(year, month, day)
            if span is not None:
                out.append(span)
                taken.append(m.span())
    return out


UNIT_WEIGHT = {"day": 1.0, "month": 0.5, "year": 0.25}
NEAR_DAYS = 7.0  # a note written within a week of a named day still counts, less (notes trail events)


def closeness(spans_: list[Span], when: float | None) -> float:
    """How well a note's date `when` fits the named dates, 0..1: 1 on a named day, 0.5 in a
    named month, 0.25 in a named year; within NEAR_DAYS of a named day, up to half."""
    best = 0.0
    if when is None:
        return best
    for s in spans_:
        if s.start <= when < s.end:
            best = max(best, UNIT_WEIGHT[s.unit])
        elif s.unit == "day":
            away = min(abs(when - s.start), abs(when - s.end)) / 86400.0
            best = max(best, 0.5 * max(0.0, 1.0 - away / NEAR_DAYS))
    return best
