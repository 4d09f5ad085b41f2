"""Dates named in queries, and the bonus a note dated inside them gets."""

import datetime as dt

from vaultmem import dates

from conftest import note


def day(span) -> tuple[str, str]:
    return dt.datetime.fromtimestamp(span.start, dt.timezone.utc).date().isoformat(), span.unit


def test_dates_are_read_in_the_forms_people_write_them():
    cases = {
        "What did Nate do on 25 May, 2022?": [("2022-05-25", "day")],
        "the talk on 8th December, 2023": [("2023-12-08", "day")],
        "released May 23, 2023": [("2023-05-23", "day")],
        "see 2023-05-08": [("2023-05-08", "day")],
        "in the beginning of November 2022": [("2022-11-01", "month")],
        "recently in 2024": [("2024-01-01", "year")],
        "2023年5月8日の会議": [("2023-05-08", "day")],
        "2023년 5월 회의": [("2023-05-01", "month")],
        "31 February, 2023": [("2023-02-01", "month")],  # no such day: the month is still named
    }
    for text, want in cases.items():
        assert [day(s) for s in dates.spans(text)] == want, text
    for text in ("version 2.2023", "port 2024 open", "May I ask", "the 25 tests", ""):
        assert dates.spans(text) == [], text


def test_closeness_is_full_on_the_day_and_fades_within_a_week():
    [span] = dates.spans("on 25 May, 2022")
    at = lambda *a: dt.datetime(*a, tzinfo=dt.timezone.utc).timestamp()  # noqa: E731
    assert dates.closeness([span], at(2022, 5, 25, 15)) == 1.0
    assert 0.4 < dates.closeness([span], at(2022, 5, 26, 12)) < 0.5
    assert dates.closeness([span], at(2022, 6, 10)) == 0.0
    assert dates.closeness([span], None) == 0.0
    [month] = dates.spans("in May 2022")
    assert dates.closeness([month], at(2022, 5, 31, 23)) == 0.5


def test_a_note_dated_on_the_named_day_ranks_first(env):
    env.write("memory/a.md", note("standup a", "standup notes: the otter migration was discussed\n",
                                  date="2024-03-01"))
    env.write("memory/b.md", note("standup b", "standup notes: the otter migration was discussed\n",
                                  date="2024-03-14"))
    env.sync()
    for text, first in (("otter migration on 14 March 2024", "memory/b.md"),
                        ("otter migration on 2024-03-01", "memory/a.md")):
        hits = env.query(text, mode="text", explain=True)
        assert [h.path for h in hits][0] == first, text
        assert hits[0].explain["date_bonus"] > 0 and hits[1].explain["date_bonus"] == 0
