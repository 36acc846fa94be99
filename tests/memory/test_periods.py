"""The dates and periods a recall query names (memory.search.periods): one test per family of
phrases against a fixed now, the words that only look like dates, bad input, and fuzzing."""

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.search.periods import FLOOR_YEAR, MAX_PERIODS, Period, named_periods, strip_periods

NOW = datetime(2024, 3, 15, 12, 0, tzinfo=UTC)  # a Friday


def at(y: int, m: int, d: int, hour: int = 0) -> datetime:
    return datetime(y, m, d, hour, tzinfo=UTC)


def only(text: str, now: datetime = NOW) -> Period:
    periods = named_periods(text, now=now)
    assert len(periods) == 1, (text, periods)
    return periods[0]


def days(text: str, now: datetime = NOW) -> tuple[date, date, str]:
    """The period as (first day, day after the last, granularity)."""
    p = only(text, now)
    assert p.start.time() == p.end.time() == datetime.min.time(), p
    return p.start.date(), p.end.date(), p.granularity


JULY_7 = (date(2023, 7, 7), date(2023, 7, 8), "day")


@pytest.mark.parametrize(
    "text",
    [
        "What did Ana do on 7 July, 2023?",
        "what happened 7 july 2023",
        "Where was she July 7, 2023?",
        "notes from 2023-07-07",
        "notes from 2023/07/07",
        "on Friday, July 7, 2023",
        "on the 7th of July 2023",
        "on Jul. 7 '23",
        "on 7/7/2023",
    ],
)
def test_a_day_with_its_year(text: str) -> None:
    assert days(text) == JULY_7


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("What did he eat July 7th?", date(2023, 7, 7)),  # the most recent July 7 at or before now
        ("what did he do on 5 Jan", date(2024, 1, 5)),
        ("on March 15", date(2024, 3, 15)),  # today counts
        ("on March 16", date(2023, 3, 16)),
        ("on February 29", date(2024, 2, 29)),
    ],
)
def test_a_day_without_a_year_is_the_most_recent_one(text: str, day: date) -> None:
    assert days(text) == (day, day + timedelta(days=1), "day")


def test_february_29_without_a_year_skips_to_a_leap_year() -> None:
    assert days("on February 29", now=at(2025, 3, 1))[0] == date(2024, 2, 29)


def test_numeric_dates_read_one_way_when_only_one_is_valid_and_cover_both_otherwise() -> None:
    assert days("on 13/07/2023")[:2] == days("on 07/13/2023")[:2] == (date(2023, 7, 13), date(2023, 7, 14))
    assert days("on 07/08/2023") == (date(2023, 7, 8), date(2023, 8, 8), "range")  # 8 July or 7 August


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Where did Caroline travel in 2023?", (date(2023, 1, 1), date(2024, 1, 1), "year")),
        ("what happened during 2019", (date(2019, 1, 1), date(2020, 1, 1), "year")),
        ("What happened 2019?", (date(2019, 1, 1), date(2020, 1, 1), "year")),  # a bare year ending a question
        ("in the year 2001", (date(2001, 1, 1), date(2002, 1, 1), "year")),
        ("in the 1990s", (date(1990, 1, 1), date(2000, 1, 1), "decade")),
        ("back in the '90s", (date(1990, 1, 1), date(2000, 1, 1), "decade")),
        ("the Q3 2023 plan", (date(2023, 7, 1), date(2023, 10, 1), "quarter")),
        ("in the first quarter of 2023", (date(2023, 1, 1), date(2023, 4, 1), "quarter")),
        ("What did Mel paint in July 2023?", (date(2023, 7, 1), date(2023, 8, 1), "month")),
        ("in May '23", (date(2023, 5, 1), date(2023, 6, 1), "month")),
        ("in Sept 2023", (date(2023, 9, 1), date(2023, 10, 1), "month")),
        ("the 2023-07 report", (date(2023, 7, 1), date(2023, 8, 1), "month")),
    ],
)
def test_years_decades_quarters_and_months_of_a_year(text: str, expected: tuple) -> None:
    assert days(text) == expected


@pytest.mark.parametrize(
    ("text", "now", "month"),
    [
        ("What did she buy in May?", NOW, date(2023, 5, 1)),  # the most recent May at or before now
        ("What did she buy last May?", NOW, date(2023, 5, 1)),
        ("this May", NOW, date(2024, 5, 1)),
        ("next May", NOW, date(2024, 5, 1)),
        ("in March", NOW, date(2024, 3, 1)),  # the current month
        ("last March", NOW, date(2023, 3, 1)),
        ("in December", NOW, date(2023, 12, 1)),
        ("in May", at(2024, 5, 20), date(2024, 5, 1)),
        ("last May", at(2024, 5, 20), date(2023, 5, 1)),
        ("last May", at(2024, 6, 2), date(2024, 5, 1)),
        ("did she visit in Sept?", NOW, date(2023, 9, 1)),
        ("LAST MAY", NOW, date(2023, 5, 1)),
    ],
)
def test_a_month_without_a_year(text: str, now: datetime, month: date) -> None:
    first, end, granularity = days(text, now)
    assert (first, granularity) == (month, "month")
    assert end == (first + timedelta(days=32)).replace(day=1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did I eat yesterday?", (date(2024, 3, 14), date(2024, 3, 15), "day")),
        ("What is on today?", (date(2024, 3, 15), date(2024, 3, 16), "day")),
        ("tomorrow", (date(2024, 3, 16), date(2024, 3, 17), "day")),
        ("last night", (date(2024, 3, 14), date(2024, 3, 15), "day")),
        ("the day before yesterday", (date(2024, 3, 13), date(2024, 3, 14), "day")),
        ("Who called 3 days ago?", (date(2024, 3, 12), date(2024, 3, 13), "day")),
        ("a few days ago", (date(2024, 3, 12), date(2024, 3, 13), "day")),
        ("What did we discuss last week?", (date(2024, 3, 4), date(2024, 3, 11), "week")),  # weeks start on Monday
        ("this week", (date(2024, 3, 11), date(2024, 3, 18), "week")),
        ("next week", (date(2024, 3, 18), date(2024, 3, 25), "week")),
        ("the week before last", (date(2024, 2, 26), date(2024, 3, 4), "week")),
        ("What happened last month?", (date(2024, 2, 1), date(2024, 3, 1), "month")),
        ("the month before last", (date(2024, 1, 1), date(2024, 2, 1), "month")),
        ("What did she do last year?", (date(2023, 1, 1), date(2024, 1, 1), "year")),
        ("this year", (date(2024, 1, 1), date(2025, 1, 1), "year")),
        ("last quarter", (date(2023, 10, 1), date(2024, 1, 1), "quarter")),
        ("What did they do last weekend?", (date(2024, 3, 9), date(2024, 3, 11), "range")),
        ("over the weekend", (date(2024, 3, 9), date(2024, 3, 11), "range")),
    ],
)
def test_days_and_calendar_units_relative_to_now(text: str, expected: tuple) -> None:
    assert days(text) == expected


@pytest.mark.parametrize(
    ("text", "start", "end", "granularity"),
    [
        ("What did he say two weeks ago?", at(2024, 2, 27), at(2024, 3, 5), "week"),  # centred on now minus two weeks
        ("a couple of weeks ago", at(2024, 2, 27), at(2024, 3, 5), "week"),
        ("What did I order a month ago?", at(2024, 1, 31, 12), at(2024, 3, 1, 12), "month"),
        ("the past week", at(2024, 3, 8, 12), NOW, "range"),
        ("the past 3 days", at(2024, 3, 12, 12), NOW, "range"),
        ("in the last two weeks", at(2024, 3, 1, 12), NOW, "range"),
        ("over the past few months", at(2023, 12, 15, 12), NOW, "range"),
        ("What did she start earlier this year?", at(2024, 1, 1), NOW, "range"),
        ("earlier today", at(2024, 3, 15), NOW, "range"),
        ("later this week", NOW, at(2024, 3, 18), "range"),
    ],
)
def test_periods_that_run_from_or_to_now(text: str, start: datetime, end: datetime, granularity: str) -> None:
    p = only(text)
    assert (p.start, p.end, p.granularity) == (start, end, granularity)


def test_last_season_during_that_season_is_the_one_before() -> None:
    assert days("last winter", now=at(2024, 1, 20))[0] == date(2022, 12, 1)
    assert days("this winter", now=at(2024, 1, 20))[0] == date(2023, 12, 1)
    assert days("this winter", now=at(2024, 10, 20))[0] == date(2024, 12, 1)  # the nearer one


def test_a_year_ago_is_a_year_wide_window_around_that_moment() -> None:
    p = only("a year ago")
    assert p.granularity == "year" and p.start < at(2023, 3, 15) < p.end and (p.end - p.start).days == 365


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Where did they go in the summer of 2022?", (date(2022, 6, 1), date(2022, 9, 1), "season")),
        ("summer 2022", (date(2022, 6, 1), date(2022, 9, 1), "season")),
        ("in the fall of 2022", (date(2022, 9, 1), date(2022, 12, 1), "season")),
        ("the winter of 2022", (date(2022, 12, 1), date(2023, 3, 1), "season")),
        ("in the summer", (date(2023, 6, 1), date(2023, 9, 1), "season")),
        ("last summer", (date(2023, 6, 1), date(2023, 9, 1), "season")),
        ("during the winter", (date(2023, 12, 1), date(2024, 3, 1), "season")),
        ("last winter", (date(2023, 12, 1), date(2024, 3, 1), "season")),  # the one that has ended
        ("in spring", (date(2024, 3, 1), date(2024, 6, 1), "season")),
        ("in early May", (date(2023, 5, 1), date(2023, 5, 11), "range")),
        ("in mid-May", (date(2023, 5, 11), date(2023, 5, 21), "range")),
        ("at the end of May 2023", (date(2023, 5, 21), date(2023, 6, 1), "range")),
        ("in late 2023", (date(2023, 9, 2), date(2024, 1, 1), "range")),
    ],
)
def test_seasons_and_parts_of_a_period(text: str, expected: tuple) -> None:
    assert days(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What happened between March and May 2023?", (date(2023, 3, 1), date(2023, 6, 1))),
        ("from May to July 2023", (date(2023, 5, 1), date(2023, 8, 1))),
        ("between November and February 2023", (date(2022, 11, 1), date(2023, 3, 1))),  # the year before
        ("from March 2023 to May", (date(2023, 3, 1), date(2023, 6, 1))),
        ("between early May and late June 2023", (date(2023, 5, 1), date(2023, 7, 1))),
        ("between 2020 and 2022", (date(2020, 1, 1), date(2023, 1, 1))),
        ("2019-2021", (date(2019, 1, 1), date(2022, 1, 1))),
        ("between 3 and 7 July 2023", (date(2023, 7, 3), date(2023, 7, 8))),
        ("July 3-7, 2023", (date(2023, 7, 3), date(2023, 7, 8))),
        ("3\u20137 July 2023", (date(2023, 7, 3), date(2023, 7, 8))),
        ("from Monday to Wednesday", (date(2024, 3, 11), date(2024, 3, 14))),
    ],
)
def test_ranges_between_two_times(text: str, expected: tuple) -> None:
    p = only(text)
    assert (p.start.date(), p.end.date(), p.granularity) == (*expected, "range")


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("What happened before June 2023?", datetime(FLOOR_YEAR, 1, 1, tzinfo=UTC), at(2023, 6, 1)),
        ("until March 2023", datetime(FLOOR_YEAR, 1, 1, tzinfo=UTC), at(2023, 4, 1)),
        ("What changed after 2022?", at(2023, 1, 1), NOW),
        ("since May", at(2023, 5, 1), NOW),
        ("since yesterday", at(2024, 3, 14), NOW),
        ("since last week", at(2024, 3, 4), NOW),
    ],
)
def test_open_ranges_end_at_now_or_start_at_the_floor(text: str, start: datetime, end: datetime) -> None:
    p = only(text)
    assert (p.start, p.end, p.granularity) == (start, end, "range")


def test_an_open_range_that_would_be_empty_is_no_period() -> None:
    assert named_periods("what happens after today", now=NOW) == []
    assert named_periods("between 2022 and 2020", now=NOW) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did we do the week of 10 July?", (date(2023, 7, 10), date(2023, 7, 17), "week")),
        ("the week of 12 July 2023", (date(2023, 7, 10), date(2023, 7, 17), "week")),
        ("the week before 9 June 2023", (date(2023, 6, 2), date(2023, 6, 9), "range")),
        ("the weekend before 17 July 2023", (date(2023, 7, 15), date(2023, 7, 17), "range")),
        ("the weekend of 8 July 2023", (date(2023, 7, 8), date(2023, 7, 10), "range")),
        ("the day after 7 July 2023", (date(2023, 7, 8), date(2023, 7, 9), "day")),
        ("the first week of August 2023", (date(2023, 8, 1), date(2023, 8, 8), "week")),
        ("the last week of June 2023", (date(2023, 6, 24), date(2023, 7, 1), "week")),
        ("the last weekend of June 2023", (date(2023, 6, 24), date(2023, 6, 26), "range")),
    ],
)
def test_a_unit_around_another_time(text: str, expected: tuple) -> None:
    assert days(text) == expected


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("What did Ana do last Friday?", date(2024, 3, 8)),  # now is a Friday: the one before
        ("on Friday", date(2024, 3, 15)),
        ("on Monday", date(2024, 3, 11)),
        ("Monday night", date(2024, 3, 11)),
        ("this Friday", date(2024, 3, 15)),
        ("next Friday", date(2024, 3, 22)),
        ("last Sunday", date(2024, 3, 10)),
    ],
)
def test_weekdays(text: str, day: date) -> None:
    assert days(text) == (day, day + timedelta(days=1), "day")


def test_a_month_listed_with_another_takes_its_year() -> None:
    periods = named_periods("what did she do in May, June, and July 2023", now=at(2025, 8, 1))
    assert [(p.phrase, p.start.date()) for p in periods] == [
        ("in May", date(2023, 5, 1)),
        ("June", date(2023, 6, 1)),
        ("July 2023", date(2023, 7, 1)),
    ]
    assert [p.phrase for p in named_periods("in July or August", now=NOW)] == ["in July", "August"]


@pytest.mark.parametrize(
    "text",
    [
        "May I ask what Ana likes?",
        "she may have said she likes tea",
        "this may be true",
        "this may have been her idea",
        "these 2 may help",
        "May 3 people join?",
        "Did she join the march for climate?",
        "we walked in the march",
        "she sat down and cried",
        "Should I get a second opinion?",
        "Does she have 3 cats?",
        "He bought 2 tickets",
        "fall from the roof scared him",
        "Did she fall?",
        "in the fall of Rome",
        "the spring of my life",
        "summer camp was fun",
        "What is in room 2023?",
        "her flight 2019?",
        "the 2023 trip to Paris",
        "in 2000 pieces",
        "around 2000 people",
        "she has 1999 followers",
        "Wednesday Addams is her favourite character",
        "Did Mel mean what she said?",
        "it was in Jan's car",
        "in her 30s",
        "at 12:30",
        "a week",
        "in 3 days",
        "an hour ago",
        "June Carter sang it",
        "April is her sister",
    ],
)
def test_words_that_only_look_like_dates_name_no_period(text: str) -> None:
    assert named_periods(text, now=NOW) == []


@pytest.mark.parametrize(
    "text", ["on 31 February 2023", "29 February 2023", "2023-02-30", "on 30/02/2023", "between 31 and 33 May"]
)
def test_an_invalid_date_is_ignored_and_none_of_its_parts_is_read_instead(text: str) -> None:
    assert named_periods(text, now=NOW) == []


def test_a_period_lives_in_nows_time_zone() -> None:
    eastern = timezone(timedelta(hours=-5))
    p = only("yesterday", now=datetime(2024, 3, 15, 2, 0, tzinfo=UTC).astimezone(eastern))  # still the 14th there
    assert p.start == datetime(2024, 3, 13, tzinfo=eastern) and p.start.tzinfo is eastern
    naive = only("in 2023", now=datetime(2024, 3, 15))
    assert naive.start == datetime(2023, 1, 1) and naive.start.tzinfo is None


def test_periods_come_in_text_order_with_their_words() -> None:
    text = "Did Ana call last Friday or on 7 July, 2023, and what about in 2022?"
    periods = named_periods(text, now=NOW)
    assert [p.phrase for p in periods] == ["last Friday", "on 7 July, 2023", "in 2022"]
    assert all(text[p.span[0] : p.span[1]] == p.phrase for p in periods)


def test_strip_periods_leaves_the_question_without_its_dates() -> None:
    text = "What did Ana do on 7 July, 2023 and in May?"
    assert strip_periods(text, named_periods(text, now=NOW)) == "What did Ana do and?"
    assert strip_periods("What happened between March and May 2023?", named_periods("x", now=NOW)) == (
        "What happened between March and May 2023?"
    )
    other = named_periods("in 2023", now=NOW)  # periods of another text are not cut out of this one
    assert strip_periods("sometime in May", other) == "sometime in May"


def test_at_most_max_periods_are_returned() -> None:
    assert len(named_periods(" and ".join(["in 2023"] * (MAX_PERIODS + 5)), now=NOW)) == MAX_PERIODS


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "\x00\x01\x1f",
        "2023" * 2500,
        "in May " * 1500,
        "ſummer 2022",
        "in 2023\u00a0\u2028May",
        "🙂 in 2023 🙂",
        "é" * 10_000,
    ],
)
def test_any_text_returns_a_list(text: str) -> None:
    periods = named_periods(text, now=NOW)
    assert isinstance(periods, list) and all(p.start < p.end for p in periods)


WORDS = (
    "in on during since before after until between from and to or the of last this next past early mid late end "
    "week weekend day month year quarter ago yesterday today may march july february 29 31 7 7th 2023 1999 2100 "
    "summer fall winter friday monday night a two few couple of q3 1990s '90s 2023-02-30 7/8/2023 - , ?"
).split()
NOWS = st.datetimes(min_value=datetime(1901, 1, 1), max_value=datetime(2099, 12, 31))


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(text=st.text(max_size=200), now=NOWS, aware=st.booleans())
def test_fuzz_any_text_gives_well_formed_periods(text: str, now: datetime, aware: bool) -> None:
    check_well_formed(text, now.replace(tzinfo=UTC) if aware else now)


@settings(max_examples=600, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(words=st.lists(st.sampled_from(WORDS), max_size=12), now=NOWS)
def test_fuzz_date_words_in_any_order_give_well_formed_periods(words: list[str], now: datetime) -> None:
    check_well_formed(" ".join(words), now.replace(tzinfo=UTC))


def check_well_formed(text: str, now: datetime) -> None:
    periods = named_periods(text, now=now)
    assert len(periods) <= MAX_PERIODS
    assert [p.span for p in periods] == sorted(p.span for p in periods)
    for p in periods:
        assert p.start < p.end
        assert p.start.tzinfo is now.tzinfo and p.end.tzinfo is now.tzinfo
        assert text[p.span[0] : p.span[1]] == p.phrase and p.phrase.strip() == p.phrase
    assert isinstance(strip_periods(text, periods), str)
