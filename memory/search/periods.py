"""The dates and periods a recall query names ("on 7 July, 2023", "in 2023", "last May", "two weeks
ago", "between March and May 2023"), each as a half-open interval [start, end) relative to a given
now, so ranking can prefer records observed or valid then.

Hand-written patterns on the standard library rather than a parsing library: those on the registry
guess dates in prose, so they fire on "May I ask", "the march", "she sat down" or "a second opinion",
give a point where a query names a period ("in 2023" is a year, not a day of it), and the one that
reads most phrases is the slowest (the comparison is in docs/benchmarks.md).

A query is read in two steps. 1. Atoms: every expression that can name a time alone ("7 July 2023",
"2023-07-07", "May", "2023", "summer", "Friday", "yesterday", "last week", "3 days ago"). Where two
overlap the longer wins ("7 July 2023" over "July 2023" over "2023"); an invalid date ("31 February
2023") keeps its place, so none of its parts is read instead, and names nothing. 2. The words
before each atom: a preposition ("in", "during"), an operator ("before", "since", "between ... and
..."), a relative ("last", "this", "next"), a part ("early", "the end of") or a unit ("the week of",
"the day before"). A word that is also an ordinary word (a month alone, "may" and "march" above all,
a weekday, a season, a bare year) names a time only with such a cue: "in May", "last Friday", "in the
fall", "in 2023" do, "May I ask", "the march", "Wednesday Addams", "she may fall", "room 2023" do not.
A bare year also does where it ends a sentence ("What happened 2019?").

Conventions: a month, day, season or weekday without a year is the most recent one at or before now
("last May" is the most recent May before the current month, "this May" the current year's, "next
May" the first after now). Weeks start on Monday; a weekend is Saturday and Sunday; seasons are the
northern meteorological ones (winter of 2022 is December 2022 to February 2023). "N days ago" is that
day; "N weeks (months, years) ago" a window one unit wide centred on that moment; "the past N units"
runs from N units before now to now. Open ranges end at now ("after 2022", "since May") or start at
FLOOR_YEAR ("before June 2023"). Days begin at midnight in now's time zone (a naive now gives naive
periods). Any string is accepted: nothing here raises on input, and every period has start < end.
"""

import re
from calendar import monthrange
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import Literal

Granularity = Literal["day", "week", "month", "season", "quarter", "year", "decade", "range"]

MAX_PERIODS = 8  # a query naming more than this many times is not asking about one of them
FLOOR_YEAR = 1000  # where an open range ("before June 2023") starts


@dataclass(frozen=True)
class Period:
    """One time the text names: [start, end), the words that name it (text[span[0]:span[1]]), and
    how wide it is meant ("range" for anything bounded by the words rather than one calendar unit:
    between, before, since, the past N days, early May, a weekend)."""

    start: datetime
    end: datetime
    phrase: str
    granularity: Granularity
    span: tuple[int, int]


def named_periods(text: str, *, now: datetime) -> list[Period]:
    """The periods `text` names, relative to `now`, in text order."""
    if not isinstance(text, str) or not _TRIGGER.search(text):
        return []
    clock = _Clock(now)
    atoms = _atoms(text)
    periods: list[Period] = []
    i, named = 0, None  # named: the last atom that named a period
    while i < len(atoms) and len(periods) < MAX_PERIODS:
        atom = atoms[i]
        nxt = atoms[i + 1] if i + 1 < len(atoms) else None
        listed = named is not None and i > 0 and named is atoms[i - 1] and _LIST_JOIN.fullmatch(text, named.end, atom.cue_start)
        try:
            if nxt is not None and atom.op in ("between", "from") and _RANGE_JOIN.fullmatch(text, atom.end, nxt.cue_start):
                period = _pair(text, atom, nxt, clock)
                i += 2
            else:
                period = _single(text, atom, clock, bool(listed), atoms[i + 1 : i + MAX_PERIODS])
                i += 1
        except (ValueError, OverflowError):  # a date out of the calendar's range: no period
            period = None
            i += 1
        if period is not None:
            periods.append(period)
            named = atoms[i - 1]
    return periods


def strip_periods(text: str, periods: Iterable[Period]) -> str:
    """`text` without the words of `periods` (found in it by named_periods), so a query's dates do
    not count as words to match ("2023", "May")."""
    kept, at = [], 0
    for p in sorted(periods, key=lambda p: p.span):
        start, end = p.span
        if start < at or text[start:end] != p.phrase:
            continue
        kept.append(text[at:start])
        at = end
    kept.append(text[at:])
    return re.sub(r"\s+([?!.,;:])", r"\1", re.sub(r"\s{2,}", " ", "".join(kept))).strip()


# --- the words ---------------------------------------------------------------------------------

_FLAGS = re.IGNORECASE | re.ASCII  # ASCII: a Unicode case fold ("\u017fummer") matches nothing
_MONTHS = {
    name[:3]: n
    for n, name in enumerate("january february march april may june july august september october november december".split(), 1)
}
_MONTH_FULL = r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
_MONTH_ANY = rf"(?:{_MONTH_FULL}|(?:jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\b\.?)"
_AMBIGUOUS_MONTHS = {"may", "mar", "march"}  # also a verb or a noun
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_WEEKDAY = "(?:" + "|".join(_WEEKDAYS) + ")"
_DAY = r"(?P<d>[12][0-9]|3[01]|0?[1-9])(?![0-9])(?P<sfx>st|nd|rd|th)?\b"
_YEAR4 = r"(?<![0-9])(?:19[0-9]{2}|20[0-9]{2}|2100)(?![0-9])"
_APOSTROPHE = "['\u2019]"
_YEAR = rf"(?:{_YEAR4}|{_APOSTROPHE}[0-9]{{2}}(?![0-9]))"
_DASH = "(?:-|\u2013|\u2014)"
# A number followed by one of these is a quantity ("in 2000 pieces"), not a year.
_QUANTITY = (
    r"(?!\s*(?:%|percent|people|persons|dollars|euros?|pounds|yen|bucks|km|kilometers|kilometres|miles|meters|metres|kg|"
    r"lbs?|feet|ft|times|words|calories|kcal|steps|points|pages|pieces|items|units|copies|votes|views|followers|likes|"
    r"tickets|hours|minutes|seconds|days|weeks|months|years)\b)"
)
_NUMBER_WORDS = {
    **{w: n for n, w in enumerate("one two three four five six seven eight nine ten eleven twelve".split(), 1)},
    **{"a": 1, "an": 1, "couple": 2, "few": 3, "several": 3},
}
_NUM = (
    r"(?P<n>[0-9]{1,3}|a\s+couple(?:\s+of)?|couple\s+of|a\s+few|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + ")"
)
_UNIT = r"(?P<unit>day|week|month|year)s?"
_REL = {  # relative words, as they resolve
    **dict.fromkeys(("this past", "past", "previous", "last"), "last"),
    **dict.fromkeys(("this", "current"), "this"),
    **dict.fromkeys(("next", "coming"), "next"),
}
_REL_WORDS = "|".join(word.replace(" ", r"\s+") for word in sorted(_REL, key=len, reverse=True))


def _starts(*words: str) -> str:
    """A lookahead on the first letters of `words`: where none of them starts, the pattern fails at once."""
    return "(?=[" + "".join(sorted({w[0] for w in words})) + "])"


# Atom kinds: a name and the pattern of the expression alone. Groups name the parts they hold.
_ATOM_PATTERNS = {
    "iso_day": rf"(?<![-/.0-9])\b(?P<y>{_YEAR4})(?P<sep>[-/.])(?P<m>[0-9]{{1,2}})(?P=sep)(?P<d>[0-9]{{1,2}})(?![0-9])",
    "iso_month": rf"(?<![-/.0-9])\b(?P<y>{_YEAR4})-(?P<m>0[1-9]|1[0-2])(?![-/.]?[0-9])",
    "numeric": rf"(?<![-/.0-9])\b(?P<a>[0-9]{{1,2}})/(?P<b>[0-9]{{1,2}})/(?P<y>{_YEAR4})(?![-/0-9])",
    "dmy": rf"\b{_starts(*'0123456789', 'the', *_WEEKDAYS)}(?:(?P<wd>{_WEEKDAY}),?\s+)?(?:the\s+)?\b{_DAY}\s+(?:of\s+)?(?P<mon>{_MONTH_ANY})(?:,?\s*(?P<y>{_YEAR}))?",
    "mdy": rf"\b{_starts(*_MONTHS, *_WEEKDAYS)}(?:(?P<wd>{_WEEKDAY}),?\s+)?\b(?P<mon>{_MONTH_ANY})\s+(?:the\s+)?{_DAY}(?!\s*(?::|%|[ap]\.?m\b))(?:,?\s*(?P<y>{_YEAR}))?",
    "day_range_dm": rf"\b(?P<d1>[12][0-9]|3[01]|0?[1-9])(?:st|nd|rd|th)?\s*(?:{_DASH}|to|and|through|until)\s*{_DAY}\s+(?:of\s+)?"
    rf"(?P<mon>{_MONTH_ANY})(?:,?\s*(?P<y>{_YEAR}))?",
    "day_range_md": rf"\b{_starts(*_MONTHS)}(?P<mon>{_MONTH_ANY})\s+(?P<d1>[12][0-9]|3[01]|0?[1-9])(?:st|nd|rd|th)?\s*(?:{_DASH}|to|through|until)\s*"
    rf"{_DAY}(?:,?\s*(?P<y>{_YEAR}))?",
    "month_year": rf"\b{_starts(*_MONTHS)}(?P<mon>{_MONTH_ANY}),?\s+(?:of\s+)?(?P<y>{_YEAR})",
    "month": rf"\b{_starts(*_MONTHS)}(?P<mon>{_MONTH_FULL}|(?:feb|apr|jul|aug|sept|sep|oct|nov|dec)\b\.?)(?!{_APOSTROPHE}\w)",
    "season": rf"\b(?P<s>spring|summer|fall|autumn|winter)\b(?:,?\s+(?:of\s+)?(?P<y>{_YEAR})|(?!\s+of\b|{_APOSTROPHE}\w|-))",
    "year": rf"(?<![$€£#@/.,:+*=])(?<![0-9][-/.])\b(?P<y>{_YEAR4})(?!{_APOSTROPHE}s\b|\s*[-/.:\u2013][0-9]){_QUANTITY}",
    "year_range": rf"\b(?P<y1>{_YEAR4})\s*{_DASH}\s*(?P<y>{_YEAR4})\b",
    "decade": rf"\b(?P<y>(?:19|20)[0-9]0){_APOSTROPHE}?s\b|(?<![\w'\u2019]){_APOSTROPHE}(?P<yy>[0-9]0)s\b",
    "quarter": rf"\b(?:q(?P<q>[1-4])|(?:the\s+)?(?P<qw>first|second|third|fourth|last)\s+quarter(?:\s+of)?),?\s+(?P<y>{_YEAR4})",
    "relday": r"\b(?P<w>yesterday|today|tonight|tomorrow|last\s+night|this\s+(?:morning|afternoon|evening))\b",
    "calendar": rf"\b{_starts('the', *_REL, 'week', 'month', 'year', 'quarter')}(?:(?P<the>the)\s+)?(?:(?P<rel>{_REL_WORDS})\s+)?"
    r"(?P<unit>week|weekend|month|year|quarter)\b(?!\s+(?:of|before|after|following|preceding)\b)",
    "before_last": r"\b(?:the\s+)?(?P<unit>week|weekend|month|year)\s+before\s+last\b",
    "ago": rf"\b{_starts(*'0123456789', 'couple', *_NUMBER_WORDS)}{_NUM}\s+{_UNIT}\s+ago\b",
    "trailing": rf"\b(?:the\s+)?(?:this\s+past|past|last|previous)\s+{_NUM}\s+{_UNIT}\b",
    "weekday": rf"\b(?P<wd>{_WEEKDAY})\b(?:\s+(?P<tod>morning|afternoon|evening|night))?",
}
_ATOM_RES = {kind: re.compile(pattern, _FLAGS) for kind, pattern in _ATOM_PATTERNS.items()}
_TAKES_REL = {"month", "season", "weekday"}  # the kinds "last", "this" and "next" change
_HINTABLE = {"dmy", "mdy", "day_range_dm", "day_range_md", "month", "season"}  # the kinds that take a year from a neighbour
_UNIT_MONTHS = {"month": 1, "quarter": 3, "year": 12}
_UNIT_GRANULARITY: dict[str, Granularity] = {"day": "day", "week": "week", "month": "month", "quarter": "quarter", "year": "year"}

# The words before an atom, read backwards from it: every part optional, in this order.
_PREFIX_PARTS = (
    r"(?<![\w'\u2019])"
    r"(?:(?P<op>between|from|since|before|after|until|till|prior\s+to|up\s+to|through)\s+)?"
    r"(?:(?P<lead>in|on|during|throughout|over|around|circa|within)\s+)?"
    r"(?:(?P<earlier>earlier|later)\s+)?"
    r"(?:the\s+)?"
    r"(?:(?:(?P<nth>first|second|third|fourth|last)\s+)?(?P<unit>day|week|weekend|month|year)\s+(?P<unitop>of|before|after|following|preceding)\s+)?"
    r"(?:(?P<part>early|mid|late)(?:\s*-\s*|\s+)|(?:the\s+)?(?P<part2>beginning|start|middle|end)\s+of\s+)?"
)
_PREFIX = re.compile(_PREFIX_PARTS + r"(?:(?P<yearword>year)\s+)?$", _FLAGS)
_PREFIX_REL = re.compile(_PREFIX_PARTS + rf"(?:(?P<rel>{_REL_WORDS})\s+)?$", _FLAGS)
_PREFIX_WINDOW = 80
# Every atom holds a digit or one of these: a text without any names no time, found in one scan.
_TRIGGER = re.compile(
    "[0-9]|"
    + "|".join([*_MONTHS, "day", "night", "tomorrow", "morning", "afternoon", "evening", "week", "month", "year"])
    + "|quarter|spring|summer|fall|autumn|winter|ago",
    _FLAGS,
)
_RANGE_JOIN = re.compile(rf"\s*(?:and|to|until|till|through|thru|{_DASH})\s*", _FLAGS)
_LIST_JOIN = re.compile(r"\s*(?:,|,?\s*and|,?\s*or)\s*", _FLAGS)
# After "this May" / "last March" without a preposition, the word that follows must not make it a
# verb ("this may be", "this may have"): only punctuation, the end, a year or a joining word.
_AFTER_AMBIGUOUS_MONTH = re.compile(
    rf"\s*(?:$|[^\w\s]|{_YEAR4}|(?:and|or|to|through|until|till|when|while|where|with|for|at|in|on|i|we|she|he|they|you|did|was|were|is|are)\b)",
    _FLAGS,
)
_THE_BEFORE = re.compile(r"\bthe\s+$", _FLAGS)
_ENDS_SENTENCE = re.compile(r"\s*(?:[?!.;]|$)")
_NOT_A_YEAR_AFTER = frozenset(
    "room number no apt apartment suite unit flight page route bus line code pin id ticket order model version channel "
    "highway gate platform seat box lot level floor chapter verse item step rank score team vol volume issue ext "
    "extension account invoice".split()
)


# --- finding atoms and their cues ---------------------------------------------------------------


@dataclass(frozen=True)
class _Atom:
    kind: str
    match: re.Match[str]
    start: int
    end: int
    cue_start: int  # where the words before it that belong to it start
    cue: dict[str, str | None]

    @property
    def op(self) -> str | None:
        return _words(self.cue.get("op")) or None


def _words(text: str | None) -> str:
    """Words as compared: lower case, one space between."""
    return " ".join(text.lower().split()) if text else ""


def _atoms(text: str) -> list[_Atom]:
    """The atoms of `text`, longest first where they overlap, then in text order, each with its cue."""
    found = [(m.end() - m.start(), m.start(), kind, m) for kind, regex in _ATOM_RES.items() for m in regex.finditer(text)]
    found.sort(key=lambda f: (-f[0], f[1]))
    taken: list[tuple[int, int, str, re.Match[str]]] = []
    for length, start, kind, m in found:
        if length and all(m.end() <= s or start >= e for s, e, _, _ in taken):
            taken.append((start, m.end(), kind, m))
    taken.sort(key=lambda t: t[0])
    atoms, previous_end = [], 0
    for start, end, kind, m in taken:
        prefix = (_PREFIX_REL if kind in _TAKES_REL else _PREFIX).search(text, max(previous_end, start - _PREFIX_WINDOW), start)
        cue = prefix.groupdict() if prefix else {}
        atoms.append(_Atom(kind, m, start, end, prefix.start() if prefix else start, cue))
        previous_end = end
    return atoms


def _accepted(text: str, atom: _Atom, listed: bool) -> bool:
    """Whether an atom names a time here: always, for those that cannot be anything else; with a
    cue, or listed right after a period ("in May and June"), for words that are also ordinary words."""
    kind, m, cue = atom.kind, atom.match.groupdict(), atom.cue
    placed = any(cue.get(k) for k in ("op", "lead", "unit", "part", "part2", "yearword"))
    if kind in ("dmy", "mdy", "day_range_dm", "day_range_md"):
        if m["mon"].lower().rstrip(".") not in _AMBIGUOUS_MONTHS or m["y"] or m["sfx"] or m.get("wd"):
            return True
        return placed or listed or _ENDS_SENTENCE.match(text, atom.end) is not None
    if kind == "month":
        if _THE_BEFORE.search(text, max(0, atom.start - 8), atom.start):
            return False  # "in the march", "the May of their lives"
        if placed or listed:
            return True
        if not cue.get("rel"):
            return False
        return m["mon"].lower() not in _AMBIGUOUS_MONTHS or _AFTER_AMBIGUOUS_MONTH.match(text, atom.end) is not None
    if kind == "season":
        if m["y"] or listed or cue.get("rel") or cue.get("lead") or cue.get("part") or cue.get("part2"):
            return True
        return m["s"].lower() not in ("fall", "spring") and placed
    if kind == "weekday":
        return bool(m["tod"] or placed or listed or cue.get("rel"))
    if kind == "year":
        if placed or listed:
            return True
        words = re.findall(r"[\w#]+", text[max(0, atom.start - 40) : atom.start])
        return _ENDS_SENTENCE.match(text, atom.end) is not None and not (words and words[-1].lower() in _NOT_A_YEAR_AFTER)
    if kind == "calendar":
        return bool(m["rel"] or (m["the"] and m["unit"].lower() == "weekend"))
    return True


# --- resolving ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Span:
    start: datetime
    end: datetime
    granularity: Granularity
    year: int | None = None  # the year the words gave, for "between March and May 2023"


class _Clock:
    """Now, and the days around it as datetimes in now's time zone."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.today = now.date()

    def at(self, d: date) -> datetime:
        return datetime(d.year, d.month, d.day, tzinfo=self.now.tzinfo)

    def days(self, first: date, end: date, granularity: Granularity, year: int | None = None) -> _Span:
        return _Span(self.at(first), self.at(end), granularity, year)

    def day(self, d: date, year: int | None = None) -> _Span:
        return self.days(d, d + timedelta(days=1), "day", year)

    def month(self, y: int, m: int, year: int | None = None) -> _Span:
        return self.days(date(y, m, 1), _add_months(date(y, m, 1), 1), "month", year)

    def weekend_from(self, saturday: date) -> _Span:
        return self.days(saturday, saturday + timedelta(days=2), "range")


def _add_months(d: date, n: int) -> date:
    y, m = divmod(d.month - 1 + n, 12)
    return date(d.year + y, m + 1, min(d.day, monthrange(d.year + y, m + 1)[1]))


def _shift(t: datetime, months: int) -> datetime:
    return datetime.combine(_add_months(t.date(), months), t.timetz())


def _year(text: str | None, clock: _Clock) -> int | None:
    if not text or text[0].isdigit():
        return int(text) if text else None
    y = 2000 + int(text[1:])  # '23
    return y if y <= clock.today.year + 10 else y - 100


def _month_number(name: str) -> int:
    return _MONTHS[name.lower()[:3]]


def _recent_day(clock: _Clock, m: int, d: int, year: int | None) -> date | None:
    """The day `d` of month `m` in `year`, or the most recent such day at or before today."""
    for y in [year] if year is not None else range(clock.today.year, clock.today.year - 9, -1):
        if d <= monthrange(y, m)[1] and (year is not None or date(y, m, d) <= clock.today):
            return date(y, m, d)
    return None


def _month_year(clock: _Clock, m: int, rel: str | None) -> int:
    """The year of month `m`: now's for "this", the first after now's month for "next", the most
    recent before it for "last", and the most recent at or before it otherwise."""
    month = clock.today.month
    return clock.today.year + {"this": 0, "next": m <= month, "last": -(m >= month)}.get(rel or "", -(m > month))


_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}


def _season(clock: _Clock, name: str, year: int | None, rel: str | None) -> _Span | None:
    first = _SEASON_START[name]

    def span(y: int) -> _Span:
        return clock.days(date(y, first, 1), _add_months(date(y, first, 1), 3), "season", year)

    if year is not None:
        return span(year)
    today = clock.today
    candidates = [span(y) for y in range(today.year + 1, today.year - 3, -1)]
    if rel == "this":  # the one now is in, else the nearer of the last and the next
        return min(candidates, key=lambda s: max(s.start - clock.now, clock.now - s.end))
    if rel == "next":
        return next((s for s in reversed(candidates) if s.start > clock.now), None)
    if rel == "last":
        return next((s for s in candidates if s.end <= clock.at(today)), None)
    return next((s for s in candidates if s.start <= clock.now), None)


def _weekday(clock: _Clock, name: str, rel: str | None) -> _Span:
    """That weekday: the most recent at or before today, before it for "last", the first after it for
    "next", in the current week for "this"."""
    today, target = clock.today, _WEEKDAYS.index(name)
    back, ahead = (today.weekday() - target) % 7, (target - today.weekday()) % 7
    offset = {"last": -(back or 7), "this": target - today.weekday(), "next": ahead or 7}.get(rel or "", -back)
    return clock.day(today + timedelta(days=offset))


def _calendar(clock: _Clock, unit: str, rel_words: str, the: bool) -> _Span:
    """ "last week", "this month", "next year", "the weekend", and the trailing "the past week"."""
    trailing = rel_words in ("past", "this past") or (the and rel_words == "last")
    rel = _REL.get(rel_words)
    now, today = clock.now, clock.today
    if unit == "weekend":
        saturday = today - timedelta(days=today.weekday()) + timedelta(days=5)
        if rel == "last" or (rel is None and today.weekday() < 5):
            saturday -= timedelta(days=7)
        elif rel == "next" and today.weekday() >= 5:
            saturday += timedelta(days=7)
        return clock.weekend_from(saturday)
    step = {"last": -1, "this": 0, "next": 1}[rel or "this"]
    if unit == "week":
        if trailing:
            return _Span(now - timedelta(days=7), now, "range")
        monday = today - timedelta(days=today.weekday()) + timedelta(days=7 * step)
        return clock.days(monday, monday + timedelta(days=7), "week")
    months = _UNIT_MONTHS[unit]
    if trailing:
        return _Span(_shift(now, -months), now, "range")
    first = _add_months(date(today.year, (today.month - 1) // months * months + 1, 1), step * months)
    return clock.days(first, _add_months(first, months), _UNIT_GRANULARITY[unit], first.year if unit == "year" else None)


def _count(text: str) -> int:
    words = [w for w in text.lower().split() if w != "of"]
    return int(words[-1]) if words[-1].isdigit() else _NUMBER_WORDS[words[-1]]


def _ago(clock: _Clock, m: re.Match[str]) -> _Span:
    n, unit = _count(m["n"]), m["unit"].lower()
    if unit == "day":
        return clock.day(clock.today - timedelta(days=n))
    if unit == "week":
        center, half = clock.now - timedelta(weeks=n), timedelta(days=3.5)
    else:
        center = _shift(clock.now, -n * (12 if unit == "year" else 1))
        half = timedelta(days=182.5 if unit == "year" else 15)
    return _Span(center - half, center + half, _UNIT_GRANULARITY[unit])


def _resolve(kind: str, m: re.Match[str], clock: _Clock, rel: str | None, hint: int | None) -> _Span | None:
    """The period one atom names on its own; `hint` is a year to use where the atom gives none."""
    given = _year(m.groupdict().get("y"), clock)
    year = given if given is not None else hint
    if kind in ("iso_day", "numeric"):
        y, a, b = int(m["y"]), *((int(m["m"]), int(m["d"])) if kind == "iso_day" else (int(m["a"]), int(m["b"])))
        if kind == "numeric" and a != b and a <= 12 and b <= 12:  # 7/8/2023 reads either way: the days between
            early, late = sorted((date(y, a, b), date(y, b, a)))
            return clock.days(early, late + timedelta(days=1), "range", y)
        month, day_of_month = (a, b) if kind == "iso_day" or b > 12 else (b, a)
        return clock.day(date(y, month, day_of_month), y)
    if kind == "iso_month":
        return clock.month(int(m["y"]), int(m["m"]), given)
    if kind in ("dmy", "mdy"):
        day = _recent_day(clock, _month_number(m["mon"]), int(m["d"]), year)
        return clock.day(day, given) if day else None
    if kind in ("day_range_dm", "day_range_md"):
        month = _month_number(m["mon"])
        opening = _recent_day(clock, month, int(m["d1"]), year)
        closing = _recent_day(clock, month, int(m["d"]), opening.year) if opening else None
        if opening is None or closing is None or closing < opening:
            return None
        return clock.days(opening, closing + timedelta(days=1), "range", given)
    if kind in ("month_year", "month"):
        month = _month_number(m["mon"])
        return clock.month(year if year is not None else _month_year(clock, month, rel), month, given)
    if kind == "season":
        return _season(clock, m["s"].lower(), year, rel)
    if kind == "year":
        return clock.days(date(int(m["y"]), 1, 1), date(int(m["y"]) + 1, 1, 1), "year", given)
    if kind == "year_range":
        return clock.days(date(int(m["y1"]), 1, 1), date(int(m["y"]) + 1, 1, 1), "range", given)
    if kind == "decade":
        decade = int(m["y"]) if m["y"] else _year("'" + m["yy"], clock) or 0
        return clock.days(date(decade, 1, 1), date(decade + 10, 1, 1), "decade", decade)
    if kind == "quarter":
        q = int(m["q"]) if m["q"] else ["first", "second", "third", "fourth", "last"].index(m["qw"].lower()) % 4 + 1
        opening = date(int(m["y"]), 3 * q - 2, 1)
        return clock.days(opening, _add_months(opening, 3), "quarter", given)
    if kind == "relday":
        return clock.day(clock.today + timedelta(days={"yesterday": -1, "last night": -1, "tomorrow": 1}.get(_words(m["w"]), 0)))
    if kind == "calendar":
        return _calendar(clock, m["unit"].lower(), _words(m["rel"]), m["the"] is not None)
    if kind == "before_last":
        span = _calendar(clock, m["unit"].lower(), "last", False)
        if span.granularity in ("week", "range"):
            return replace(span, start=span.start - timedelta(days=7), end=span.end - timedelta(days=7))
        months = _UNIT_MONTHS[m["unit"].lower()]
        return replace(span, start=_shift(span.start, -months), end=span.start)
    if kind == "ago":
        return _ago(clock, m)
    if kind == "trailing":
        n, unit = _count(m["n"]), m["unit"].lower()
        if unit in ("day", "week"):
            return _Span(clock.now - timedelta(days=n * (7 if unit == "week" else 1)), clock.now, "range")
        return _Span(_shift(clock.now, -n * _UNIT_MONTHS[unit]), clock.now, "range")
    if kind == "weekday":
        return _weekday(clock, m["wd"].lower(), rel)
    return None


def _around(span: _Span, unit: str, unitop: str, nth: str, clock: _Clock) -> _Span:
    """ "the week of X", "the first week of X", "the day before X", "the weekend after X"."""
    first, last = span.start.date(), span.end.date()
    if unitop == "of" and nth and unit in ("week", "weekend"):
        index = {"first": 0, "second": 1, "third": 2, "fourth": 3}.get(nth)
        if unit == "week":
            start = span.start + timedelta(days=7 * index) if index is not None else span.end - timedelta(days=7)
            return _Span(start, start + timedelta(days=7), "week")
        saturdays = [first + timedelta(days=d) for d in range((last - first).days) if (first + timedelta(days=d)).weekday() == 5]
        if not saturdays:
            return span
        return clock.weekend_from(saturdays[-1 if index is None else min(index, len(saturdays) - 1)])
    if unitop == "of":
        if unit == "week":
            return clock.days(first - timedelta(days=first.weekday()), first + timedelta(days=7 - first.weekday()), "week")
        if unit == "weekend":
            return clock.weekend_from(first + timedelta(days=5 - first.weekday()))
        if unit == "month":
            return clock.month(first.year, first.month)
        if unit == "year":
            return clock.days(date(first.year, 1, 1), date(first.year + 1, 1, 1), "year", first.year)
        return span
    if unitop in ("before", "preceding"):
        if unit == "weekend":
            return clock.weekend_from(first - timedelta(days=first.weekday() + 2))
        if unit in _UNIT_MONTHS:
            return _Span(_shift(span.start, -_UNIT_MONTHS[unit]), span.start, "range")
        return _Span(span.start - timedelta(days=7 if unit == "week" else 1), span.start, "day" if unit == "day" else "range")
    if unit == "weekend":  # after, following
        return clock.weekend_from(last + timedelta(days=(5 - last.weekday()) % 7))
    if unit in _UNIT_MONTHS:
        return _Span(span.end, _shift(span.end, _UNIT_MONTHS[unit]), "range")
    return _Span(span.end, span.end + timedelta(days=7 if unit == "week" else 1), "day" if unit == "day" else "range")


def _modified(span: _Span, atom: _Atom, clock: _Clock) -> _Span:
    """The span as the words before the atom shape it: a part of it, a unit around it, an open range."""
    cue = atom.cue
    part = (cue.get("part") or cue.get("part2") or "").lower()
    if part and span.granularity in ("month", "season", "quarter", "year", "decade"):
        third = timedelta(days=round((span.end - span.start).days / 3))
        index = {"early": 0, "beginning": 0, "start": 0, "mid": 1, "middle": 1}.get(part, 2)
        start = span.start + third * index
        span = _Span(start, span.end if index == 2 else start + third, "range", span.year)
    if cue.get("unit"):
        span = _around(span, _words(cue.get("unit")), _words(cue.get("unitop")), _words(cue.get("nth")), clock)
    earlier = (cue.get("earlier") or "").lower()
    if earlier and atom.kind in ("relday", "calendar") and span.start <= clock.now < span.end:  # earlier today, later this week
        span = _Span(span.start, clock.now, "range") if earlier == "earlier" else _Span(clock.now, span.end, "range")
    floor = datetime(FLOOR_YEAR, 1, 1, tzinfo=clock.now.tzinfo)
    op = atom.op
    if op == "since":
        span = _Span(span.start, clock.now, "range")
    elif op == "after":
        span = _Span(span.end, clock.now, "range")
    elif op in ("before", "prior to"):
        span = _Span(floor, span.start, "range")
    elif op in ("until", "till", "up to", "through"):
        span = _Span(floor, span.end, "range")
    return span


def _period(text: str, start: int, end: int, span: _Span | None) -> Period | None:
    if span is None or not span.start < span.end:
        return None
    return Period(start=span.start, end=span.end, phrase=text[start:end], granularity=span.granularity, span=(start, end))


def _single(text: str, atom: _Atom, clock: _Clock, listed: bool, following: list[_Atom]) -> Period | None:
    if not _accepted(text, atom, listed):
        return None
    hint = None  # "in May, June and July 2023": May takes the year of the first listed after it that has one
    before = atom
    for other in following if atom.kind in _HINTABLE and atom.match.groupdict().get("y") is None else ():
        if not _LIST_JOIN.fullmatch(text, before.end, other.cue_start):
            break
        hint, before = _year(other.match.groupdict().get("y"), clock), other
        if hint is not None or other.kind not in _HINTABLE:
            break
    span = _resolve(atom.kind, atom.match, clock, _REL.get(_words(atom.cue.get("rel"))), hint)
    return _period(text, atom.cue_start, atom.end, _modified(span, atom, clock) if span else None)


def _pair(text: str, a: _Atom, b: _Atom, clock: _Clock) -> Period | None:
    """ "between A and B", "from A to B": from A's start to B's end. A side without a year takes the
    other's (the year before, where it would otherwise come after the end)."""
    rel_a = _REL.get(_words(a.cue.get("rel")))
    first = _resolve(a.kind, a.match, clock, rel_a, None)
    last = _resolve(b.kind, b.match, clock, None, None)
    if first is None or last is None:
        return None
    if first.year is None and last.year is not None and a.kind in _HINTABLE:
        first = _resolve(a.kind, a.match, clock, rel_a, last.year)
        if first is not None and first.start >= last.start:
            first = _resolve(a.kind, a.match, clock, rel_a, last.year - 1)
    elif last.year is None and first.year is not None and b.kind in _HINTABLE:
        last = _resolve(b.kind, b.match, clock, None, first.year)
        if last is not None and last.end <= first.start:
            last = _resolve(b.kind, b.match, clock, None, first.year + 1)
    elif first.start >= last.start and a.kind in _HINTABLE and not a.cue.get("rel"):
        first = _resolve(a.kind, a.match, clock, None, first.start.year - 1)
    if first is None or last is None:
        return None
    first, last = _modified(first, a, clock), _modified(last, b, clock)  # "between early May and late June"
    return _period(text, a.cue_start, b.end, _Span(first.start, last.end, "range"))
