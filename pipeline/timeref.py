"""Relative time in a memory's value, resolved against when the conversation happened.

A memory is read months later: "User's team upgraded to PostgreSQL 16 last week" is false by then, and
"用户去年搬到成都" means another year. Each relative expression is rewritten to the date it meant at
`occurred_at` (the ingest time, never the text's claim), at the precision it was said with: a day
("yesterday" → "on 2026-11-30"), a week ("last week" → "in the week of 2026-11-23"), a month ("last month" →
"in October 2026", "上个月" → "2026年10月"), a year ("去年" → "2025年"); a time ahead as well ("in 3 weeks",
"两个月后") and a named day of a week ("last Friday", "下周一"). A month named without its year, in digits or
Chinese numerals ("七月份毕业了"), takes the year its clause's tense says; the start or end of a month or a year
stays said ("年底要上线" → "2026年底要上线", "八月底要考" → "2027年8月底要考"). A rough count back ("a few months ago",
"两三个月前") is said as about the month it falls in ("around September 2026", "2026年9月左右"). Expressions with no
fixed point ("recently", "最近", "these days") are left alone: they say nothing a reader could resolve. So is a
length of time ("lost 5 kg in two months"): it names no time at all.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

_MONTHS = list(calendar.month_name)[1:]
_MONTH_RE = "|".join(_MONTHS)
_MONTH_NUM = {m.lower(): i for i, m in enumerate(_MONTHS, start=1)}
_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "ten": 10}
_ZH_NUM = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10, "半": 0}


def _month_shift(d: date, months: int) -> date:
    m = d.month - 1 + months
    return date(d.year + m // 12, m % 12 + 1, 1)


def _week_start(d: date) -> date:
    return d - timedelta(days=d.weekday())


@dataclass(frozen=True)
class Span:
    """A stretch of calendar time an expression names: [start, end), said at the precision of `unit`."""

    start: date
    end: date
    unit: str
    """day, week, month or year."""
    said: str | None = field(default=None, compare=False)
    """How a value says it, where a preposition before it stays ("in December" → "in December 2025")."""
    part: str = field(default="", compare=False)
    """The start (初) or the end (底) of the month or year said ("年底", "八月底")."""
    about: date | None = field(default=None, compare=False)
    """A day the expression means about, not exactly ("a few months ago", "几个月前"): a value names its month."""


def _day_span(d: date, days: int) -> Span:
    x = d + timedelta(days=days)
    return Span(x, x + timedelta(days=1), "day")


def _week_span(d: date, weeks: int) -> Span:
    x = _week_start(d) + timedelta(weeks=weeks)
    return Span(x, x + timedelta(days=7), "week")


def _month_span(d: date, months: int) -> Span:
    x = _month_shift(d, months)
    return Span(x, _month_shift(x, 1), "month")


def _few_days_ago(d: date) -> Span:
    """ "a few days ago", "前几天": no one day, so the week three days back falls in."""
    x = _week_start(d - timedelta(days=3))
    return Span(x, x + timedelta(days=7), "week")


def _year_span(year: int) -> Span:
    return Span(date(year, 1, 1), date(year + 1, 1, 1), "year")


def _n(word: str, table: dict[str, int]) -> int:
    return int(word) if word.isdigit() else table.get(word, 1)


Rule = tuple[re.Pattern[str], Callable[[re.Match[str], date], Span | None]]

_EN_COUNT = r"(\d+|a|an|one|two|three|four|five|six|ten)"
_ZH_COUNT = r"(\d{1,3}|[一两二三四五六七八九十])"


_ZH_NOT_TAIL = r"(?<![\d一二两三四五六七八九十百几])"
"""Not the end of a longer number: "十二个月前" is no "二个月前", "两三天前" no "三天前"."""
_EN_ROUGH = {"a couple": 2, "a couple of": 2, "couple of": 2, "a few": 3, "several": 4}


def _rough(word: str) -> int:
    """How many a rough count means: 几 / a few 3, a couple 2, several 4, 两三 3 (the larger of a range)."""
    word = word.lower()
    if word in _EN_ROUGH:
        return _EN_ROUGH[word]
    return 3 if word == "几" else _zh_month_num(word[-1])


def _count(m: re.Match[str]) -> int:
    word = m.group(1).lower()
    return _n(word, _ZH_NUM if word in _ZH_NUM else _EN_NUM)


def _fixed(span: Callable[[date], Span]) -> Callable[[re.Match[str], date], Span]:
    return lambda m, d: span(d)


_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}


def _en_weekday(m: re.Match[str], d: date) -> Span:
    """ "last Friday": the latest Friday before `d`; "next Monday", "this coming Monday": the first one after it;
    "this Saturday": that day of `d`'s own week."""
    which, day = m.group(1).lower(), _WEEKDAYS.index(m.group(2).lower())
    if which in ("last", "this past"):
        return _day_span(d, -((d.weekday() - day) % 7 or 7))
    if which in ("next", "this coming"):
        return _day_span(d, (day - d.weekday()) % 7 or 7)
    return _day_span(_week_start(d), day)


def _zh_weekday(m: re.Match[str], d: date) -> Span:
    """ "上周五", "下周一", "这周六": that day of the week before, after, or of `d`'s own."""
    weeks = {"上": -1, "下": 1}.get(m.group(1), 0)
    return _day_span(_week_start(d), 7 * weeks + _ZH_WEEKDAY[m.group(2)])


_EN_DURATION_RE = re.compile(
    r"\b(?:was|were|did|had|got|went|made|took|lost|gained|built|ran|wrote|read|learnt|grew|became|\w+ed|"
    r"finish(?:es)?|complete[sd]?|usually|always|every|often|can|could|takes?|"
    r"(?:have|has|had|did|do|does)n'?t|not|never|first time)\b",
    re.I,
)
"""Words that make "in 3 weeks" a length of time, not a time ahead: "lost 5 kg in two months", "I can finish a
book in a week", "haven't eaten meat in ten years", "the first time in years"."""


def _en_ahead(m: re.Match[str], d: date) -> Span | None:
    """ "in 3 weeks" from now, unless its clause says it is how long something took or takes."""
    clause, _ = _clause_around(m, 160)
    return None if _EN_DURATION_RE.search(clause) else _ahead(m.group(2).lower(), _count(m), d)


def _ahead(unit: str, count: int, d: date) -> Span:
    """`count` days, weeks, months or years after `d` ("in 3 weeks", "两个月后")."""
    unit = unit.removeprefix("个")
    if unit.startswith(("day", "天")):
        return _day_span(d, count)
    if unit.startswith(("week", "周", "星期", "礼拜")):
        return _week_span(d, count)
    if unit.startswith(("month", "月")):
        return _month_span(d, count)
    return _year_span(d.year + count)


_EN_STARTS_RE = re.compile(
    r"\b(?:start(?:s|ing)?|begin(?:s|ning)?|mov(?:e|es|ing)(?: in| out)?|leav(?:e|es|ing)|fly(?:ing)?|"
    r"i'll|we'll|will|going to|gonna)\b",
    re.I,
)
"""Verbs that say a bare weekday is ahead ("I start at Ocado on Monday", "we're moving on Saturday")."""


def _clause_around(m: re.Match[str], chars: int = 80, stops: str = r"[,.;!?]") -> tuple[str, str]:
    """The clause a match stands in, before and after it: at most `chars` characters each way (bounded, so the
    rules stay linear in the text), up to the nearest of `stops`."""
    before = re.split(stops, m.string[max(0, m.start() - chars) : m.start()])[-1]
    return before, re.split(stops, m.string[m.end() : m.end() + chars])[0]


def _en_past_weekday(m: re.Match[str], d: date) -> Span:
    """ "my last day was Friday": the latest Friday before `d`."""
    return _day_span(d, -((d.weekday() - _WEEKDAYS.index(m.group(1).lower())) % 7 or 7))


def _en_weekday_ahead(m: re.Match[str], d: date) -> Span | None:
    """ "I start on Monday": the first Monday after `d`, when the clause says something starts or will happen
    then; otherwise None ("we met on Tuesday": no tense this rule reads)."""
    clause, _ = _clause_around(m)
    day = _WEEKDAYS.index(m.group(1).lower())
    return _day_span(d, (day - d.weekday()) % 7 or 7) if _EN_STARTS_RE.search(clause) else None


_EN_YEARLY_RE = re.compile(r"\b(?:born|birthday|anniversary|every|each|usually|always|annual|yearly)\b", re.I)
_EN_AHEAD_RE = re.compile(
    r"\b(?:will|'ll|going to|gonna|plan(?:s|ning)? to|hop(?:e|ing) to|need to|have to|due|next|start(?:s|ing)?|"
    r"moving|leaving|graduating|getting married)\b",
    re.I,
)
_EN_PREPARING_RE = re.compile(
    r"\b(?:training|preparing|prepping|studying|revising|cramming|registered|signed up) for\b", re.I
)
"""Preparing for what is ahead ("training for the Berlin marathon in September"), unless the clause is in the past
("I was training for a race in May")."""
_EN_PAST_RE = re.compile(
    r"\b(?:was|were|did|had|got|went|passed|took|made|began|met|left|sold|bought|won|lost|came|saw|quit|"
    r"(?!need|feed|seed|speed|indeed|exceed|proceed|succeed)\w{2,}ed)\b",
    re.I,
)


def _bare_month_year(month: int, ahead: bool, past: bool, d: date) -> int | None:
    """The year of a month named without one: the latest when its clause is in the past, the next when it says
    something is ahead, None when it says neither."""
    if ahead:
        return d.year if month >= d.month else d.year + 1
    if past:
        return d.year if month <= d.month else d.year - 1
    return None


def _en_bare_month(m: re.Match[str], d: date) -> Span | None:
    """ "passed the N3 in December": the latest December; "we're moving in March": the next March; "born in
    May", "every year in June": None (a yearly month names no one month)."""
    left, right = _clause_around(m)
    clause = f"{left} {right}"
    if _EN_YEARLY_RE.search(clause):
        return None
    month = _MONTH_NUM[m.group(1).lower()]
    since = left.rstrip().lower().endswith("since")
    past = since or bool(_EN_PAST_RE.search(clause))
    ahead = bool(_EN_AHEAD_RE.search(clause) or (_EN_PREPARING_RE.search(clause) and not past))
    year = _bare_month_year(month, ahead and not since, past, d)
    if year is None:
        return None
    start = date(year, month, 1)
    return Span(start, _month_shift(start, 1), "month", said=f"{_MONTHS[month - 1]} {year}")


_EN: list[Rule] = [
    # a month without its year, after in/since/during/until/by/early/late/mid ("in December" → "in December 2025")
    (
        re.compile(
            rf"(?:(?<=\bin )|(?<=\bsince )|(?<=\bduring )|(?<=\buntil )|(?<=\bby )|(?<=\bearly )|(?<=\blate )"
            rf"|(?<=\bmid-)|(?<=\bmid ))({_MONTH_RE})\b(?!,?\s*(?:19|20)\d{{2}})(?!\s+\d)",
            re.I,
        ),
        _en_bare_month,
    ),
    (
        re.compile(rf"\b(last|next|this coming|this past|this)\s+({'|'.join(_WEEKDAYS)})\b", re.I),
        _en_weekday,
    ),
    # a bare weekday in the past ("my last day was Friday") or ahead ("I start on Monday"); not a weekly one ("on
    # Fridays") nor one that qualifies a noun ("we were Friday night regulars")
    (
        re.compile(
            rf"(?:(?<=\bwas )|(?<=\bwere ))(?:on )?({'|'.join(_WEEKDAYS)})(?=\s*(?:[,.;!?]|$|(?:and|but|so)\b))", re.I
        ),
        _en_past_weekday,
    ),
    (re.compile(rf"\bon ({'|'.join(_WEEKDAYS)})\b(?!s)", re.I), _en_weekday_ahead),
    # "in 3 weeks", "two months from now"; not "in a week or two", which names no one week
    (
        re.compile(r"\bin " + _EN_COUNT + r" (days?|weeks?|months?|years?)\b(?! or\b)", re.I),
        _en_ahead,
    ),
    (
        re.compile(r"\b" + _EN_COUNT + r" (days?|weeks?|months?|years?) from now\b", re.I),
        lambda m, d: _ahead(m.group(2).lower(), _count(m), d),
    ),
    (
        re.compile(r"\b(?:a few|a couple(?: of)?|couple of|few) days ago\b|\bthe other day\b", re.I),
        _fixed(lambda d: _few_days_ago(d)),
    ),
    (re.compile(r"\byesterday\b", re.I), _fixed(lambda d: _day_span(d, -1))),
    (
        re.compile(r"\b(?:today|tonight|this morning|this afternoon|this evening)\b", re.I),
        _fixed(lambda d: _day_span(d, 0)),
    ),
    (re.compile(r"\btomorrow\b", re.I), _fixed(lambda d: _day_span(d, 1))),
    (re.compile(r"\blast week(?:end)?\b", re.I), _fixed(lambda d: _week_span(d, -1))),
    (re.compile(r"\bthis week(?:end)?\b", re.I), _fixed(lambda d: _week_span(d, 0))),
    (re.compile(r"\bnext week(?:end)?\b", re.I), _fixed(lambda d: _week_span(d, 1))),
    (re.compile(r"\blast month\b", re.I), _fixed(lambda d: _month_span(d, -1))),
    (re.compile(r"\bthis month\b", re.I), _fixed(lambda d: _month_span(d, 0))),
    (re.compile(r"\bnext month\b", re.I), _fixed(lambda d: _month_span(d, 1))),
    (re.compile(r"\blast year\b", re.I), _fixed(lambda d: _year_span(d.year - 1))),
    (re.compile(r"\bthis year\b", re.I), _fixed(lambda d: _year_span(d.year))),
    (re.compile(r"\bnext year\b", re.I), _fixed(lambda d: _year_span(d.year + 1))),
    # "a couple of months ago", "a few weeks ago": no one week or month, said as about then
    (
        re.compile(r"\b(a couple of|a couple|couple of|a few|several) (weeks|months|years) ago\b", re.I),
        lambda m, d: _about(m.group(2).lower(), _rough(m.group(1)), d),
    ),
    (re.compile(_EN_COUNT + r" days? ago\b", re.I), lambda m, d: _day_span(d, -_count(m))),
    (re.compile(_EN_COUNT + r" weeks? ago\b", re.I), lambda m, d: _week_span(d, -_count(m))),
    (re.compile(_EN_COUNT + r" months? ago\b", re.I), lambda m, d: _month_span(d, -_count(m))),
    (re.compile(_EN_COUNT + r" years? ago\b", re.I), lambda m, d: _year_span(d.year - _count(m))),
]

_ZH_YEARLY_RE = re.compile(r"每年|生日|出生|纪念日|每逢|一般|通常")
_ZH_AHEAD_RE = re.compile(r"要|会|打算|准备|计划|将|想|预计|预产期|到时候|必须")
_ZH_PAST_RE = re.compile(r"了|过|已经|完")
_ZH_DONE_DE_RE = re.compile(r"\s*(?:就|才)?[\u4e00-\u9fff]{1,2}的")


ZH_MONTH = r"(\d{1,2}|十[一二]?|[一二三四五六七八九])"
"""A month's number, in digits or in Chinese numerals ("12", "十二", "七")."""
_ZH_BARE_MONTH_BEFORE = r"(?<![\d年.\-/一二两三四五六七八九十几个每这那上下本半第])"
"""Not a month when it follows a year, a digit or a count ("三个月", "每月", "这一月")."""
_ZH_BARE_MONTH_AFTER = r"(?![\d日号一二三四五六七八九十廿天饼亮嫂球季])"
"""Not a month of its own when a day follows ("3月5日" is read whole elsewhere; "八月十五" left) or 月 opens a word
("五月天", "月饼")."""
_ZH_PART = {"初": "初", "底": "底", "末": "底"}
"""The start or the end of a month or a year, as a value says it (年末 is 年底)."""


def _zh_month_num(word: str) -> int:
    """ "12" → 12, "十二" → 12, "十" → 10, "七" → 7."""
    if word.isdigit():
        return int(word)
    if word.startswith("十"):
        return 10 + (_ZH_NUM[word[1]] if len(word) > 1 else 0)
    return _ZH_NUM[word]


def _zh_tense(m: re.Match[str]) -> tuple[bool, bool, bool]:
    """Whether the clause around `m` names a yearly time, says something is ahead, or says it is done."""
    left, right = _clause_around(m, 40, r"[，,。；;！!？?]")
    clause = left + right
    # done: 了 / 过 / 已经 after it, or a verb and 的 ("三月份换的组", "年初搬的家": the 是…的 of a past event)
    past = bool(_ZH_PAST_RE.search(right) or _ZH_DONE_DE_RE.match(right))
    return bool(_ZH_YEARLY_RE.search(clause)), bool(_ZH_AHEAD_RE.search(clause)), past


def _zh_bare_month(m: re.Match[str], d: date) -> Span | None:
    """ "12月过了N3", "七月份毕业了": the latest December, July; "3月要搬家", "八月底要交": the next March,
    August; "每年3月", "3月出生": None. The start or end said of it stays ("2027年8月底")."""
    yearly, ahead, past = _zh_tense(m)
    month = _zh_month_num(m.group(1))
    if yearly or not 1 <= month <= 12:
        return None
    year = _bare_month_year(month, ahead, past, d)
    if year is None:
        return None
    return _month_part(date(year, month, 1), _ZH_PART.get(m.group(2) or "", ""))


def _year_part(year: int, part: str) -> Span:
    """The start (Jan–Mar) or the end (Oct–Dec) of `year`, or all of it."""
    if not part:
        return _year_span(year)
    first = date(year, 1 if part == "初" else 10, 1)
    return Span(first, _month_shift(first, 3), "year", part=part)


def _month_part(month: date, part: str) -> Span:
    """The start (1st–10th) or the end (21st on) of the month `month` opens, or all of it."""
    if not part:
        return Span(month, _month_shift(month, 1), "month")
    if part == "初":
        return Span(month, month.replace(day=11), "month", part=part)
    return Span(month.replace(day=21), _month_shift(month, 1), "month", part=part)


def _zh_year_part(m: re.Match[str], d: date) -> Span | None:
    """ "年初" or "年底" said alone: of this year, unless the clause puts it in a year already gone ("年底调过来的"
    said in March: the end of last year) or one still to come ("年初要搬" said in July: next year's start)."""
    yearly, ahead, past = _zh_tense(m)
    if yearly:
        return None
    part = _ZH_PART[m.group(1)]
    first, last = (1, 3) if part == "初" else (10, 12)
    year = d.year
    if ahead and d.month > last:
        year += 1
    elif past and not ahead and d.month < first:
        year -= 1
    return _year_part(year, part)


def _zh_month_part(m: re.Match[str], d: date) -> Span | None:
    """ "月初" or "月底" said alone: of this month, unless the clause puts it in a month gone ("月底搬的家" said on
    the 7th: last month's end) or one to come ("月初要交" said on the 20th: next month's start)."""
    yearly, ahead, past = _zh_tense(m)
    if yearly:
        return None
    part = _ZH_PART[m.group(1)]
    first, last = (1, 10) if part == "初" else (21, 31)
    month = date(d.year, d.month, 1)
    if ahead and d.day > last:
        month = _month_shift(month, 1)
    elif past and not ahead and d.day < first:
        month = _month_shift(month, -1)
    return _month_part(month, part)


def _month_part_of(m: re.Match[str], d: date, months: int) -> Span:
    """ "上个月", "这个月底": the month `months` from `d`'s, with the start or end said of it."""
    return _month_part(_month_span(d, months).start, _ZH_PART.get(m.group(1) or "", ""))


def _year_part_of(m: re.Match[str], year: int) -> Span:
    """ "去年", "去年底": `year`, with the start or end said of it."""
    return _year_part(year, _ZH_PART.get(m.group(1) or "", ""))


def _about(unit: str, back: int, d: date) -> Span:
    """ "a few months ago", "几个月前": no one month, so about `back` units before `d`: a value says the month (or
    year) it falls in ("around September 2026", "2026年9月左右"); a question's window takes a unit either side."""
    if unit.startswith(("year", "年")):
        at = date(d.year - back, 1, 1)
        return Span(date(at.year - 1, 1, 1), date(at.year + 2, 1, 1), "year", about=at)
    if unit.startswith(("month", "个月")):
        at = _month_shift(date(d.year, d.month, 1), -back)
        return Span(_month_shift(at, -1), _month_shift(at, 2), "month", about=at)
    at = d - timedelta(weeks=back)
    return Span(_week_start(at) - timedelta(weeks=1), _week_start(at) + timedelta(weeks=2), "week", about=at)


ZH_THIS = r"(?:这|(?<!日)本)个?"
""""This" before a week or a month (这周, 这个月, 本月); 本 of 日本 is none ("日本月薪", "日本周边")."""
ZH_NOT_MONTH_WORD = r"(?![饼嫂子亮球季])"
"""月 opening a word of its own (月饼, 月嫂, 月亮, 月季): no month is named. Not 月薪 or 月租: "上月薪水", "这个月租金"
name a month."""

_ZH: list[Rule] = [
    # a month without its year ("12月过了N3" → "2025年12月过了N3"), read by the tense of its clause
    (
        re.compile(_ZH_BARE_MONTH_BEFORE + ZH_MONTH + r"月份?([初底末])?" + _ZH_BARE_MONTH_AFTER),
        _zh_bare_month,
    ),
    # a day of a named week first: "上周五" is a day, not the week before and a stray "五"
    (re.compile(r"(?<!日)([上下这本])个?(?:周|星期|礼拜)([一二三四五六日天])"), _zh_weekday),
    # "三周后考雅思", "我两个月以后搬家": counted from now only where it opens the clause or follows its subject;
    # "毕业两年后" counts from graduating, and "二十天后" is a count this rule cannot read
    (
        re.compile(
            rf"(?:^|(?<=[\s，,。！？!?；;：:我你他她]))(?<![\d一二两三四五六七八九十百几]){_ZH_COUNT}"
            r"(天|个?(?:星期|礼拜|周)|个月|年)(?:之|以)?后"
        ),
        lambda m, d: _ahead(m.group(2), _count(m), d),
    ),
    # "前几天", "前两天": a few days back, said at the precision of the week they fall in
    (re.compile(r"前(?:几|两|三)天"), _fixed(lambda d: _few_days_ago(d))),
    (re.compile(r"前天"), _fixed(lambda d: _day_span(d, -2))),
    (re.compile(r"昨天|昨晚"), _fixed(lambda d: _day_span(d, -1))),
    (re.compile(r"今天|今晚|今早"), _fixed(lambda d: _day_span(d, 0))),
    (re.compile(r"明天"), _fixed(lambda d: _day_span(d, 1))),
    (re.compile(r"(?<![以之然最])后天"), _fixed(lambda d: _day_span(d, 2))),  # not "以后天天骑车"
    (re.compile(r"上(?:个)?(?:周|星期|礼拜)末?"), _fixed(lambda d: _week_span(d, -1))),
    (re.compile(ZH_THIS + r"(?:周|星期|礼拜)末?"), _fixed(lambda d: _week_span(d, 0))),
    (re.compile(r"下(?:个)?(?:周|星期|礼拜)末?"), _fixed(lambda d: _week_span(d, 1))),
    (re.compile(r"上(?:个)?月" + ZH_NOT_MONTH_WORD + "(?:月?([初底末]))?"), lambda m, d: _month_part_of(m, d, -1)),
    (re.compile(ZH_THIS + r"月" + ZH_NOT_MONTH_WORD + "(?:月?([初底末]))?"), lambda m, d: _month_part_of(m, d, 0)),
    (re.compile(r"下(?:个)?月" + ZH_NOT_MONTH_WORD + "(?:月?([初底末]))?"), lambda m, d: _month_part_of(m, d, 1)),
    (re.compile(r"前年([初底末])?"), lambda m, d: _year_part_of(m, d.year - 2)),
    (re.compile(r"去年([初底末])?"), lambda m, d: _year_part_of(m, d.year - 1)),
    (re.compile(r"今年([初底末])?"), lambda m, d: _year_part_of(m, d.year)),
    (re.compile(r"明年([初底末])?"), lambda m, d: _year_part_of(m, d.year + 1)),
    # "几个月前", "两三个月前": no one month, said as about then ("2026年9月左右")
    (
        re.compile(
            _ZH_NOT_TAIL + r"(几|[一两二三四五六七八][两二三四五六七八九](?!十))(个?(?:星期|礼拜|周)|个月|年)前"
        ),
        lambda m, d: _about(m.group(2), _rough(m.group(1)), d),
    ),
    (re.compile(_ZH_NOT_TAIL + _ZH_COUNT + r"天前"), lambda m, d: _day_span(d, -_count(m))),
    (re.compile(_ZH_NOT_TAIL + _ZH_COUNT + r"个?(?:星期|礼拜|周)前"), lambda m, d: _week_span(d, -_count(m))),
    (re.compile(_ZH_NOT_TAIL + _ZH_COUNT + r"个月前"), lambda m, d: _month_span(d, -_count(m))),
    (re.compile(_ZH_NOT_TAIL + _ZH_COUNT + r"年前"), lambda m, d: _year_span(d.year - _count(m))),
    # 年初 / 年底, 月初 / 月底 said alone ("年初从字节出来了", "月底要交房"), last: "去年年底" is read above as 去年
    (
        # not 年初一 … 年初十, days of the lunar new year ("大年初三")
        re.compile(
            r"(?<![\d年今去明前后一二两三四五六七八九十几每当青少童成中晚新跨拜多大过])年([初底末])(?![一二三四五六七八九十])"
        ),
        _zh_year_part,
    ),
    (re.compile(r"(?<![\d一二两三四五六七八九十个上下这本每岁日月])月([初底末])"), _zh_month_part),
]


def _en_text(span: Span) -> str:
    if span.said:
        return span.said
    if span.about:
        return f"around {span.about.year}" if span.unit == "year" else f"around {span.about:%B %Y}"
    if span.unit == "day":
        return f"on {span.start:%Y-%m-%d}"
    if span.unit == "week":
        return f"in the week of {span.start:%Y-%m-%d}"
    if span.unit == "month":
        return f"in {_MONTHS[span.start.month - 1]} {span.start.year}"
    return f"in {span.start.year}"


def _zh_text(span: Span) -> str:
    if span.part:  # 初 / 底 of a month or of a year
        return f"{span.start.year}年{span.part}" if span.unit == "year" else f"{span.start:%Y年%-m月}{span.part}"
    if span.about:
        return f"{span.about.year}年左右" if span.unit == "year" else f"{span.about:%Y年%-m月}左右"
    if span.unit == "day":
        return f"{span.start:%Y年%-m月%-d日}"
    if span.unit == "week":
        return f"{span.start:%Y年%-m月%-d日}那周"
    if span.unit == "month":
        return f"{span.start.year}年{span.start.month}月"
    return f"{span.start.year}年"


def resolve_relative_time(text: str, occurred_at: datetime | date) -> str:
    """`text` with each relative time expression replaced by the date it meant at `occurred_at`."""
    day = occurred_at.date() if isinstance(occurred_at, datetime) else occurred_at
    for rules, render in ((_ZH, _zh_text), (_EN, _en_text)):
        for pattern, span in rules:
            if pattern.search(text):
                text = _rewrite(text, pattern, span, render, day)
    return re.sub(r"\s{2,}", " ", text)


_UNFIXED = [
    # a day of a month not named ("14号去报到": which month's 14th the clause's tense seldom says); not a number
    # that names a line, a building, a seat or a size ("3号线", "10号楼", "36码")
    re.compile(r"(?<![\d月/.\-])\d{1,2}[号日](?![线楼院房门床机位球字码店路车期卡])"),
    re.compile(r"前阵子|前段时间|前些天|前些日子|这阵子"),
]
"""Times a value keeps as said, since they name no fixed point, and that `without_time` still takes out."""


def without_time(text: str) -> str:
    """`text` without the time expressions these rules read ("我上个月开始当组长了" → "我开始当组长了"), and those
    that name no fixed point ("前阵子", "14号"): when a thing happened says nothing of what it is."""
    out = text
    for _ in range(2):  # twice: "去年十月" is a month only once 去年 is out
        for pattern in (*(p for p, _ in (*_ZH, *_EN, *_ABSOLUTE)), *_UNFIXED):
            out = pattern.sub("\x00", out)
    if out == text:
        return text
    out = re.sub(r"(?<=[\u4e00-\u9fff])\x00+(?=[\u4e00-\u9fff])", "", out)  # Chinese runs on without a space
    return re.sub(r"\s*\x00[\s\x00]*", " ", out).strip(" ，,")  # "三个月前，我开始…" → "我开始…"


def _rewrite(
    text: str,
    pattern: re.Pattern[str],
    span: Callable[[re.Match[str], date], Span | None],
    render: Callable[[Span], str],
    day: date,
) -> str:
    """`text` with each match of `pattern` replaced by the rendered span it names at `day`."""

    def one(m: re.Match[str]) -> str:
        named = span(m, day)
        return m.group(0) if named is None else render(named)

    return pattern.sub(one, text)


# -- time named in a question ------------------------------------------------------------------------------


def _latest(month: int, day: int | None, now: date) -> date:
    """The most recent `month` (and `day`) not after `now`: "in May" asked in March means last May."""
    year = now.year if (month, day or 1) <= (now.month, now.day) else now.year - 1
    return date(year, month, day or 1)


def _month_of(year: int, month: int) -> Span:
    start = date(year, month, 1)
    return Span(start, _month_shift(start, 1), "month")


def _safe(make: Callable[[re.Match[str], date], Span]) -> Callable[[re.Match[str], date], Span | None]:
    def run(m: re.Match[str], d: date) -> Span | None:
        try:
            return make(m, d)
        except ValueError:  # "February 30", "13月": names no date
            return None

    return run


_ABSOLUTE: list[tuple[re.Pattern[str], Callable[[re.Match[str], date], Span | None]]] = [
    (  # "May 5, 2023", "5 May 2023" are days; "May 2023" a month
        re.compile(rf"\b({_MONTH_RE})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+((?:19|20)\d{{2}})\b", re.I),
        _safe(lambda m, d: _day_span(date(int(m[3]), _MONTH_NUM[m[1].lower()], int(m[2])), 0)),
    ),
    (
        re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_RE}),?\s+((?:19|20)\d{{2}})\b", re.I),
        _safe(lambda m, d: _day_span(date(int(m[3]), _MONTH_NUM[m[2].lower()], int(m[1])), 0)),
    ),
    (
        re.compile(rf"\b({_MONTH_RE})(?:\s+of)?,?\s+((?:19|20)\d{{2}})\b", re.I),
        _safe(lambda m, d: _month_of(int(m[2]), _MONTH_NUM[m[1].lower()])),
    ),
    (  # a bare month needs a preposition: "May I ask" names no month
        re.compile(rf"\b(?:in|during|since|until|before|after|early|late|mid-?|last|this)\s+({_MONTH_RE})\b", re.I),
        _safe(lambda m, d: _month_of(_latest(_MONTH_NUM[m[1].lower()], None, d).year, _MONTH_NUM[m[1].lower()])),
    ),
    (
        re.compile(r"\b(?:in|during|since|until|before|after)\s+((?:19|20)\d{2})\b", re.I),
        lambda m, d: _year_span(int(m[1])),
    ),
    (
        re.compile(r"((?:19|20)\d{2})年(\d{1,2})月(\d{1,2})[日号]"),
        _safe(lambda m, d: _day_span(date(int(m[1]), int(m[2]), int(m[3])), 0)),
    ),
    (re.compile(r"((?:19|20)\d{2})年(\d{1,2})月"), _safe(lambda m, d: _month_of(int(m[1]), int(m[2])))),
    (
        re.compile(r"(?<![\d年])(\d{1,2})月(\d{1,2})[日号]"),
        _safe(lambda m, d: _day_span(_latest(int(m[1]), int(m[2]), d), 0)),
    ),
    (
        re.compile(_ZH_BARE_MONTH_BEFORE + ZH_MONTH + r"月份?" + _ZH_BARE_MONTH_AFTER),
        _safe(lambda m, d: _month_of(_latest(_zh_month_num(m[1]), None, d).year, _zh_month_num(m[1]))),
    ),
    (re.compile(r"((?:19|20)\d{2})年(?!\d)"), lambda m, d: _year_span(int(m[1]))),
]


def time_window(text: str, now: datetime | date) -> Span | None:
    """The stretch of time a question names, resolved against when it is asked ("what did I buy last month",
    "in May 2023", "两个月前", "上周末"), or None. Several expressions give the span covering them all, at the
    coarsest unit said; expressions with no fixed point ("recently", "最近") give nothing, and neither does a bare
    month name without a preposition ("May I ask")."""
    day = now.date() if isinstance(now, datetime) else now
    spans: list[Span] = []
    rest = text
    for pattern, make in [*_ABSOLUTE, *_ZH, *_EN]:
        for m in pattern.finditer(rest):
            span = make(m, day)
            if span is not None:
                spans.append(span)
        rest = pattern.sub(" ", rest)  # "May 5, 2023" is one day, not also May and 2023
    if not spans:
        return None
    order = ["day", "week", "month", "year"]
    return Span(min(s.start for s in spans), max(s.end for s in spans), max((s.unit for s in spans), key=order.index))
